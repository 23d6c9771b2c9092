// Package tomlpos provides where things are written in a TOML document: an
// index from key paths to the line and column of their key and of their
// value, so that errors found after decoding still point at file:line:col.
//
// Paths join keys with "." ("model.num_heads"); rows of an array of tables
// and elements of an array add their index ("ops[1]", "ops[1].dtypes[0]").
// A table header is recorded under the table's path.
package tomlpos

import (
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Pos is a 1-based line and column; the zero Pos is no position.
type Pos struct{ Line, Col int }

// Index is where the keys, values and table headers of one document are.
type Index struct {
	// keys: every (prefix of a dotted) key, at its key.
	keys map[string]Pos
	// values: every value at the value (its key-value when the value has no
	// range); a table header at its first key.
	values map[string]Pos
	// tables and arrays: the headers of [name] and [[name]], in order.
	tables, arrays map[string][]Pos
}

// New indexes data with go-toml's low-level parser. It tolerates anything:
// on a document the decoder rejects it indexes what comes before the
// problem. The first occurrence of a path wins.
func New(data []byte) *Index {
	ix := &Index{keys: map[string]Pos{}, values: map[string]Pos{}, tables: map[string][]Pos{}, arrays: map[string][]Pos{}}
	var p unstable.Parser
	p.Reset(data)
	prefix := ""
	rows := map[string]int{}
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			name := keyPath(e.Key())
			prefix = name
			ix.key(&p, "", e.Key(), "")
			at := ix.header(&p, prefix, e.Key())
			ix.tables[name] = append(ix.tables[name], at)
		case unstable.ArrayTable:
			name := keyPath(e.Key())
			prefix = fmt.Sprintf("%s[%d]", name, rows[name])
			rows[name]++
			ix.key(&p, "", e.Key(), prefix)
			at := ix.header(&p, prefix, e.Key())
			ix.arrays[name] = append(ix.arrays[name], at)
		case unstable.KeyValue:
			path := ix.key(&p, prefix, e.Key(), "")
			ix.value(&p, path, e.Value(), e)
		}
	}
	return ix
}

// key records every prefix of a (dotted) key under prefix at its key node
// and returns the full path; last, when set, names the full path instead
// (an array-of-tables row).
func (ix *Index) key(p *unstable.Parser, prefix string, it unstable.Iterator, last string) string {
	path := prefix
	for it.Next() {
		n := it.Node()
		if path == "" {
			path = string(n.Data)
		} else {
			path += "." + string(n.Data)
		}
		at := path
		if last != "" && it.IsLast() {
			at = last
		}
		if _, dup := ix.keys[at]; !dup {
			ix.keys[at] = keyPos(p, n)
		}
	}
	if last != "" {
		return last
	}
	return path
}

// header records a table header's path at its first key node and returns
// that position.
func (ix *Index) header(p *unstable.Parser, path string, it unstable.Iterator) Pos {
	if !it.Next() {
		return Pos{}
	}
	at := shape(p, it.Node())
	if _, dup := ix.values[path]; !dup {
		ix.values[path] = at
	}
	return at
}

// value records a value node (its key-value node when the value carries no
// range) and descends into arrays and inline tables.
func (ix *Index) value(p *unstable.Parser, path string, v, kv *unstable.Node) {
	at := shape(p, v)
	if v.Raw.Length == 0 {
		at = shape(p, kv)
	}
	if _, dup := ix.values[path]; !dup {
		ix.values[path] = at
	}
	switch v.Kind {
	case unstable.Array:
		it := v.Children()
		for i := 0; it.Next(); i++ {
			ix.value(p, fmt.Sprintf("%s[%d]", path, i), it.Node(), kv)
		}
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				ix.value(p, ix.key(p, path, c.Key(), ""), c.Value(), c)
			}
		}
	}
}

// shape is where n's raw range starts.
func shape(p *unstable.Parser, n *unstable.Node) Pos {
	if n == nil || int(n.Raw.Offset)+int(n.Raw.Length) > len(p.Data()) {
		return Pos{}
	}
	s := p.Shape(n.Raw)
	return Pos{Line: s.Start.Line, Col: s.Start.Column}
}

// keyPos is shape for a key node, no position when it has no range.
func keyPos(p *unstable.Parser, n *unstable.Node) Pos {
	if n == nil || n.Raw.Length == 0 {
		return Pos{}
	}
	return shape(p, n)
}

func keyPath(it unstable.Iterator) string {
	var parts []string
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return strings.Join(parts, ".")
}

// HasKey reports whether path's key is written in the document.
func (ix *Index) HasKey(path string) bool {
	_, ok := ix.keys[path]
	return ok
}

// Key returns where path's key is written, or the key of its closest
// written parent ("workloads.b64.seed" falls back to "workloads.b64").
func (ix *Index) Key(path string) (Pos, bool) { return closest(ix.keys, path) }

// Value returns where path's value is written, or the value or table
// header of its closest written parent ("ops[1].source" falls back to the
// "ops[1]" header).
func (ix *Index) Value(path string) (Pos, bool) { return closest(ix.values, path) }

// Tables returns where each [name] header is written, in order.
func (ix *Index) Tables(name string) []Pos { return ix.tables[name] }

// ArrayTables returns where each [[name]] header is written, in order.
func (ix *Index) ArrayTables(name string) []Pos { return ix.arrays[name] }

// closest looks path up in m, then its parents: the path up to its last
// "." or "[". Entries without a position are skipped.
func closest(m map[string]Pos, path string) (Pos, bool) {
	for path != "" {
		if at, ok := m[path]; ok && at.Line > 0 {
			return at, true
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return Pos{}, false
}
