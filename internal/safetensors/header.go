package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"cacheon/internal/tensor"
)

// metadataKey is the reserved header key holding free-form string metadata.
const metadataKey = "__metadata__"

// entry is one tensor's header record after strict parsing.
type entry struct {
	name       string
	dtype      tensor.DType
	shape      []int
	begin, end int64
}

// header is the parsed JSON header.
type header struct {
	metadata map[string]string // nil when "__metadata__" is absent
	entries  []entry           // in header order
}

// headerParser walks the header JSON token by token so that duplicate keys,
// unknown fields and non-integer numbers are seen (encoding/json's struct
// decoding would silently accept or merge them).
type headerParser struct {
	dec *json.Decoder
	lim Limits
}

// parseHeader strictly parses the JSON header h.
func parseHeader(h []byte, lim Limits) (*header, error) {
	if !utf8.Valid(h) {
		return nil, formatErr("", "header", "not valid UTF-8")
	}
	if len(h) == 0 || h[0] != '{' {
		return nil, formatErr("", "header", "does not start with '{'")
	}
	p := &headerParser{dec: json.NewDecoder(bytes.NewReader(h)), lim: lim}
	p.dec.UseNumber()
	hd, err := p.parseTop()
	if err != nil {
		return nil, err
	}
	// Only space padding (0x20) may follow the closing brace.
	for i, c := range h[p.dec.InputOffset():] {
		if c != ' ' {
			return nil, formatErr("", "header", fmt.Sprintf("unexpected byte %#02x after the JSON object (offset %d)", c, int(p.dec.InputOffset())+i))
		}
	}
	return hd, nil
}

// token reads the next JSON token, turning syntax errors into format errors.
func (p *headerParser) token(name, field string) (json.Token, error) {
	tok, err := p.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, &FormatError{Tensor: name, Field: field, Reason: "invalid JSON", Err: err}
	}
	return tok, nil
}

// expectDelim reads a token that must be the delimiter want.
func (p *headerParser) expectDelim(want json.Delim, name, field, what string) error {
	tok, err := p.token(name, field)
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return formatErr(name, field, fmt.Sprintf("must be %s, got %s", what, describe(tok)))
	}
	return nil
}

// key reads an object key; it returns ok=false at the closing brace.
func (p *headerParser) key(name, field string) (string, bool, error) {
	tok, err := p.token(name, field)
	if err != nil {
		return "", false, err
	}
	switch v := tok.(type) {
	case string:
		return v, true, nil
	case json.Delim:
		if v == '}' {
			return "", false, nil
		}
	}
	return "", false, formatErr(name, field, "malformed object: "+describe(tok))
}

// parseTop parses the top-level object.
func (p *headerParser) parseTop() (*header, error) {
	if err := p.expectDelim('{', "", "header", "a JSON object"); err != nil {
		return nil, err
	}
	hd := &header{}
	seen := make(map[string]bool)
	for {
		k, ok, err := p.key("", "header")
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if seen[k] {
			return nil, formatErr(k, "", "duplicate key in header")
		}
		seen[k] = true
		if k == metadataKey {
			if hd.metadata, err = p.parseMetadata(); err != nil {
				return nil, err
			}
			continue
		}
		if k == "" {
			return nil, formatErr("", "", "empty tensor name")
		}
		if len(hd.entries) >= p.lim.MaxTensors {
			return nil, formatErr("", "header", fmt.Sprintf("more than %d tensors", p.lim.MaxTensors))
		}
		e, err := p.parseEntry(k)
		if err != nil {
			return nil, err
		}
		hd.entries = append(hd.entries, e)
	}
	return hd, nil
}

// parseMetadata parses the "__metadata__" object of string values.
func (p *headerParser) parseMetadata() (map[string]string, error) {
	if err := p.expectDelim('{', "", metadataKey, "an object of strings"); err != nil {
		return nil, err
	}
	md := make(map[string]string)
	for {
		k, ok, err := p.key("", metadataKey)
		if err != nil {
			return nil, err
		}
		if !ok {
			return md, nil
		}
		if _, dup := md[k]; dup {
			return nil, formatErr("", metadataKey, fmt.Sprintf("duplicate key %q", clip(k)))
		}
		tok, err := p.token("", metadataKey)
		if err != nil {
			return nil, err
		}
		v, isStr := tok.(string)
		if !isStr {
			return nil, formatErr("", metadataKey, fmt.Sprintf("value of %q must be a string, got %s", clip(k), describe(tok)))
		}
		md[k] = v
	}
}

