package canon

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// TestDigestIndependentVector checks one digest against a value computed
// outside Go: printf '%s' '<canonical bytes>' | sha256sum.
func TestDigestIndependentVector(t *testing.T) {
	payload := map[string]any{
		"z": true,
		"b": nil,
		"a": []any{1, -2, "x\x1f\n\"\\é"},
	}
	got, err := Digest("cacheon.test", 1, payload)
	if err != nil {
		t.Fatal(err)
	}
	const want = "c7162ce75272751355f721ba985a135f047768e35fbce6b8dba5d1e19e29d16e"
	if got != want {
		t.Fatalf("digest = %s, want %s", got, want)
	}
}

func TestCanonicalize(t *testing.T) {
	tests := []struct {
		name, in, want, err string
	}{
		{name: "sorted keys", in: `{"b":1,"a":2}`, want: `{"a":2,"b":1}`},
		{name: "bytewise key order", in: `{"é":1,"z":2,"Z":3,"a-b":4,"a":5}`, want: `{"Z":3,"a":5,"a-b":4,"z":2,"é":1}`},
		{name: "whitespace removed", in: " { \"a\" : [ 1 , 2 ] }\n", want: `{"a":[1,2]}`},
		{name: "unicode escape decoded", in: `"\u00e9\u0041"`, want: `"éA"`},
		{name: "control escaped", in: `"\u0001\t"`, want: `"\u0001\t"`},
		{name: "slash not escaped", in: `"\/<>&"`, want: `"/<>&"`},
		{name: "negative int", in: `-12`, want: `-12`},
		{name: "nested", in: `{"x":{"d":[{"b":null,"a":false}]}}`, want: `{"x":{"d":[{"a":false,"b":null}]}}`},
		{name: "float rejected", in: `{"a":1.5}`, err: "not an integer"},
		{name: "exponent rejected", in: `1e3`, err: "not an integer"},
		{name: "huge int rejected", in: `123456789012345678901234567890`, err: "not an integer"},
		{name: "duplicate key", in: `{"a":1,"a":2}`, err: `duplicate key "a"`},
		{name: "nested duplicate", in: `{"o":{"k":1,"k":1}}`, err: `$.o: duplicate key "k"`},
		{name: "trailing data", in: `{} {}`, err: "trailing data"},
		{name: "invalid utf8", in: "\"\xff\"", err: "UTF-8"},
		{name: "truncated", in: `{"a":`, err: "canon"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
			if !IsCanonical(got) {
				t.Fatalf("output %s is not canonical", got)
			}
		})
	}
}

func TestMarshalRejectsFloat(t *testing.T) {
	if _, err := Marshal(map[string]any{"x": 0.5}); err == nil {
		t.Fatal("want error for a float")
	}
	if _, err := Digest("d", 1, struct{ F float64 }{1.25}); err == nil {
		t.Fatal("want error for a float field")
	}
}

func TestDigestArguments(t *testing.T) {
	if _, err := Digest("", 1, 1); err == nil {
		t.Fatal("empty domain accepted")
	}
	if _, err := Digest("d", 0, 1); err == nil {
		t.Fatal("schema version 0 accepted")
	}
	a, _ := Digest("d1", 1, map[string]int{"a": 1})
	b, _ := Digest("d2", 1, map[string]int{"a": 1})
	c, _ := Digest("d1", 2, map[string]int{"a": 1})
	if a == b || a == c {
		t.Fatal("domain or version does not separate digests")
	}
}

func TestValidDigest(t *testing.T) {
	good := strings.Repeat("ab", 32)
	if err := ValidDigest(good); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", strings.Repeat("0", 64), strings.Repeat("AB", 32), strings.Repeat("a", 63), strings.Repeat("g", 64)} {
		if err := ValidDigest(bad); err == nil {
			t.Errorf("ValidDigest(%q) accepted", bad)
		}
	}
}

type inner struct {
	N int    `json:"n"`
	S string `json:"s,omitempty"`
}

