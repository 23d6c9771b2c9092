// Package bundle is everything the validator does with a miner's bundle
// before any candidate code runs: it loads and checks manifest.toml and the
// variants' capability metadata against the slot catalog (Load), computes the
// bundle's content hash and the contribution identities derived from it
// (ContentHash, SelectedPayloadDigest, SelectedDeltaDigest,
// AttributionDigest), writes deterministic archives (Package) and unpacks
// untrusted ones within hard bounds (Extract). The on-chain payload that
// references a packaged bundle is the market's (internal/market/chain).
package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	toml "github.com/pelletier/go-toml/v2"

	"cacheon/internal/capability"
	"cacheon/internal/fielderr"
	"cacheon/internal/target"
	"cacheon/internal/tomlpos"
)

// ManifestName is the manifest's file name at the bundle root.
const ManifestName = "manifest.toml"

// ABIVersion is the only supported abi_version.
const ABIVersion = "cacheon-op-abi-v0"

// DefaultVariant is the variant name of a row that declares none.
const DefaultVariant = "default"

// Manifest limits.
const (
	maxManifestBytes = 1 << 20
	maxOps           = 256
	maxListLen       = 64
	maxPathBytes     = 1024
)

// Competition is the manifest's optional [competition] table: the
// registered target the bundle requests and how.
type Competition struct {
	Target string      `json:"target"`
	Mode   target.Mode `json:"mode"`
}

// Manifest is a checked manifest.toml.
type Manifest struct {
	BundleID   string `json:"bundle_id"`
	ABIVersion string `json:"abi_version"`
	// Competition is nil when the manifest has no [competition] table.
	Competition *Competition `json:"competition,omitempty"`
	// Ops are the [[ops]] rows in file order, resolved against the catalog.
	Ops []Op `json:"ops"`
}

// Op is one resolved [[ops]] row.
type Op struct {
	Slot    string `json:"slot"`              // registered slot name
	Variant string `json:"variant"`           // DefaultVariant when the row names none
	Source  string `json:"source"`            // slash-separated path of the .py file, relative to the bundle root
	Entry   string `json:"entry"`             // function in Source to call; defaults to the slot's entry name
	Prepare string `json:"prepare,omitempty"` // prepare function in Source; set iff the slot has a prepare step
	// DTypes and Architectures are the row's normalised, sorted declarations
	// (torch dtype names; "smNN"); nil when the row declares none.
	DTypes        []string `json:"dtypes,omitempty"`
	Architectures []string `json:"architectures,omitempty"`
	Metadata      string   `json:"metadata,omitempty"`     // path of the metadata JSON, "" when none
	CUDASources   []string `json:"cuda_sources,omitempty"` // paths of declared .cu/.cuh files, in file order
	// Domain is the variant's capability domain: the metadata's predicates
	// intersected with the row's dtypes and architectures.
	Domain capability.Domain `json:"domain"`
	// Notes is information for the author about how the row's metadata was
	// read (descriptive keys ignored, where max_last_dim applies); never a
	// problem.
	Notes []string `json:"notes,omitempty"`
}

// Crownable reports whether the manifest requests a target that can earn a
// crown: it has a [competition] table whose mode is slot or atomic.
func (m *Manifest) Crownable() bool { return m.NotCrownableReason() == "" }

// NotCrownableReason says why the bundle cannot be crowned, or returns ""
// when it can.
func (m *Manifest) NotCrownableReason() string {
	switch {
	case m.Competition == nil:
		return "the manifest has no [competition] table, so it requests no registered target; add target and mode = \"slot\""
	case m.Competition.Mode == target.ModeSystem:
		return "mode = \"system\" is a legacy whole-system request and is never crownable; request one registered target with mode = \"slot\" or \"atomic\""
	}
	return ""
}

// ManifestError is a problem with manifest.toml or a file it declares:
// File is ManifestName, Path the offending key path such as "ops[2].source"
// ("" for the file as a whole); Line and Col are 1-based and 0 when TOML
// gives no position.
type ManifestError fielderr.Problem

// Error implements error: "manifest.toml:3:10: ops[0].variant: message"
// or, without a position, "manifest.toml: ops[2].source: message".
func (e *ManifestError) Error() string { return (*fielderr.Problem)(e).Error() }

// Unwrap returns the underlying cause.
func (e *ManifestError) Unwrap() error { return e.Err }

