package nodeconfig

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// The raw, decoded form of a configuration file. Integers are int64 so
// that a value out of range is reported as such rather than as a decode
// error; durations and decimals are strings.
type rawConfig struct {
	Data              string        `toml:"data"`
	Work              string        `toml:"work"`
	Chain             string        `toml:"chain"`
	Arena             string        `toml:"arena"`
	Python            string        `toml:"python"`
	AllowLoopbackHTTP bool          `toml:"allow_loopback_http"`
	Listen            string        `toml:"listen"`
	LogFormat         string        `toml:"log_format"`
	LogLevel          string        `toml:"log_level"`
	Poll              string        `toml:"poll"`
	Referee           rawReferee    `toml:"referee"`
	Settlement        rawSettlement `toml:"settlement"`
	Weights           rawWeights    `toml:"weights"`
	Intake            rawIntake     `toml:"intake"`
	Base              []rawBase     `toml:"base"`
}

type rawReferee struct {
	Group       string `toml:"group"`
	Holder      string `toml:"holder"`
	Calibration string `toml:"calibration"`
	Evidence    string `toml:"evidence"`
	LeaseTTL    string `toml:"lease_ttl"`
	Waves       int64  `toml:"waves"`
	Warmup      int64  `toml:"warmup"`
	TPrompts    int64  `toml:"t_prompts"`
	AuditShare  string `toml:"audit_share"`
	MinAudited  int64  `toml:"min_audited"`
	LoadTimeout string `toml:"load_timeout"`
	WaveTime    string `toml:"wave_time"`
}

type rawSettlement struct {
	Holder   string `toml:"holder"`
	LeaseTTL string `toml:"lease_ttl"`
}

type rawWeights struct {
	Key        string `toml:"key"`
	BurnUID    int64  `toml:"burn_uid"`
	BurnHotkey string `toml:"burn_hotkey"`
	HalfLife   int64  `toml:"half_life"`
	Interval   int64  `toml:"interval"`
	Deadline   int64  `toml:"deadline"`
}

type rawIntake struct {
	PendingCap     int64 `toml:"pending_cap"`
	HotkeyEpochCap int64 `toml:"hotkey_epoch_cap"`
	EpochBlocks    int64 `toml:"epoch_blocks"`
	SLABlocks      int64 `toml:"sla_blocks"`
	FetchAttempts  int64 `toml:"fetch_attempts"`
	QualifyRetries int64 `toml:"qualify_retries"`
}

type rawBase struct {
	Target string `toml:"target"`
	Bundle string `toml:"bundle"`
}

// decode decodes data strictly into the raw form: unknown keys, keys in
// another case (go-toml matches case-insensitively) and wrong types are
// errors.
func decode(data []byte, file string) (*rawConfig, error) {
	values, err := walkKeys(data, file)
	if err != nil {
		return nil, err
	}
	var raw rawConfig
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, decodeError(file, err, values)
	}
	return &raw, nil
}

// decodeError rewrites go-toml's errors with file:line:col and the key
// path; values (value positions to key paths) names the key of a value in
// an inline table or a [[base]] row, which go-toml does not.
func decodeError(file string, err error, values map[pos]string) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) && len(strict.Errors) > 0 {
		de := &strict.Errors[0]
		line, col := de.Position()
		return &Error{File: file, Line: line, Col: col, Path: strings.Join(de.Key(), "."), Msg: unknownKey}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		key := strings.Join(de.Key(), ".")
		if at, ok := values[pos{line, col}]; ok {
			key = at
		}
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if rest, ok := strings.CutPrefix(msg, "cannot decode TOML "); ok {
			kind, _, _ := strings.Cut(rest, " into ")
			msg = fmt.Sprintf("wrong type: got a TOML %s, want %s", kind, expectedType(schemaPath(key)))
		}
		return &Error{File: file, Line: line, Col: col, Path: key, Msg: msg}
	}
	return &Error{File: file, Msg: "invalid TOML: " + err.Error(), Err: err}
}

const unknownKey = "unknown key (not in the validator configuration's schema)"

// schemaPath drops a path's row indexes: "base[1].target" -> "base.target".
func schemaPath(path string) string {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] == '[' {
			for i < len(path) && path[i] != ']' {
				i++
			}
			continue
		}
		b.WriteByte(path[i])
	}
	return b.String()
}

// expectedType describes the TOML type of key (a schema path).
func expectedType(key string) string {
	t, ok := schemaOf(reflect.TypeFor[rawConfig]())[key]
	if !ok {
		return "a value of another type"
	}
	last := key[strings.LastIndexByte(key, '.')+1:]
	switch {
	case t.Kind() == reflect.Bool:
		return "a boolean"
	case t.Kind() == reflect.Int64:
		return "an integer"
	case t.Kind() == reflect.Struct:
		return "a table"
	case t.Kind() == reflect.Slice:
		return "an array of tables ([[" + key + "]])"
	case last == "audit_share":
		return `a decimal string such as "0.25"`
	case last == "poll" || strings.HasSuffix(last, "_ttl") || last == "load_timeout" || last == "wave_time":
		return `a duration string such as "2s" or "10m"`
	}
	return "a string"
}

// schemaOf maps every key path of the raw struct type t (tables and arrays
// of tables by their path, without row indexes) to its Go type.
func schemaOf(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for f := range t.Fields() {
			path := prefix + f.Tag.Get("toml")
			m[path] = f.Type
			switch {
			case f.Type.Kind() == reflect.Struct:
				walk(f.Type, path+".")
			case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
				walk(f.Type.Elem(), path+".")
			}
		}
	}
	walk(t, "")
	return m
}