type outer struct {
	Name  string           `json:"name"`
	Items []inner          `json:"items"`
	Opt   *inner           `json:"opt,omitempty"`
	Tags  map[string]inner `json:"tags"`
	Raw   json.RawMessage  `json:"raw,omitempty"`
}

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name, in, err string
	}{
		{name: "ok", in: `{"items":[{"n":1}],"name":"x","tags":{}}`},
		{name: "ok optional", in: `{"items":[],"name":"x","opt":{"n":2,"s":"y"},"tags":{"k":{"n":3}}}`},
		{name: "unknown field", in: `{"extra":1,"items":[],"name":"x","tags":{}}`, err: `$: unknown field "extra"`},
		{name: "nested unknown", in: `{"items":[{"m":1,"n":1}],"name":"x","tags":{}}`, err: `$.items[0]: unknown field "m"`},
		{name: "missing field", in: `{"items":[],"tags":{}}`, err: `$: missing field "name"`},
		{name: "missing in map value", in: `{"items":[],"name":"x","tags":{"k":{}}}`, err: `$.tags.k: missing field "n"`},
		{name: "not canonical order", in: `{"name":"x","items":[],"tags":{}}`, err: "not canonical"},
		{name: "whitespace", in: `{"items":[], "name":"x","tags":{}}`, err: "not canonical"},
		{name: "float", in: `{"items":[{"n":1.0}],"name":"x","tags":{}}`, err: "not an integer"},
		{name: "duplicate", in: `{"items":[],"name":"x","name":"y","tags":{}}`, err: "duplicate key"},
		{name: "empty optional written", in: `{"items":[{"n":1,"s":""}],"name":"x","tags":{}}`, err: "re-encodes differently"},
		{name: "wrong type", in: `{"items":{},"name":"x","tags":{}}`, err: "want an array"},
		{name: "number for a string", in: `{"items":[],"name":3,"tags":{}}`, err: "$.name: want a string, got a number"},
		{name: "string for an integer", in: `{"items":[{"n":"1"}],"name":"x","tags":{}}`, err: "$.items[0].n: want an integer, got a string"},
		{name: "null for a string", in: `{"items":[],"name":null,"tags":{}}`, err: "$.name: want a string, got null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v outer
			err := Decode([]byte(tt.in), &v)
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("err = %v, want containing %q", err, tt.err)
			}
		})
	}
}

func TestDecodeLenient(t *testing.T) {
	var v outer
	if err := DecodeLenient([]byte("{\n  \"name\": \"x\",\n  \"items\": [],\n  \"tags\": {}\n}\n"), &v); err != nil {
		t.Fatal(err)
	}
	if err := DecodeLenient([]byte(`{"name":"x","items":[],"tags":{},"zz":1}`), &v); err == nil {
		t.Fatal("unknown field accepted")
	}
}

