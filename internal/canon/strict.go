package canon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Decode is the strict reader for canonical objects. It rejects bytes that
// are not exactly canonical (which also rules out duplicate keys, floats and
// whitespace), JSON keys that name no field of v, and fields of v that are
// missing from the JSON unless their tag says omitempty. Error messages name
// the offending field by its JSON path.
func Decode(data []byte, v any) error {
	tree, err := parseTree(data)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := writeValue(&out, tree, "$"); err != nil {
		return err
	}
	if !bytes.Equal(out.Bytes(), data) {
		return fmt.Errorf("canon: not canonical: %s", firstDifference(data, out.Bytes()))
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("canon: decode target must be a non-nil pointer, got %T", v)
	}
	if err := checkShape(tree, rv.Type().Elem(), "$"); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("canon: decode: %w", err)
	}
	// One object, one byte form: an omitted-when-empty field written out
	// with its zero value would give a second encoding of the same object.
	again, err := Marshal(reflect.ValueOf(v).Elem().Interface())
	if err != nil {
		return fmt.Errorf("canon: re-encode: %w", err)
	}
	if !bytes.Equal(again, data) {
		return fmt.Errorf("canon: not canonical: the object re-encodes differently (%s); omit optional fields instead of writing empty values", firstDifference(data, again))
	}
	return nil
}

// DecodeLenient is Decode without the canonical-bytes requirement, for
// human-written files: it still rejects duplicate keys, floats, unknown and
// missing fields.
func DecodeLenient(data []byte, v any) error {
	c, err := Canonicalize(data)
	if err != nil {
		return err
	}
	return Decode(c, v)
}

func firstDifference(got, want []byte) string {
	n := min(len(got), len(want))
	for i := 0; i < n; i++ {
		if got[i] != want[i] {
			return fmt.Sprintf("byte %d is %q, canonical form has %q", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("length %d, canonical form has length %d", len(got), len(want))
}

type fieldInfo struct {
	name      string
	typ       reflect.Type
	omitempty bool
}

func structFields(t reflect.Type) []fieldInfo {
	var out []fieldInfo
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct && tag == "" {
			out = append(out, structFields(f.Type)...)
			continue
		}
		out = append(out, fieldInfo{name: name, typ: f.Type, omitempty: strings.Contains(","+opts+",", ",omitempty,")})
	}
	return out
}

var rawMessageType = reflect.TypeOf(json.RawMessage(nil))

// checkShape walks the parsed tree against the Go type and reports unknown
// and missing fields with their path.
func checkShape(n node, t reflect.Type, path string) error {
	if t == rawMessageType {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		if n == nil {
			return nil
		}
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if _, ok := reflect.New(t).Interface().(json.Unmarshaler); ok {
			return nil
		}
		obj, ok := n.(*object)
		if !ok {
			return fmt.Errorf("canon: %s: want an object", path)
		}
		fields := structFields(t)
		known := make(map[string]fieldInfo, len(fields))
		for _, f := range fields {
			known[f.name] = f
		}
		for _, k := range obj.keys {
			f, ok := known[k]
			if !ok {
				return fmt.Errorf("canon: %s: unknown field %q", path, k)
			}
			if err := checkShape(obj.vals[k], f.typ, path+"."+k); err != nil {
				return err
			}
		}
		for _, f := range fields {
			if _, ok := obj.vals[f.name]; !ok && !f.omitempty {
				return fmt.Errorf("canon: %s: missing field %q", path, f.name)
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := n.([]node)
		if !ok {
			if n == nil && t.Kind() == reflect.Slice {
				return nil
			}
			return fmt.Errorf("canon: %s: want an array", path)
		}
		for i, e := range arr {
			if err := checkShape(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, ok := n.(*object)
		if !ok {
			if n == nil {
				return nil
			}
			return fmt.Errorf("canon: %s: want an object", path)
		}
		for _, k := range obj.keys {
			if err := checkShape(obj.vals[k], t.Elem(), path+"."+k); err != nil {
				return err
			}
		}
	case reflect.String:
		if _, ok := n.(string); !ok && !implementsUnmarshaler(t) {
			return fmt.Errorf("canon: %s: want a string, got %s", path, nodeKind(n))
		}
	case reflect.Bool:
		if _, ok := n.(bool); !ok && !implementsUnmarshaler(t) {
			return fmt.Errorf("canon: %s: want true or false, got %s", path, nodeKind(n))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if _, ok := n.(json.Number); !ok && !implementsUnmarshaler(t) {
			return fmt.Errorf("canon: %s: want an integer, got %s", path, nodeKind(n))
		}
	}
	return nil
}

func implementsUnmarshaler(t reflect.Type) bool {
	_, ok := reflect.New(t).Interface().(json.Unmarshaler)
	return ok
}

// nodeKind names a parsed JSON value's kind for error messages.
func nodeKind(n node) string {
	switch n.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []node:
		return "an array"
	case *object:
		return "an object"
	}
	return fmt.Sprintf("%T", n)
}
