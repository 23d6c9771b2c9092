package capability

import (
	"bytes"
	"encoding/json"

	"fmt"
	"io"
	"unicode/utf8"

	"cacheon/internal/fielderr"
)

// Limits on metadata files. They are far above anything a real variant needs
// and keep a hostile file from costing more than a few milliseconds.
const (
	// MaxMetadataBytes is the largest metadata file accepted.
	MaxMetadataBytes = 1 << 20
	// maxDepth bounds JSON nesting; valid metadata nests at most 4 levels.
	maxDepth = 16
	// maxSetSize bounds a one_of list.
	maxSetSize = 1024
)

// MetadataError is a problem in a metadata file. Path is the JSON path of
// the offending value ("capabilities.head_dim.min"), "" for the whole file;
// Hint says what the author can do about it ("" when nothing useful). It
// names no file and no position.
type MetadataError fielderr.Problem

// Error implements error: "path: message (hint: ...)".
func (e *MetadataError) Error() string { return (*fielderr.Problem)(e).Error() }

func metaErr(path, hint, format string, args ...any) error {
	return &MetadataError{Path: path, Msg: fmt.Sprintf(format, args...), Hint: hint}
}

// jobject is a parsed JSON object that remembers key order.
type jobject struct {
	keys []string
	vals map[string]any
}