// rawManifest mirrors manifest.toml for strict decoding. Pointers tell a
// missing key from an empty value.
type rawManifest struct {
	BundleID    *string         `toml:"bundle_id"`
	ABIVersion  *string         `toml:"abi_version"`
	Competition *rawCompetition `toml:"competition"`
	Ops         []rawOp         `toml:"ops"`
}

type rawCompetition struct {
	Target *string `toml:"target"`
	Mode   *string `toml:"mode"`
}

type rawOp struct {
	Slot          *string   `toml:"slot"`
	Variant       *string   `toml:"variant"`
	Source        *string   `toml:"source"`
	Entry         *string   `toml:"entry"`
	Prepare       *string   `toml:"prepare"`
	DTypes        *[]string `toml:"dtypes"`
	Architectures *[]string `toml:"architectures"`
	Metadata      *string   `toml:"metadata"`
	CUDASources   *[]string `toml:"cuda_sources"`
}

// manifestParser carries the document and its positions while checking.
type manifestParser struct {
	pos *tomlpos.Index
}

func (mp *manifestParser) errAt(path, hint, format string, args ...any) *ManifestError {
	e := &ManifestError{File: ManifestName, Path: path, Msg: fmt.Sprintf(format, args...), Hint: hint}
	if p, ok := mp.pos.Value(path); ok {
		e.Line, e.Col = p.Line, p.Col
	}
	return e
}

// decodeManifest strictly decodes the TOML document, translating decoder
// errors into ManifestErrors with positions.
func decodeManifest(data []byte) (*rawManifest, *manifestParser, error) {
	if len(data) > maxManifestBytes {
		return nil, nil, &ManifestError{File: ManifestName, Msg: fmt.Sprintf("file is %d bytes, more than %d", len(data), maxManifestBytes)}
	}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, nil, &ManifestError{File: ManifestName, Line: 1, Col: 1, Msg: "the file starts with a UTF-8 byte-order mark",
			Hint: "save it as UTF-8 without a BOM"}
	}
	var raw rawManifest
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, nil, translateTOMLError(data, err)
	}
	return &raw, &manifestParser{pos: tomlpos.New(data)}, nil
}

// translateTOMLError rewrites go-toml's errors in manifest vocabulary.
func translateTOMLError(data []byte, err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) && len(strict.Errors) > 0 {
		de := &strict.Errors[0]
		for i := range strict.Errors {
			if k := strict.Errors[i].Key(); len(k) > 0 && unsupportedKey(k[len(k)-1]) != "" {
				de = &strict.Errors[i]
				break
			}
		}
		line, col := de.Position()
		path := tomlKeyPath(data, de.Key(), line)
		if k := de.Key(); len(k) > 0 {
			if reason := unsupportedKey(k[len(k)-1]); reason != "" {
				return &ManifestError{File: ManifestName, Line: line, Col: col, Path: path,
					Msg: "not supported by this validator: " + reason, Hint: "remove the key"}
			}
		}
		known := "bundle_id, abi_version, [competition] target and mode, [[ops]] slot, variant, source, entry, prepare, dtypes, architectures, metadata, cuda_sources"
		return &ManifestError{File: ManifestName, Line: line, Col: col, Path: path, Msg: "unknown key",
			Hint: "the manifest schema is closed: " + known}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		path := tomlKeyPath(data, de.Key(), line)
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if kind, ok := decodedKind(msg); ok {
			msg = fmt.Sprintf("wrong type: got a TOML %s, want %s", kind, expectedType(path))
		}
		return &ManifestError{File: ManifestName, Line: line, Col: col, Path: path, Msg: msg}
	}
	return &ManifestError{File: ManifestName, Msg: "invalid TOML", Err: err}
}

// unsupportedKey says why a manifest key of the established tool is not
// supported by this validator, or returns "" for any other key. These keys
// ask for more than a slot's entry ABI, which is all this validator runs.
func unsupportedKey(key string) string {
	switch key {
	case "setup":
		return "setup names an engine setup hook, bundle code run inside the serving engine at startup; " +
			"this validator runs candidate code only in its sandboxed worker, through the slot's entry (and prepare)"
	case "base_kernel", "override_point":
		return key + " asks for an override composed into a validator-owned base kernel; " +
			"this validator serves no base kernels or override points: implement the slot's entry ABI directly"
	}
	return ""
}

// decodedKind extracts the TOML value kind from go-toml's "cannot decode
// TOML <kind> into struct field ..." message.
func decodedKind(msg string) (string, bool) {
	rest, ok := strings.CutPrefix(msg, "cannot decode TOML ")
	if !ok {
		return "", false
	}
	kind, _, ok := strings.Cut(rest, " into ")
	return kind, ok
}

