// Package canon is Cacheon's one identity rule: canonical JSON and the
// domain-separated SHA-256 digest over it.
//
// Canonical JSON here means: object keys sorted by their UTF-8 bytes, no
// insignificant whitespace, strings as raw UTF-8 with only '"', '\\' and
// control characters escaped (\b \f \n \r \t short forms, other controls as
// \u00xx), integers in shortest decimal form, and no floating-point numbers at
// all: decimals travel as canonical decimal strings (see Decimal).
//
// Every manifest, record and evidence object is identified by
//
//	sha256(canonical_json({"domain": D, "payload": P, "schema_version": N}))
//
// in lowercase hex. Readers are strict: duplicate keys, unknown or missing
// fields, floats, non-canonical bytes and the all-zero digest are rejected.
package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Marshal returns the canonical JSON encoding of v. v is first encoded with
// encoding/json (so struct tags apply) and then re-encoded canonically; any
// non-integral number is an error.
func Marshal(v any) ([]byte, error) {
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canon: encode: %w", err)
	}
	tree, err := parseTree(raw.Bytes())
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := writeValue(&out, tree, "$"); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Canonicalize re-encodes arbitrary JSON bytes canonically. It rejects
// duplicate keys, floats, invalid UTF-8 and trailing data.
func Canonicalize(data []byte) ([]byte, error) {
	tree, err := parseTree(data)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := writeValue(&out, tree, "$"); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// IsCanonical reports whether data is exactly its own canonical encoding.
func IsCanonical(data []byte) bool {
	c, err := Canonicalize(data)
	return err == nil && bytes.Equal(c, data)
}

// envelope is the domain-separated object that is hashed.
type envelope struct {
	Domain        string `json:"domain"`
	Payload       any    `json:"payload"`
	SchemaVersion int    `json:"schema_version"`
}

// Digest returns the lowercase hex SHA-256 of the canonical envelope
// {"domain": domain, "payload": payload, "schema_version": schemaVersion}.
func Digest(domain string, schemaVersion int, payload any) (string, error) {
	if domain == "" {
		return "", errors.New("canon: digest: empty domain")
	}
	if schemaVersion < 1 {
		return "", fmt.Errorf("canon: digest %s: schema_version %d must be >= 1", domain, schemaVersion)
	}
	b, err := Marshal(envelope{Domain: domain, Payload: payload, SchemaVersion: schemaVersion})
	if err != nil {
		return "", fmt.Errorf("canon: digest %s: %w", domain, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// ValidDigest checks that s is 64 lowercase hex digits and not all zero.
func ValidDigest(s string) error {
	if len(s) != 64 {
		return fmt.Errorf("digest %q: want 64 lowercase hex digits, got %d characters", clip(s), len(s))
	}
	zero := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		default:
			return fmt.Errorf("digest %q: character %q at %d is not lowercase hex", clip(s), c, i)
		}
		if c != '0' {
			zero = false
		}
	}
	if zero {
		return fmt.Errorf("digest %q: the all-zero digest is never valid", clip(s))
	}
	return nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// node is a parsed JSON value: nil, bool, json.Number, string, []node or
// *object.
type node any

type object struct {
	keys []string
	vals map[string]node
}

// parseTree decodes JSON with duplicate-key detection, integers only.
func parseTree(data []byte) (node, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("canon: input is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseNode(dec, "$")
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("canon: trailing data after the JSON value")
	}
	return v, nil
}

func parseNode(dec *json.Decoder, path string) (node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("canon: %s: %w", path, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := &object{vals: map[string]node{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("canon: %s: %w", path, err)
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("canon: %s: object key is not a string", path)
				}
				if _, dup := obj.vals[k]; dup {
					return nil, fmt.Errorf("canon: %s: duplicate key %q", path, k)
				}
				v, err := parseNode(dec, path+"."+k)
				if err != nil {
					return nil, err
				}
				obj.keys = append(obj.keys, k)
				obj.vals[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("canon: %s: %w", path, err)
			}
			return obj, nil
		case '[':
			arr := []node{}
			for i := 0; dec.More(); i++ {
				v, err := parseNode(dec, fmt.Sprintf("%s[%d]", path, i))
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("canon: %s: %w", path, err)
			}
			return arr, nil
		}
		return nil, fmt.Errorf("canon: %s: unexpected delimiter %v", path, t)
	case json.Number:
		if _, err := strconv.ParseInt(string(t), 10, 64); err != nil {
			return nil, fmt.Errorf("canon: %s: number %s is not an integer in int64 range (decimals travel as canonical decimal strings)", path, t)
		}
		return t, nil
	case string, bool, nil:
		return t, nil
	}
	return nil, fmt.Errorf("canon: %s: unexpected token %v", path, tok)
}

func writeValue(b *bytes.Buffer, v node, path string) error {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if t {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		n, err := strconv.ParseInt(string(t), 10, 64)
		if err != nil {
			return fmt.Errorf("canon: %s: %w", path, err)
		}
		b.WriteString(strconv.FormatInt(n, 10))
	case string:
		return writeString(b, t, path)
	case []node:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeValue(b, e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case *object:
		keys := append([]string(nil), t.keys...)
		sort.Strings(keys) // Go string order is bytewise
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeString(b, k, path); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := writeValue(b, t.vals[k], path+"."+k); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("canon: %s: unsupported value %T", path, v)
	}
	return nil
}

func writeString(b *bytes.Buffer, s, path string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("canon: %s: string is not valid UTF-8", path)
	}
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return nil
}