// parseJSON decodes data into nil, bool, json.Number, string, []any or
// *jobject, rejecting invalid UTF-8, duplicate keys, excessive nesting and
// trailing data.
func parseJSON(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, metaErr("", "", "file is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, "", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, metaErr("", "", "trailing data after the JSON object")
	}
	return v, nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func parseValue(dec *json.Decoder, path string, depth int) (any, error) {
	if depth > maxDepth {
		return nil, metaErr(path, "", "JSON nested more than %d levels deep", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, metaErr(path, "", "invalid JSON: %v", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := &jobject{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, metaErr(path, "", "invalid JSON: %v", err)
				}
				k := kt.(string) // the decoder only yields string keys
				if _, dup := obj.vals[k]; dup {
					return nil, metaErr(joinPath(path, k), "JSON readers disagree on which duplicate wins; keep one", "duplicate key")
				}
				v, err := parseValue(dec, joinPath(path, k), depth+1)
				if err != nil {
					return nil, err
				}
				obj.keys = append(obj.keys, k)
				obj.vals[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, metaErr(path, "", "invalid JSON: %v", err)
			}
			return obj, nil
		case '[':
			arr := []any{}
			for i := 0; dec.More(); i++ {
				v, err := parseValue(dec, fmt.Sprintf("%s[%d]", path, i), depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, metaErr(path, "", "invalid JSON: %v", err)
			}
			return arr, nil
		}
		return nil, metaErr(path, "", "invalid JSON: unexpected %v", t)
	}
	return tok, nil
}

// Metadata is a read metadata file: the capability domain it declares, the
// slot it names (if any) and the top-level keys it carries for people only.
type Metadata struct {
	// Domain is the conjunction of every predicate the file declares.
	Domain Domain
	// Slot is the slot the descriptive key "op" or "slot" names, as written
	// ("" when the file names none); SlotKey is that key. The reader does not
	// know the catalog: the caller compares Slot with the row's slot.
	Slot, SlotKey string
	// Ignored lists the top-level keys that are description only (notes,
	// model, arch, kl_threshold, regime, ...), in file order. They never
	// affect the domain.
	Ignored []string
	// LastDimField is the capability field the legacy key max_last_dim
	// bounded ("" when the file has no max_last_dim).
	LastDimField string
}

// ReadOptions say how the legacy keys whose meaning depends on the slot are
// read.
type ReadOptions struct {
	// LastDimField is the numeric capability field that the legacy key
	// max_last_dim bounds: the last dimension of the slot's main input as
	// its live binding supplies it ("" means last_dim; attention slots use
	// head_dim).
	LastDimField string
}

// ParseMetadata reads a variant's metadata JSON file with the default
// options and returns its domain; see ReadMetadata.
func ParseMetadata(b []byte) (Domain, error) {
	m, err := ReadMetadata(b, ReadOptions{})
	if err != nil {
		return Domain{}, err
	}
	return m.Domain, nil
}

// ReadMetadata reads a variant's metadata JSON file:
//
//	{"capabilities": {"head_dim": 128, "num_tokens": {"min": 1, "max": 4096},
//	                  "dtype": ["bf16", "fp16"]}}
//
// A predicate is a scalar (exact), a list (one_of), or an object with
// exactly one of "exact" / "one_of", or with "min" and/or "max" (integers,
// numeric fields only, min ≤ max). Field names and values are normalised
// (aliases such as tokens → num_tokens, bf16 → bfloat16, sm_90 → sm90).
//
// The legacy top-level keys of the established tool are folded into the
// domain by intersection: dtypes (→ dtype one_of), architectures (→
// architecture one_of), quant (string or list → quant one_of); an empty
// list of any of them places no restriction. max_last_dim bounds
// o.LastDimField, min_num_tokens / max_num_tokens bound num_tokens, and
// graph_safe is a bool declaration (see Domain.GraphSafe). "op" and "slot"
// name the slot (a string; both given must agree). Every other top-level key
// is descriptive and ignored, as the established reader ignores it, and is
// listed in Metadata.Ignored. A duplicate key anywhere, a float in a
// predicate, or an unknown capability field is an error (*MetadataError).
func ReadMetadata(b []byte, o ReadOptions) (*Metadata, error) {
	lastDim := "last_dim"
	if o.LastDimField != "" {
		lastDim = o.LastDimField
	}
	if !IsNumericField(lastDim) {
		return nil, fmt.Errorf("read metadata: LastDimField %q is not a numeric capability field", clip(lastDim))
	}
	if len(b) > MaxMetadataBytes {
		return nil, metaErr("", "", "file is %d bytes, more than the %d-byte limit", len(b), MaxMetadataBytes)
	}
	v, err := parseJSON(b)
	if err != nil {
		return nil, err
	}
	top, ok := v.(*jobject)
	if !ok {
		return nil, metaErr("", `write {"capabilities": {...}}`, "metadata must be a JSON object, got %s", jsonKind(v))
	}
	m := &Metadata{}
	var d Domain
	for _, key := range top.keys {
		val := top.vals[key]
		var part Domain
		switch key {
		case "capabilities":
			part, err = parseCapabilities(val)
		case "dtypes":
			part, err = legacyStrings("dtypes", "dtype", val, false)
		case "architectures":
			part, err = legacyStrings("architectures", "architecture", val, false)
		case "quant":
			part, err = legacyStrings("quant", "quant", val, true)
		case "max_last_dim":
			part, err = legacyBound(key, lastDim, val, false)
			m.LastDimField = lastDim
		case "min_num_tokens":
			part, err = legacyBound(key, "num_tokens", val, true)
		case "max_num_tokens":
			part, err = legacyBound(key, "num_tokens", val, false)
		case "graph_safe":
			bv, isBool := val.(bool)
			if !isBool {
				return nil, metaErr(key, "", "must be true or false, got %s", jsonKind(val))
			}
			part.GraphSafe = &bv
		case "op", "slot":
			err = m.slotKey(key, val)
		default:
			m.Ignored = append(m.Ignored, key)
			continue
		}
		if err != nil {
			return nil, err
		}
		d = d.Intersect(part)
	}
	m.Domain = d
	return m, nil
}

// slotKey records the slot that "op" or "slot" names.
func (m *Metadata) slotKey(key string, val any) error {
	s, isStr := val.(string)
	switch {
	case !isStr:
		return metaErr(key, "", "must be the slot name as a string, got %s", jsonKind(val))
	case s == "":
		return metaErr(key, "name the slot, or leave the key out", "empty slot name")
	case m.SlotKey != "" && s != m.Slot:
		return metaErr(key, "keep one of op and slot", "names slot %q, but %q names %q", clip(s), m.SlotKey, clip(m.Slot))
	case m.SlotKey == "":
		m.Slot, m.SlotKey = s, key
	}
	return nil
}

// IgnoredNote explains, for a person, why the top-level key key of a
// metadata file has no effect; a key that spells a capability field says
// where a predicate on it belongs.
func IgnoredNote(key string) string {
	if f, err := NormalizeField(key); err == nil {
		return fmt.Sprintf("top-level key %q is descriptive and ignored; to restrict %s, put it under \"capabilities\"", clip(key), f)
	}
	return fmt.Sprintf("top-level key %q is descriptive and ignored", clip(key))
}

func jsonKind(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "the number " + clip(string(t))
	case string:
		return "a string"
	case []any:
		return "a list"
	case *jobject:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func parseCapabilities(v any) (Domain, error) {
	obj, ok := v.(*jobject)
	if !ok {
		return Domain{}, metaErr("capabilities", "", "must be an object mapping field names to predicates, got %s", jsonKind(v))
	}
	var d Domain
	seen := map[string]string{}
	for _, raw := range obj.keys {
		path := "capabilities." + raw
		f, err := NormalizeField(raw)
		if err != nil {
			return Domain{}, metaErr(path, "", "%v", err)
		}
		if prev, dup := seen[f]; dup {
			return Domain{}, metaErr(path, "use one spelling per field", "field %s is already given as %q", f, prev)
		}
		seen[f] = raw
		p, err := parsePredicate(path, f, obj.vals[raw])
		if err != nil {
			return Domain{}, err
		}
		d = d.with(f, p)
	}
	return d, nil
}

// parsePredicate parses one field's predicate in any of its spellings.
func parsePredicate(path, field string, v any) (pred, error) {
	k, _ := vocabulary(field)
	switch t := v.(type) {
	case []any:
		return parseSet(path, field, k, t)
	case *jobject:
		return parsePredicateObject(path, field, k, t)
	default:
		return parseSet(path, field, k, []any{v})
	}
}

func parsePredicateObject(path, field string, k kind, obj *jobject) (pred, error) {
	if len(obj.keys) == 0 {
		return pred{}, metaErr(path, `use {"exact": V}, {"one_of": [...]} or {"min": N, "max": N}`, "empty predicate object")
	}
	has := map[string]bool{}
	for _, key := range obj.keys {
		switch key {
		case "exact", "one_of", "min", "max":
			has[key] = true
		default:
			return pred{}, metaErr(path+"."+key, "predicate keys are exact, one_of, min and max", "unknown predicate key")
		}
	}
	set := has["exact"] || has["one_of"]
	rng := has["min"] || has["max"]
	switch {
	case has["exact"] && has["one_of"]:
		return pred{}, metaErr(path, "", "cannot give both exact and one_of")
	case set && rng:
		return pred{}, metaErr(path, "", "cannot mix exact/one_of with min/max")
	case has["exact"]:
		if _, isList := obj.vals["exact"].([]any); isList {
			return pred{}, metaErr(path+".exact", "use one_of for a list", "exact takes one value, got a list")
		}
		return parseSet(path+".exact", field, k, []any{obj.vals["exact"]})
	case has["one_of"]:
		list, isList := obj.vals["one_of"].([]any)
		if !isList {
			return pred{}, metaErr(path+".one_of", "", "must be a list, got %s", jsonKind(obj.vals["one_of"]))
		}
		return parseSet(path+".one_of", field, k, list)
	}
	if k != numericField {
		return pred{}, metaErr(path, "use exact or one_of", "%s is a context field and takes no min/max", field)
	}
	p := pred{numeric: true}
	for _, key := range []string{"min", "max"} {
		if !has[key] {
			continue
		}
		n, err := intValue(path+"."+key, field, obj.vals[key])
		if err != nil {
			return pred{}, err
		}
		if key == "min" {
			p.hasLo, p.lo = true, n
		} else {
			p.hasHi, p.hi = true, n
		}
	}
	if p.hasLo && p.hasHi && p.lo > p.hi {
		return pred{}, metaErr(path, "", "min %d is greater than max %d", p.lo, p.hi)
	}
	return p, nil
}

func parseSet(path, field string, k kind, vals []any) (pred, error) {
	if len(vals) == 0 {
		return pred{}, metaErr(path, "omit the field to allow any value", "one_of must not be empty")
	}
	if len(vals) > maxSetSize {
		return pred{}, metaErr(path, "", "one_of has %d values, more than %d", len(vals), maxSetSize)
	}
	p := pred{numeric: k == numericField, isSet: true}
	for i, v := range vals {
		ep := path
		if len(vals) > 1 {
			ep = fmt.Sprintf("%s[%d]", path, i)
		}
		if k == numericField {
			n, err := intValue(ep, field, v)
			if err != nil {
				return pred{}, err
			}
			p.ints = append(p.ints, n)
			continue
		}
		s, err := contextValue(ep, field, v)
		if err != nil {
			return pred{}, err
		}
		p.strs = append(p.strs, s)
	}
	if p.numeric {
		p.ints = uniqueInts(p.ints)
	} else {
		p.strs = uniqueStrs(p.strs)
	}
	return p, nil
}

func intValue(path, field string, v any) (int64, error) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, metaErr(path, "", "%s is a numeric field: want an integer, got %s", field, jsonKind(v))
	}
	n, err := parseInt(field, string(num))
	if err != nil {
		return 0, metaErr(path, "", "%v", err)
	}
	return n, nil
}

func contextValue(path, field string, v any) (string, error) {
	var s string
	switch t := v.(type) {
	case string:
		s = t
	case json.Number:
		if field != "architecture" {
			return "", metaErr(path, "", "%s is a context field: want a string, got %s", field, jsonKind(v))
		}
		s = string(t)
	default:
		return "", metaErr(path, "", "%s is a context field: want a string, got %s", field, jsonKind(v))
	}
	c, err := normalizeContext(field, s)
	if err != nil {
		return "", metaErr(path, "", "%v", err)
	}
	return c, nil
}

// legacyStrings parses a legacy top-level list of strings (or, when
// scalarOK, a single string) into a one_of predicate on field. An empty list
// places no restriction, as in the established reader.
func legacyStrings(key, field string, v any, scalarOK bool) (Domain, error) {
	list, isList := v.([]any)
	if isList && len(list) == 0 {
		return Domain{}, nil
	}
	if !isList {
		if _, isStr := v.(string); !isStr || !scalarOK {
			return Domain{}, metaErr(key, "", "must be a list of strings, got %s", jsonKind(v))
		}
		list = []any{v}
	}
	for i, e := range list {
		if _, isStr := e.(string); !isStr && field != "architecture" {
			return Domain{}, metaErr(fmt.Sprintf("%s[%d]", key, i), "", "want a string, got %s", jsonKind(e))
		}
	}
	p, err := parseSet(key, field, contextField, list)
	if err != nil {
		return Domain{}, err
	}
	return Domain{}.with(field, p), nil
}

// legacyBound parses a legacy top-level integer bound on field.
func legacyBound(key, field string, v any, lower bool) (Domain, error) {
	n, err := intValue(key, field, v)
	if err != nil {
		return Domain{}, err
	}
	p := pred{numeric: true}
	if lower {
		p.hasLo, p.lo = true, n
	} else {
		p.hasHi, p.hi = true, n
	}
	return Domain{}.with(field, p), nil
}
