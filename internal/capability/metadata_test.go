package capability

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/canon"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

func TestParseMetadataValid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // Domain.String()
	}{
		{"empty object", `{}`, "any"},
		{"empty capabilities", `{"capabilities": {}}`, "any"},
		{"exact scalar", `{"capabilities": {"head_dim": 128}}`, "head_dim = 128"},
		{"exact object", `{"capabilities": {"head_dim": {"exact": 128}}}`, "head_dim = 128"},
		{"one_of object", `{"capabilities": {"head_dim": {"one_of": [128, 64, 64]}}}`, "head_dim one_of [64, 128]"},
		{"one_of list", `{"capabilities": {"head_dim": [64, 128]}}`, "head_dim one_of [64, 128]"},
		{"range", `{"capabilities": {"num_tokens": {"min": 1, "max": 4096}}}`, "num_tokens in [1, 4096]"},
		{"min only", `{"capabilities": {"num_tokens": {"min": 1}}}`, "num_tokens >= 1"},
		{"max only", `{"capabilities": {"num_tokens": {"max": 8}}}`, "num_tokens <= 8"},
		{"min equals max", `{"capabilities": {"top_k": {"min": 8, "max": 8}}}`, "top_k in [8, 8]"},
		{"field aliases", `{"capabilities": {"tokens": 4, "hidden_size": 4096, "arch": "sm_90", "Head-Size": 64}}`,
			`architecture = "sm90", head_dim = 64, hidden_dim = 4096, num_tokens = 4`},
		{"dtype aliases", `{"capabilities": {"dtype": ["bf16", "fp16", "half", "torch.float32", "float"]}}`,
			`dtype one_of ["bfloat16", "float16", "float32"]`},
		{"architecture spellings", `{"capabilities": {"architecture": ["sm_90", "SM90", "9.0", "90", "sm_90a", "sm100", 80]}}`,
			`architecture one_of ["sm100", "sm80", "sm90", "sm90a"]`},
		{"context fields", `{"capabilities": {"graph_mode": "cuda_graph", "phase": "extend", "device": "gpu", "quant": "none", "model": "MiniMax-M3"}}`,
			`device = "cuda", graph_mode = "graph", model = "MiniMax-M3", phase = "prefill", quant = "dense"`},
		{"legacy keys", `{"dtypes": ["bf16"], "architectures": ["sm_90"], "max_last_dim": 8192, "min_num_tokens": 1, "max_num_tokens": 64, "quant": "fp8", "graph_safe": true}`,
			`architecture = "sm90", dtype = "bfloat16", last_dim <= 8192, num_tokens in [1, 64], quant = "fp8"`},
		{"legacy quant list", `{"quant": ["fp8", "w4a16"]}`, `quant one_of ["fp8", "w4a16"]`},
		{"legacy and capabilities intersect", `{"dtypes": ["bf16", "fp16"], "capabilities": {"dtype": "bf16"}}`, `dtype = "bfloat16"`},
		{"range and set fold", `{"max_num_tokens": 100, "capabilities": {"num_tokens": [16, 64, 128]}}`, "num_tokens one_of [16, 64]"},
		{"regime is descriptive", `{"regime": {"anything": [1.5, null]}, "capabilities": {"top_k": 8}}`, "top_k = 8"},
		{"empty legacy lists restrict nothing", `{"dtypes": [], "architectures": [], "quant": []}`, "any"},
		{"zero is allowed", `{"capabilities": {"num_tokens": 0}}`, "num_tokens = 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ParseMetadata([]byte(tt.in))
			if err != nil {
				t.Fatalf("ParseMetadata: %v", err)
			}
			if got := d.String(); got != tt.want {
				t.Errorf("domain = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestReadMetadataCompat reads metadata written for the established tool:
// descriptive keys are ignored and listed, op/slot name the slot, and
// max_last_dim bounds the field the options name.
func TestReadMetadataCompat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		opt     ReadOptions
		domain  string
		slot    string
		slotKey string
		ignored string // joined with |
		lastDim string
	}{
		{name: "upstream silu", in: `{"op": "activation.silu_and_mul", "dtypes": ["float32", "bfloat16"], "max_last_dim": 65536, "notes": "x"}`,
			domain: `dtype one_of ["bfloat16", "float32"], last_dim <= 65536`, slot: "activation.silu_and_mul", slotKey: "op", ignored: "notes", lastDim: "last_dim"},
		{name: "attention bounds head_dim", in: `{"op": "attention.sdpa", "max_last_dim": 256, "notes": "head_dim<=256"}`, opt: ReadOptions{LastDimField: "head_dim"},
			domain: "head_dim <= 256", slot: "attention.sdpa", slotKey: "op", ignored: "notes", lastDim: "head_dim"},
		{name: "descriptive keys of any type", in: `{"slot": "moe.fused_experts", "model": "M3", "arch": "sm_100", "kl_threshold": 5e-3, "correctness": {"min_cosine": 0.985}, "regime": [1], "setup": null}`,
			domain: "any", slot: "moe.fused_experts", slotKey: "slot", ignored: "model|arch|kl_threshold|correctness|regime|setup"},
		{name: "op and slot agree", in: `{"op": "norm.rmsnorm", "slot": "norm.rmsnorm"}`, domain: "any", slot: "norm.rmsnorm", slotKey: "op"},
		{name: "no slot named", in: `{"capabilities": {"top_k": 2}}`, domain: "top_k = 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ReadMetadata([]byte(tt.in), tt.opt)
			if err != nil {
				t.Fatalf("ReadMetadata: %v", err)
			}
			if got := m.Domain.String(); got != tt.domain {
				t.Errorf("domain = %s, want %s", got, tt.domain)
			}
			if m.Slot != tt.slot || m.SlotKey != tt.slotKey {
				t.Errorf("slot = %q from %q, want %q from %q", m.Slot, m.SlotKey, tt.slot, tt.slotKey)
			}
			if got := strings.Join(m.Ignored, "|"); got != tt.ignored {
				t.Errorf("ignored = %q, want %q", got, tt.ignored)
			}
			if m.LastDimField != tt.lastDim {
				t.Errorf("LastDimField = %q, want %q", m.LastDimField, tt.lastDim)
			}
		})
	}
	if _, err := ReadMetadata([]byte(`{}`), ReadOptions{LastDimField: "dtype"}); err == nil {
		t.Error("a context field as LastDimField was accepted")
	}
}

func TestIgnoredNote(t *testing.T) {
	if got := IgnoredNote("notes"); got != `top-level key "notes" is descriptive and ignored` {
		t.Errorf("IgnoredNote(notes) = %q", got)
	}
	if got := IgnoredNote("arch"); !strings.Contains(got, `to restrict architecture, put it under "capabilities"`) {
		t.Errorf("IgnoredNote(arch) = %q", got)
	}
}

func TestParseMetadataGraphSafe(t *testing.T) {
	d, err := ParseMetadata([]byte(`{"graph_safe": false}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.GraphSafe == nil || *d.GraphSafe {
		t.Fatalf("GraphSafe = %v, want false", d.GraphSafe)
	}
	if len(d.Fields()) != 0 {
		t.Fatalf("graph_safe must not be a predicate, fields = %v", d.Fields())
	}
}

func TestParseMetadataRejects(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // error substring
	}{
		{"not an object", `[1]`, "must be a JSON object"},
		{"null", `null`, "must be a JSON object"},
		{"invalid JSON", `{"capabilities": }`, "invalid JSON"},
		{"truncated", `{"capabilities": {`, "invalid JSON"},
		{"trailing data", `{} {}`, "trailing data"},
		{"trailing garbage", `{} x`, "trailing data"},
		{"invalid utf8", "{\"model\": \"\xff\"}", "not valid UTF-8"},
		{"op not a string", `{"op": 3}`, "op: must be the slot name as a string"},
		{"empty slot", `{"slot": ""}`, "slot: empty slot name"},
		{"op and slot disagree", `{"op": "norm.rmsnorm", "slot": "activation.silu_and_mul"}`, `slot: names slot "activation.silu_and_mul", but "op" names "norm.rmsnorm"`},
		{"graph_safe not bool", `{"graph_safe": "yes"}`, "graph_safe: must be true or false"},
		{"legacy dtypes element", `{"dtypes": ["bf16", 3]}`, "dtypes[1]: want a string"},
		{"duplicate top-level key", `{"capabilities": {}, "capabilities": {}}`, "capabilities: duplicate key"},
		{"duplicate nested key", `{"capabilities": {"head_dim": 64, "head_dim": 128}}`, "capabilities.head_dim: duplicate key"},
		{"duplicate predicate key", `{"capabilities": {"head_dim": {"min": 1, "min": 2}}}`, "capabilities.head_dim.min: duplicate key"},
		{"duplicate via alias", `{"capabilities": {"tokens": 4, "num_tokens": 4}}`, "already given as \"tokens\""},
		{"capabilities not object", `{"capabilities": [1]}`, "capabilities: must be an object"},
		{"unknown field", `{"capabilities": {"warp_size": 32}}`, "unknown capability field \"warp_size\""},
		{"empty field name", `{"capabilities": {"": 32}}`, "empty capability field name"},
		{"float value", `{"capabilities": {"head_dim": 128.0}}`, "not an integer"},
		{"exponent value", `{"capabilities": {"head_dim": 1e2}}`, "not an integer"},
		{"huge value", `{"capabilities": {"head_dim": 99999999999999999999}}`, "not an integer"},
		{"negative value", `{"capabilities": {"head_dim": -1}}`, "negative"},
		{"string for numeric", `{"capabilities": {"head_dim": "128"}}`, "want an integer, got a string"},
		{"bool for numeric", `{"capabilities": {"head_dim": true}}`, "want an integer, got a boolean"},
		{"null predicate", `{"capabilities": {"head_dim": null}}`, "want an integer, got null"},
		{"number for context", `{"capabilities": {"dtype": 16}}`, "want a string"},
		{"nested list", `{"capabilities": {"head_dim": [[64]]}}`, "got a list"},
		{"empty one_of list", `{"capabilities": {"head_dim": []}}`, "one_of must not be empty"},
		{"empty one_of object", `{"capabilities": {"head_dim": {"one_of": []}}}`, "one_of must not be empty"},
		{"one_of not list", `{"capabilities": {"head_dim": {"one_of": 64}}}`, "must be a list"},
		{"exact list", `{"capabilities": {"head_dim": {"exact": [64]}}}`, "exact takes one value"},
		{"exact and one_of", `{"capabilities": {"head_dim": {"exact": 64, "one_of": [64]}}}`, "both exact and one_of"},
		{"set and range", `{"capabilities": {"head_dim": {"exact": 64, "max": 64}}}`, "cannot mix"},
		{"min greater than max", `{"capabilities": {"num_tokens": {"min": 10, "max": 5}}}`, "min 10 is greater than max 5"},
		{"float bound", `{"capabilities": {"num_tokens": {"min": 0.5}}}`, "not an integer"},
		{"unknown predicate key", `{"capabilities": {"num_tokens": {"lt": 5}}}`, "unknown predicate key"},
		{"empty predicate object", `{"capabilities": {"num_tokens": {}}}`, "empty predicate object"},
		{"range on context", `{"capabilities": {"dtype": {"min": 1}}}`, "context field and takes no min/max"},
		{"bad dtype", `{"capabilities": {"dtype": "int8"}}`, "unknown dtype \"int8\""},
		{"bad architecture", `{"capabilities": {"architecture": "ampere"}}`, "invalid architecture"},
		{"bad architecture digits", `{"capabilities": {"architecture": "sm_9"}}`, "invalid architecture"},
		{"bad architecture decimal", `{"capabilities": {"architecture": "9.10"}}`, "invalid architecture"},
		{"bad graph_mode", `{"capabilities": {"graph_mode": "maybe"}}`, "want eager or graph"},
		{"bad phase", `{"capabilities": {"phase": "train"}}`, "want prefill, decode or mixed"},
		{"bad device", `{"capabilities": {"device": "tpu"}}`, "want cpu or cuda"},
		{"bad quant", `{"capabilities": {"quant": "fp 8"}}`, "quant: invalid value"},
		{"bad model", `{"capabilities": {"model": "a b"}}`, "model: invalid value"},
		{"empty string", `{"capabilities": {"model": ""}}`, "empty value"},
		{"legacy dtypes not list", `{"dtypes": "bf16"}`, "dtypes: must be a list of strings"},
		{"legacy dtypes number", `{"dtypes": [16]}`, "dtypes[0]: want a string"},
		{"legacy max_last_dim string", `{"max_last_dim": "8"}`, "want an integer"},
		{"legacy graph_safe string", `{"graph_safe": "yes"}`, "graph_safe: must be true or false"},
		{"legacy quant number", `{"quant": 8}`, "quant: must be a list of strings"},
		{"deep nesting", `{"regime": ` + strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40) + `}`, "nested more than"},
		{"too large", `{"regime": {"a": "` + strings.Repeat("x", MaxMetadataBytes) + `"}}`, "byte limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMetadata([]byte(tt.in))
			if err == nil {
				t.Fatalf("ParseMetadata(%s) succeeded, want error containing %q", clip(tt.in), tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
			if _, ok := err.(*MetadataError); !ok {
				t.Fatalf("error is %T, want *MetadataError", err)
			}
		})
	}
}

func TestMetadataErrorHint(t *testing.T) {
	_, err := ParseMetadata([]byte(`{"capabilities": {"head_dim": []}}`))
	me, ok := err.(*MetadataError)
	if !ok {
		t.Fatalf("error %v is %T", err, err)
	}
	if me.Path != "capabilities.head_dim" || me.Hint == "" {
		t.Fatalf("got path %q hint %q", me.Path, me.Hint)
	}
}

// TestMetadataGolden parses every testdata/metadata/*.json fixture and
// compares the canonical JSON of its domain with the .golden file next to it.
// Regenerate with: go test ./internal/capability -update
func TestMetadataGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "metadata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			d, err := ParseMetadata(b)
			if err != nil {
				t.Fatalf("ParseMetadata: %v", err)
			}
			got, err := canon.Marshal(d.Canonical())
			if err != nil {
				t.Fatalf("canon.Marshal: %v", err)
			}
			got = append(got, '\n')
			golden := strings.TrimSuffix(f, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("canonical form differs from %s:\n got %s\nwant %s", golden, got, want)
			}
		})
	}
}

func FuzzMetadata(f *testing.F) {
	seeds := []string{
		`{}`,
		`{"capabilities": {"head_dim": 128, "num_tokens": {"min": 1, "max": 4096}}}`,
		`{"capabilities": {"dtype": ["bf16", "fp16"], "architecture": ["sm_90", 90, "9.0"]}}`,
		`{"dtypes": ["bf16"], "max_last_dim": 8192, "graph_safe": true, "quant": "fp8"}`,
		`{"capabilities": {"head_dim": 64, "head_dim": 64}}`,
		`{"capabilities": {"num_tokens": {"min": 10, "max": 5}}}`,
		`{"regime": {"a": [1, 2.5, null, true]}}`,
		`[`,
		`{"op": "attention.sdpa", "max_last_dim": 256, "notes": "x", "kl_threshold": 5e-3}`,
		`{"op": "a", "slot": "b"}`,
		`{"dtypes": [], "architectures": [], "quant": []}`,
	}
	if files, err := filepath.Glob(filepath.Join("testdata", "metadata", "*.json")); err == nil {
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				seeds = append(seeds, string(b))
			}
		}
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseMetadata(b)
		if err != nil {
			if _, ok := err.(*MetadataError); !ok {
				t.Fatalf("error %v is %T, want *MetadataError", err, err)
			}
			return
		}
		// The options only move max_last_dim's bound; what is accepted,
		// ignored and named does not depend on them.
		m1, err1 := ReadMetadata(b, ReadOptions{})
		m2, err2 := ReadMetadata(b, ReadOptions{LastDimField: "head_dim"})
		if err1 != nil || err2 != nil {
			t.Fatalf("ParseMetadata accepted what ReadMetadata refuses: %v / %v", err1, err2)
		}
		if m1.Slot != m2.Slot || m1.SlotKey != m2.SlotKey || strings.Join(m1.Ignored, "\x00") != strings.Join(m2.Ignored, "\x00") {
			t.Fatalf("options changed more than max_last_dim: %+v vs %+v", m1, m2)
		}
		if (m1.Slot == "") != (m1.SlotKey == "") {
			t.Fatalf("slot %q named by %q", m1.Slot, m1.SlotKey)
		}
		for _, k := range m1.Ignored {
			switch k {
			case "capabilities", "dtypes", "architectures", "quant", "max_last_dim", "min_num_tokens", "max_num_tokens", "graph_safe", "op", "slot":
				t.Fatalf("read key %q listed as ignored", k)
			}
		}
		if m2.LastDimField != "" && m2.LastDimField != "head_dim" {
			t.Fatalf("max_last_dim read into %q", m2.LastDimField)
		}
		// Every accepted domain has a canonical, hashable form, and
		// intersecting it with itself changes nothing.
		c1, err := canon.Marshal(d.Canonical())
		if err != nil {
			t.Fatalf("canonical form does not marshal: %v", err)
		}
		c2, err := canon.Marshal(d.Intersect(d).Canonical())
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("d ∩ d differs from d: %s vs %s (%v)", c1, c2, err)
		}
		if !d.Empty() && !Overlaps(d, d) {
			t.Fatalf("non-empty domain %s does not overlap itself", d)
		}
		_ = d.String()
	})
}