// tomlKeyPath renders a decoder key as a manifest path, adding the [[ops]]
// row index that go-toml leaves out.
func tomlKeyPath(data []byte, key toml.Key, line int) string {
	if len(key) == 0 {
		return ""
	}
	parts := append([]string(nil), key...)
	if parts[0] == "ops" {
		if i := opsIndex(tomlpos.New(data), line); i >= 0 && len(parts) > 1 {
			parts[0] = fmt.Sprintf("ops[%d]", i)
		}
	}
	return strings.Join(parts, ".")
}

// opsIndex returns the index of the [[ops]] row whose header is the last
// one at or before line, or -1.
func opsIndex(ix *tomlpos.Index, line int) int {
	idx := -1
	for i, h := range ix.ArrayTables("ops") {
		if h.Line <= line {
			idx = i
		}
	}
	return idx
}

// opsTable returns where a [ops] table header (instead of [[ops]]) is
// written, the zero Pos when there is none.
func opsTable(ix *tomlpos.Index) tomlpos.Pos {
	for _, h := range ix.Tables("ops") {
		if h.Line > 0 {
			return h
		}
	}
	return tomlpos.Pos{}
}

func expectedType(path string) string {
	last := path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		last = path[i+1:]
	}
	if i := strings.IndexByte(last, '['); i >= 0 {
		last = last[:i]
	}
	switch last {
	case "ops":
		return "an array of tables ([[ops]])"
	case "competition":
		return "a table ([competition])"
	case "dtypes", "architectures", "cuda_sources":
		if strings.HasSuffix(path, "]") {
			return "a string"
		}
		return "an array of strings"
	}
	return "a string"
}

// isName reports whether s is 1..maxLen bytes of [A-Za-z0-9._-] starting
// with a letter or digit (bundle ids and variant names).
func isName(s string, maxLen int) bool {
	if s == "" || len(s) > maxLen || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isPythonKeyword reports whether s is a reserved word of Python 3.
func isPythonKeyword(s string) bool {
	switch s {
	case "False", "None", "True", "and", "as", "assert", "async", "await", "break",
		"class", "continue", "def", "del", "elif", "else", "except", "finally", "for",
		"from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or",
		"pass", "raise", "return", "try", "while", "with", "yield":
		return true
	}
	return false
}

func checkPythonIdent(s string) error {
	ok := s != "" && len(s) <= 128 && !(s[0] >= '0' && s[0] <= '9')
	for i := 0; ok && i < len(s); i++ {
		ok = isAlnum(s[i]) || s[i] == '_'
	}
	if !ok {
		return fmt.Errorf("%q is not a Python identifier (ASCII letters, digits and _, not starting with a digit)", clipName(s))
	}
	if isPythonKeyword(s) {
		return fmt.Errorf("%q is a Python keyword", s)
	}
	return nil
}

func checkTargetName(s string) error {
	ok := s != "" && len(s) <= 128
	for _, part := range strings.Split(s, ".") {
		ok = ok && part != ""
		for i := 0; ok && i < len(part); i++ {
			c := part[i]
			ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
		}
	}
	if !ok {
		return fmt.Errorf("%q is not a target name (dot-separated lowercase words such as activation.silu_and_mul)", clipName(s))
	}
	return nil
}

// checkRelPath validates a slash-separated path relative to the bundle
// root: no absolute paths, backslashes, control characters, empty, "." or
// ".." components.
func checkRelPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case len(p) > maxPathBytes:
		return fmt.Errorf("path is longer than %d bytes", maxPathBytes)
	case !isValidUTF8(p):
		return errors.New("path is not valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return errors.New("absolute paths are not allowed; use a path relative to the bundle root")
	case strings.Contains(p, `\`):
		return errors.New("backslashes are not allowed; use / as the separator")
	case len(p) >= 2 && p[1] == ':' && (p[0]|0x20 >= 'a' && p[0]|0x20 <= 'z'):
		return errors.New("drive-letter paths are not allowed")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return fmt.Errorf("path contains control character %U", r)
		}
	}
	for _, part := range strings.Split(p, "/") {
		switch part {
		case "":
			return errors.New("empty path component (doubled or trailing /)")
		case ".":
			return errors.New(`"." components are not allowed`)
		case "..":
			return errors.New(`".." components are not allowed: paths must stay inside the bundle`)
		}
	}
	return nil
}