func TestDecimal(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{in: "1e-5", want: "0.00001"},
		{in: "0.00001", want: "0.00001"},
		{in: "2E-2", want: "0.02"},
		{in: "10", want: "10"},
		{in: "010.500", want: "10.5"},
		{in: "-0.0", want: "0"},
		{in: "+3", want: "3"},
		{in: "-1.25", want: "-1.25"},
		{in: "1.0e3", want: "1000"},
		{in: "0.99", want: "0.99"},
		{in: "", err: "not a decimal"},
		{in: "1/3", err: "not a decimal"},
		{in: "abc", err: "not a decimal"},
		{in: "1 ", err: "not a decimal"},
		{in: "NaN", err: "not a decimal"},
		{in: "Inf", err: "not a decimal"},
		{in: "1e-9999999", err: "exponent -9999999 is outside"},
		{in: "1e400", want: "1" + strings.Repeat("0", 400)},
		{in: "1e401", err: "exponent 401 is outside"},
		{in: "1e", err: "not a decimal"},
		{in: "1e+", err: "not a decimal"},
		{in: "1p10000", err: "not a decimal"},
		{in: "0x1p10", err: "not a decimal"},
		{in: "0x10", err: "not a decimal"},
		{in: "1_000", err: "not a decimal"},
		{in: ".", err: "not a decimal"},
		{in: "-.5", want: "-0.5"},
		{in: "5.", want: "5"},
		{in: "1e-1.5", err: "not a decimal"},
		{in: "--1", err: "not a decimal"},
		{in: strings.Repeat("1", 1025), err: "longer than 1024 bytes"},
		{in: strings.Repeat("1", 400) + "e-400", err: "longer than 400 bytes with an exponent"},
		{in: strings.Repeat("9", 395) + "e400", want: strings.Repeat("9", 395) + strings.Repeat("0", 400)},
	}
	for _, tt := range tests {
		got, err := ParseDecimal(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseDecimal(%q) err = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("ParseDecimal(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
		if err := got.CheckCanonical(); err != nil {
			t.Errorf("canonical %q rejected: %v", got, err)
		}
	}
	if err := Decimal("1.50").CheckCanonical(); err == nil {
		t.Error("1.50 accepted as canonical")
	}
	if f, err := Decimal("0.02").Float64(); err != nil || f != 0.02 {
		t.Errorf("Float64 = %v, %v", f, err)
	}
}

// vector is one golden case in testdata/vectors.json.
type vector struct {
	Domain        string          `json:"domain"`
	SchemaVersion int             `json:"schema_version"`
	Input         json.RawMessage `json:"input"`
	Canonical     string          `json:"canonical"`
	Digest        string          `json:"digest"`
}

// TestGoldenVectors pins canonical bytes and digests across runs and
// machines. Regenerate with: go test ./internal/canon -update
func TestGoldenVectors(t *testing.T) {
	path := filepath.Join("testdata", "vectors.json")
	inputs := []struct {
		domain string
		input  string
	}{
		{"cacheon.test", `{"z": true, "b": null, "a": [1, -2, "x\u001f\n\"\\é"]}`},
		{"cacheon.slot_contract", `{"name":"activation.silu_and_mul","kind":"op","tolerances":{"float32":{"atol":"0.00001","rtol":"0.00001"}}}`},
		{"cacheon.empty", `{}`},
		{"cacheon.list", `[3, 2, 1, "β", "a", {"k": []}]`},
	}
	var got []vector
	for _, in := range inputs {
		c, err := Canonicalize([]byte(in.input))
		if err != nil {
			t.Fatal(err)
		}
		d, err := Digest(in.domain, 1, json.RawMessage(c))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, vector{Domain: in.domain, SchemaVersion: 1, Input: json.RawMessage(in.input), Canonical: string(c), Digest: d})
	}
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *update {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if string(want) != string(b) {
		t.Fatalf("golden vectors changed; diff testdata/vectors.json against:\n%s", b)
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1,"x",null,true]`, `{"b":{"a":[]}}`, `"\u0000"`, `1.5`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Canonicalize(data)
		if err != nil {
			return
		}
		// Canonical output is a fixed point and valid JSON.
		c2, err := Canonicalize(c)
		if err != nil {
			t.Fatalf("canonical output rejected: %v (%q)", err, c)
		}
		if string(c) != string(c2) {
			t.Fatalf("not idempotent: %q vs %q", c, c2)
		}
		if !json.Valid(c) {
			t.Fatalf("invalid JSON %q", c)
		}
	})
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"items":[{"n":1}],"name":"x","tags":{}}`))
	f.Add([]byte(`{"items":[],"name":"x","opt":{"n":2,"s":"y"},"tags":{"k":{"n":3}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v outer
		if err := Decode(data, &v); err != nil {
			return
		}
		// Accepted input must re-marshal to the same bytes.
		b, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != string(data) {
			t.Fatalf("accepted %q but re-encodes as %q", data, b)
		}
	})
}

// FuzzParseDecimal: whatever ParseDecimal accepts comes back canonical, is
// a fixed point, and converts to a float; no input runs long (the bounds).
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"1e-5", "0.00001", "-1.25", "010.500", "1e400", "1e-9999999", "1/3", "+3", "-0.0", "9e-400", "1p10000", "0x1.8p3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDecimal(s)
		if err != nil {
			return
		}
		if err := d.CheckCanonical(); err != nil {
			t.Fatalf("ParseDecimal(%q) = %q, not canonical: %v", s, d, err)
		}
		again, err := ParseDecimal(string(d))
		if err != nil || again != d {
			t.Fatalf("ParseDecimal(%q) = %q, then %q, %v", s, d, again, err)
		}
		if _, err := d.Float64(); err != nil {
			t.Fatalf("%q: Float64: %v", d, err)
		}
	})
}