// pos is a 1-based line and column.
type pos struct{ line, col int }

// keyPath is a key's path as shown in errors, rows indexed
// ("base[1].target"), and as the schema knows it ("base.target").
type keyPath struct{ shown, schema string }

func (k keyPath) child(name string) keyPath {
	if k.shown == "" {
		return keyPath{name, name}
	}
	return keyPath{k.shown + "." + name, k.schema + "." + name}
}

func (k keyPath) row(i int) keyPath { return keyPath{fmt.Sprintf("%s[%d]", k.shown, i), k.schema} }

// walker checks the keys of a document against the schema.
type walker struct {
	file   string
	data   []byte
	p      unstable.Parser
	schema map[string]reflect.Type
	values map[pos]string // where each value is written -> its shown path
}

// walkKeys checks every key written in data, exactly as written, against
// the schema, and that tables and arrays of tables are written as such. It
// returns where each value is written (by its shown key path). A syntax
// error ends the walk quietly: the decoder reports it.
func walkKeys(data []byte, file string) (map[pos]string, error) {
	w := &walker{file: file, data: data, schema: schemaOf(reflect.TypeFor[rawConfig]()), values: map[pos]string{}}
	w.p.Reset(data)
	var prefix keyPath
	rows := map[string]int{}
	for w.p.NextExpression() {
		e := w.p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			path, err := w.key(keyPath{}, e.Key())
			if err != nil {
				return nil, err
			}
			if err := w.header(path, e.Kind == unstable.ArrayTable, e.Key()); err != nil {
				return nil, err
			}
			prefix = path
			if e.Kind == unstable.ArrayTable {
				prefix = path.row(rows[path.schema])
				rows[path.schema]++
			}
		case unstable.KeyValue:
			path, err := w.key(prefix, e.Key())
			if err != nil {
				return nil, err
			}
			if err := w.value(path, e.Value(), false); err != nil {
				return nil, err
			}
		}
	}
	return w.values, nil
}

// at is where n is written.
func (w *walker) at(n *unstable.Node) (pos, bool) {
	if n == nil || n.Raw.Length == 0 || int(n.Raw.Offset)+int(n.Raw.Length) > len(w.data) {
		return pos{}, false
	}
	s := w.p.Shape(n.Raw)
	return pos{s.Start.Line, s.Start.Column}, true
}

// fail is an error at n about path.
func (w *walker) fail(n *unstable.Node, path keyPath, msg string) error {
	e := &Error{File: w.file, Path: path.shown, Msg: msg}
	if p, ok := w.at(n); ok {
		e.Line, e.Col = p.line, p.col
	}
	return e
}

// key walks the parts of a (dotted) key under prefix and returns its
// path, or an error at the first part the schema lacks.
func (w *walker) key(prefix keyPath, it unstable.Iterator) (keyPath, error) {
	path := prefix
	for it.Next() {
		n := it.Node()
		path = path.child(string(n.Data))
		if _, ok := w.schema[path.schema]; ok {
			continue
		}
		msg := unknownKey
		if lower := strings.ToLower(path.schema); w.schema[lower] != nil {
			msg = fmt.Sprintf("unknown key (keys are lowercase: %s)", lower)
		}
		return keyPath{}, w.fail(n, path, msg)
	}
	return path, nil
}

// header checks that a table header is [name] for a table and [[name]] for
// an array of tables (go-toml takes either for either).
func (w *walker) header(path keyPath, array bool, it unstable.Iterator) error {
	var msg string
	switch kind := w.schema[path.schema].Kind(); {
	case array && kind == reflect.Struct:
		msg = fmt.Sprintf("a table: write [%s], not [[%s]]", path.schema, path.schema)
	case !array && kind == reflect.Slice:
		msg = fmt.Sprintf("an array of tables: write [[%s]] rows", path.schema)
	case array && kind != reflect.Slice:
		msg = "wrong type: got an array of tables, want " + expectedType(path.schema)
	case !array && kind != reflect.Struct:
		msg = "wrong type: got a table, want " + expectedType(path.schema)
	default:
		return nil
	}
	it.Next()
	return w.fail(it.Node(), path, msg)
}

// value records where v is written and walks into arrays and inline
// tables; element tells an array's element (an inline table there is a
// row) from a key's value.
func (w *walker) value(path keyPath, v *unstable.Node, element bool) error {
	if v.Kind == unstable.InlineTable && !element && w.schema[path.schema].Kind() == reflect.Slice {
		return w.fail(v, path, fmt.Sprintf("an array of tables: write [[%s]] rows or an array of inline tables", path.schema))
	}
	if p, ok := w.at(v); ok {
		if _, dup := w.values[p]; !dup {
			w.values[p] = path.shown
		}
	}
	i := 0
	for it := v.Children(); it.Next(); i++ {
		c := it.Node()
		switch {
		case v.Kind == unstable.Array:
			if err := w.value(path.row(i), c, true); err != nil {
				return err
			}
		case v.Kind == unstable.InlineTable && c.Kind == unstable.KeyValue:
			sub, err := w.key(path, c.Key())
			if err != nil {
				return err
			}
			if err := w.value(sub, c.Value(), false); err != nil {
				return err
			}
		}
	}
	return nil
}