// parseEntry parses one tensor entry {"dtype", "shape", "data_offsets"}.
func (p *headerParser) parseEntry(name string) (entry, error) {
	e := entry{name: name}
	if err := p.expectDelim('{', name, "", "an object"); err != nil {
		return e, err
	}
	var hasDType, hasShape, hasOffsets bool
	for {
		k, ok, err := p.key(name, "")
		if err != nil {
			return e, err
		}
		if !ok {
			break
		}
		switch k {
		case "dtype":
			if hasDType {
				return e, formatErr(name, k, "duplicate field")
			}
			hasDType = true
			if e.dtype, err = p.parseDType(name); err != nil {
				return e, err
			}
		case "shape":
			if hasShape {
				return e, formatErr(name, k, "duplicate field")
			}
			hasShape = true
			dims, err := p.parseInts(name, k, tensor.MaxRank)
			if err != nil {
				return e, err
			}
			e.shape = make([]int, len(dims))
			for i, d := range dims {
				e.shape[i] = int(d) // parseInts bounds every value by MaxBytes
			}
		case "data_offsets":
			if hasOffsets {
				return e, formatErr(name, k, "duplicate field")
			}
			hasOffsets = true
			offs, err := p.parseInts(name, k, 2)
			if err != nil {
				return e, err
			}
			if len(offs) != 2 {
				return e, formatErr(name, k, fmt.Sprintf("must have exactly 2 entries, got %d", len(offs)))
			}
			e.begin, e.end = offs[0], offs[1]
		default:
			return e, formatErr(name, k, "unknown field")
		}
	}
	switch {
	case !hasDType:
		return e, formatErr(name, "dtype", "missing")
	case !hasShape:
		return e, formatErr(name, "shape", "missing")
	case !hasOffsets:
		return e, formatErr(name, "data_offsets", "missing")
	}
	return e, nil
}

// parseDType reads the dtype string.
func (p *headerParser) parseDType(name string) (tensor.DType, error) {
	tok, err := p.token(name, "dtype")
	if err != nil {
		return tensor.Invalid, err
	}
	s, ok := tok.(string)
	if !ok {
		return tensor.Invalid, formatErr(name, "dtype", "must be a string, got "+describe(tok))
	}
	dt, err := tensor.DTypeFromSafetensors(s)
	if err != nil {
		return tensor.Invalid, &FormatError{Tensor: name, Field: "dtype", Reason: fmt.Sprintf("unsupported dtype %q", clip(s)), Err: err}
	}
	return dt, nil
}

// parseInts reads an array of at most maxLen non-negative integers, each at
// most tensor.MaxBytes.
func (p *headerParser) parseInts(name, field string, maxLen int) ([]int64, error) {
	if err := p.expectDelim('[', name, field, "an array of integers"); err != nil {
		return nil, err
	}
	out := []int64{}
	for {
		tok, err := p.token(name, field)
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && d == ']' {
			return out, nil
		}
		if len(out) == maxLen {
			return nil, formatErr(name, field, fmt.Sprintf("more than %d entries", maxLen))
		}
		num, ok := tok.(json.Number)
		if !ok {
			return nil, formatErr(name, field, fmt.Sprintf("entry %d must be an integer, got %s", len(out), describe(tok)))
		}
		v, err := parseUint(string(num))
		if err != nil {
			return nil, &FormatError{Tensor: name, Field: field, Reason: fmt.Sprintf("entry %d", len(out)), Err: err}
		}
		out = append(out, v)
	}
}

// parseUint parses a JSON number that must be a plain non-negative integer
// no larger than tensor.MaxBytes.
func parseUint(s string) (int64, error) {
	if s == "" || s[0] == '-' {
		return 0, fmt.Errorf("%s is negative; must be a non-negative integer", clip(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%s is not an integer", clip(s))
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v > tensor.MaxBytes {
		return 0, fmt.Errorf("%s exceeds %d", clip(s), int64(tensor.MaxBytes))
	}
	return v, nil
}

// describe names a JSON token for an error message.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return fmt.Sprintf("%q", string(v))
	case string:
		return "a string"
	case json.Number:
		return "the number " + clip(string(v))
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

// clip shortens hostile strings for error messages.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
