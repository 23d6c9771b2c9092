package capability

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func mustParse(t *testing.T, s string) Domain {
	t.Helper()
	d, err := ParseMetadata([]byte(s))
	if err != nil {
		t.Fatalf("ParseMetadata(%s): %v", s, err)
	}
	return d
}

func caps(s string) string { return `{"capabilities": {` + s + `}}` }

func TestOverlaps(t *testing.T) {
	tests := []struct {
		name string
		a, b string // capabilities bodies
		want bool
	}{
		{"both any", ``, ``, true},
		{"one side any", `"head_dim": 64`, ``, true},
		{"disjoint exact", `"head_dim": 64`, `"head_dim": 128`, false},
		{"same exact", `"head_dim": 64`, `"head_dim": 64`, true},
		{"different fields", `"head_dim": 64`, `"num_tokens": 8`, true},
		{"set overlap", `"head_dim": [64, 128]`, `"head_dim": [128, 256]`, true},
		{"set disjoint", `"head_dim": [64, 96]`, `"head_dim": [128, 256]`, false},
		{"ranges disjoint", `"num_tokens": {"max": 64}`, `"num_tokens": {"min": 65}`, false},
		{"ranges touch", `"num_tokens": {"max": 64}`, `"num_tokens": {"min": 64}`, true},
		{"open ranges", `"num_tokens": {"min": 1}`, `"num_tokens": {"min": 1000}`, true},
		{"set inside range", `"num_tokens": [8, 16]`, `"num_tokens": {"min": 10, "max": 20}`, true},
		{"set outside range", `"num_tokens": [8, 32]`, `"num_tokens": {"min": 10, "max": 20}`, false},
		{"one disjoint field suffices", `"head_dim": 64, "dtype": "bf16"`, `"head_dim": 128, "dtype": "bf16"`, false},
		{"context disjoint", `"dtype": "bf16"`, `"dtype": "fp16"`, false},
		{"context alias overlap", `"dtype": "bf16"`, `"dtype": ["bfloat16", "fp16"]`, true},
		{"architecture spellings", `"architecture": "9.0"`, `"architecture": "sm_90"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := mustParse(t, caps(tt.a)), mustParse(t, caps(tt.b))
			if got := Overlaps(a, b); got != tt.want {
				t.Errorf("Overlaps(%s, %s) = %v, want %v", a, b, got, tt.want)
			}
			if got := Overlaps(b, a); got != tt.want {
				t.Errorf("Overlaps is not symmetric for %s, %s", a, b)
			}
		})
	}
}

func TestEmpty(t *testing.T) {
	tests := []struct {
		name   string
		meta   string
		extra  func(t *testing.T) Domain
		want   bool
		reason string
	}{
		{name: "any", meta: `{}`, want: false},
		{name: "legacy min above max", meta: `{"min_num_tokens": 10, "max_num_tokens": 5}`, want: true, reason: "num_tokens: no value satisfies every predicate (min 10 > max 5)"},
		{name: "legacy against capabilities", meta: `{"dtypes": ["fp16"], "capabilities": {"dtype": "bf16"}}`, want: true, reason: "dtype: no value satisfies every predicate"},
		{name: "set against range", meta: `{"max_last_dim": 64, "capabilities": {"last_dim": [128]}}`, want: true, reason: "last_dim"},
		{name: "manifest narrowing", meta: caps(`"dtype": "bf16"`), extra: func(t *testing.T) Domain {
			d, err := OneOf("dtype", "float16")
			if err != nil {
				t.Fatal(err)
			}
			return d
		}, want: true, reason: "dtype"},
		{name: "manifest narrowing keeps common", meta: caps(`"dtype": ["bf16", "fp16"]`), extra: func(t *testing.T) Domain {
			d, err := OneOf("dtype", "fp16", "fp32")
			if err != nil {
				t.Fatal(err)
			}
			return d
		}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustParse(t, tt.meta)
			if tt.extra != nil {
				d = d.Intersect(tt.extra(t))
			}
			if got := d.Empty(); got != tt.want {
				t.Fatalf("Empty() = %v, want %v (domain %s)", got, tt.want, d)
			}
			if r := d.EmptyReason(); !strings.Contains(r, tt.reason) || (tt.want && r == "") {
				t.Fatalf("EmptyReason() = %q, want it to contain %q", r, tt.reason)
			}
			if tt.want && Overlaps(d, Domain{}) {
				t.Fatalf("an empty domain overlaps nothing, not even any")
			}
		})
	}
}

func TestMatch(t *testing.T) {
	d := mustParse(t, caps(`"head_dim": [64, 128], "num_tokens": {"min": 1, "max": 4096}, "dtype": "bf16", "architecture": "sm90"`))
	tests := []struct {
		name   string
		desc   map[string]any
		ok     bool
		reason string
	}{
		{"all in", map[string]any{"head_dim": 128, "num_tokens": int64(7), "dtype": "torch.bfloat16", "architecture": "sm_90", "world_size": 2}, true, ""},
		{"aliases and number kinds", map[string]any{"head_size": uint32(64), "tokens": 4096.0, "dtype": "bf16", "arch": json.Number("90")}, true, ""},
		{"json number", map[string]any{"head_dim": json.Number("64"), "num_tokens": json.Number("1"), "dtype": "bfloat16", "architecture": 90}, true, ""},
		{"missing field fails closed", map[string]any{"head_dim": 64, "dtype": "bf16", "architecture": "sm90"}, false, "num_tokens: descriptor lacks the field (want in [1, 4096])"},
		{"outside set", map[string]any{"head_dim": 96, "num_tokens": 1, "dtype": "bf16", "architecture": "sm90"}, false, "head_dim: 96 is outside the domain (want one_of [64, 128])"},
		{"outside range", map[string]any{"head_dim": 64, "num_tokens": 4097, "dtype": "bf16", "architecture": "sm90"}, false, "num_tokens: 4097 is outside the domain"},
		{"wrong dtype", map[string]any{"head_dim": 64, "num_tokens": 1, "dtype": "fp16", "architecture": "sm90"}, false, `dtype: float16 is outside the domain (want = "bfloat16")`},
		{"bad value type", map[string]any{"head_dim": "64", "num_tokens": 1, "dtype": "bf16", "architecture": "sm90"}, false, "head_dim: descriptor value 64 (string) is not an integer"},
		{"fractional float", map[string]any{"head_dim": 64.5, "num_tokens": 1, "dtype": "bf16", "architecture": "sm90"}, false, "not an integer"},
		{"conflicting aliases", map[string]any{"head_dim": 64, "head_size": 128, "num_tokens": 1, "dtype": "bf16", "architecture": "sm90"}, false, "conflicting values"},
		{"unknown dtype value", map[string]any{"head_dim": 64, "num_tokens": 1, "dtype": "int4", "architecture": "sm90"}, false, "unknown dtype"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason := d.Match(tt.desc)
			if ok != tt.ok || !strings.Contains(reason, tt.reason) {
				t.Fatalf("Match = (%v, %q), want (%v, containing %q)", ok, reason, tt.ok, tt.reason)
			}
		})
	}
	if ok, _ := (Domain{}).Match(nil); !ok {
		t.Fatal("the any domain must match an empty descriptor")
	}
}

func TestNormalizeArchitecture(t *testing.T) {
	tests := []struct{ in, want string }{
		{"sm_90", "sm90"}, {"sm90", "sm90"}, {"SM_90", "sm90"}, {"sm-90", "sm90"},
		{"9.0", "sm90"}, {"90", "sm90"}, {"sm_90a", "sm90a"}, {"10.0", "sm100"},
		{"sm_100f", "sm100f"}, {"120", "sm120"}, {"8.9", "sm89"},
		{"", ""}, {"sm", ""}, {"sm_9", ""}, {"09", ""}, {"sm_0900", ""}, {"9.", ""}, {".9", ""},
		{"hopper", ""}, {"sm_90b", ""}, {"9.0.1", ""},
	}
	for _, tt := range tests {
		got, err := NormalizeArchitecture(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("NormalizeArchitecture(%q) = %q, want error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("NormalizeArchitecture(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestNormalizeDType(t *testing.T) {
	for in, want := range map[string]string{
		"bf16": "bfloat16", "BF16": "bfloat16", "torch.bfloat16": "bfloat16", "bfloat16": "bfloat16",
		"fp16": "float16", "half": "float16", "float16": "float16",
		"fp32": "float32", "float": "float32", "float32": "float32",
	} {
		if got, err := NormalizeDType(in); err != nil || got != want {
			t.Errorf("NormalizeDType(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "int8", "float64", "fp8", "torch."} {
		if _, err := NormalizeDType(in); err == nil {
			t.Errorf("NormalizeDType(%q) succeeded", in)
		}
	}
}

func TestOneOfAndIntOneOf(t *testing.T) {
	d, err := OneOf("arch", "sm_90", "9.0", "sm100")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.String(); got != `architecture one_of ["sm100", "sm90"]` {
		t.Fatalf("OneOf = %s", got)
	}
	if _, err := OneOf("dtype"); err == nil {
		t.Fatal("OneOf with no values must fail")
	}
	if _, err := OneOf("head_dim", "64"); err == nil {
		t.Fatal("OneOf on a numeric field must fail")
	}
	if _, err := OneOf("dtype", "int8"); err == nil {
		t.Fatal("OneOf with a bad dtype must fail")
	}
	n, err := IntOneOf("head_dim", 128, 64, 128)
	if err != nil || n.String() != "head_dim one_of [64, 128]" {
		t.Fatalf("IntOneOf = %s, %v", n, err)
	}
	if _, err := IntOneOf("dtype", 1); err == nil {
		t.Fatal("IntOneOf on a context field must fail")
	}
	if _, err := IntOneOf("head_dim", -1); err == nil {
		t.Fatal("IntOneOf with a negative value must fail")
	}
}

func TestFieldsAndCanonical(t *testing.T) {
	d := mustParse(t, `{"graph_safe": true, "capabilities": {"top_k": 8, "dtype": "fp16", "num_tokens": {"min": 2}}}`)
	if got, want := d.Fields(), []string{"dtype", "num_tokens", "top_k"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Fields = %v, want %v", got, want)
	}
	want := map[string]any{
		"capabilities": map[string]any{
			"dtype":      map[string]any{"one_of": []string{"float16"}},
			"num_tokens": map[string]any{"min": int64(2)},
			"top_k":      map[string]any{"one_of": []int64{8}},
		},
		"graph_safe": true,
	}
	if got := d.Canonical(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Canonical = %#v, want %#v", got, want)
	}
	// Exact and one-element one_of are the same domain.
	a := mustParse(t, caps(`"top_k": 8`))
	b := mustParse(t, caps(`"top_k": {"one_of": [8]}`))
	if !reflect.DeepEqual(a.Canonical(), b.Canonical()) {
		t.Fatal("exact and one_of [x] must have one canonical form")
	}
}

func TestIntersectGraphSafe(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		a, b *bool
		want *bool
	}{
		{nil, nil, nil}, {&yes, nil, &yes}, {nil, &no, &no}, {&yes, &yes, &yes}, {&yes, &no, &no},
	}
	for _, tt := range tests {
		got := Domain{GraphSafe: tt.a}.Intersect(Domain{GraphSafe: tt.b}).GraphSafe
		if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
			t.Errorf("GraphSafe(%v ∩ %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestNormalizeField(t *testing.T) {
	for in, want := range map[string]string{
		"tokens": "num_tokens", "hidden_size": "hidden_dim", "arch": "architecture",
		"HEAD-DIM": "head_dim", "topk": "top_k", "num_key_value_heads": "num_kv_heads",
		"device": "device", "world": "world_size",
	} {
		if got, err := NormalizeField(in); err != nil || got != want {
			t.Errorf("NormalizeField(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "tp_size", "layout", "head dim", strings.Repeat("a", 65)} {
		if _, err := NormalizeField(in); err == nil {
			t.Errorf("NormalizeField(%q) succeeded", in)
		}
	}
	if !IsNumericField("top_k") || IsNumericField("dtype") || IsNumericField("nope") {
		t.Fatal("IsNumericField is wrong")
	}
	if _, err := NormalizeValue("head_dim", "x"); err == nil {
		t.Fatal("NormalizeValue on a numeric field must fail")
	}
	if v, err := NormalizeValue("phase", "EXTEND"); err != nil || v != "prefill" {
		t.Fatalf("NormalizeValue(phase, EXTEND) = %q, %v", v, err)
	}
}

// TestBounds: the least and greatest value a numeric predicate admits.
func TestBounds(t *testing.T) {
	tests := []struct {
		meta               string
		field              string
		lo, hi             int64
		hasLo, hasHi, cons bool
	}{
		{caps(`"num_tokens": {"min": 33}`), "num_tokens", 33, 0, true, false, true},
		{caps(`"num_tokens": {"min": 1, "max": 32}`), "num_tokens", 1, 32, true, true, true},
		{caps(`"head_dim": [128, 64, 256]`), "head_dim", 64, 256, true, true, true},
		{`{"max_num_tokens": 100}`, "num_tokens", 0, 100, false, true, true},
		{caps(`"num_tokens": {"min": 1}`), "head_dim", 0, 0, false, false, false},
		{caps(`"dtype": "bf16"`), "dtype", 0, 0, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.meta+"/"+tt.field, func(t *testing.T) {
			lo, hi, hasLo, hasHi, cons := mustParse(t, tt.meta).Bounds(tt.field)
			if cons != tt.cons || hasLo != tt.hasLo || hasHi != tt.hasHi || (hasLo && lo != tt.lo) || (hasHi && hi != tt.hi) {
				t.Fatalf("Bounds = %d %d %v %v %v, want %d %d %v %v %v", lo, hi, hasLo, hasHi, cons, tt.lo, tt.hi, tt.hasLo, tt.hasHi, tt.cons)
			}
		})
	}
}
