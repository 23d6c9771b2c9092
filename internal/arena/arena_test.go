package arena

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const base = `name = "t"
device = "cpu"
dtype = "float32"

[model]
kind = "llama"
vocab_size = 512
hidden_size = 128
num_layers = 2
num_heads = 4
num_kv_heads = 2
intermediate_size = 256
rms_norm_eps = "0.00001"
rope_theta = 10000
max_position = 256
weights_seed = 1

[engine]
page_size = 16
max_batch = 8
kv_pages = 64

[workload]
requests = 8
prompt_len = [8, 24]
output_len = [16, 16]
waves = 3
seed = 7
`

// edit replaces the line starting with key (first match) by repl, or
// appends repl after the line "after" when key is "+after".
func edit(doc, key, repl string) string {
	lines := strings.Split(doc, "\n")
	if after, ok := strings.CutPrefix(key, "+"); ok {
		for i, l := range lines {
			if l == after {
				return strings.Join(append(lines[:i+1], append([]string{repl}, lines[i+1:]...)...), "\n")
			}
		}
		panic("no line " + after)
	}
	for i, l := range lines {
		if strings.HasPrefix(l, key+" ") || l == key {
			lines[i] = repl
			return strings.Join(lines, "\n")
		}
	}
	panic("no key " + key)
}

func TestParseBase(t *testing.T) {
	a, err := Parse("t.toml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if a.Model.HeadDim != 32 || a.Model.NumKVHeads != 2 || a.Engine.Graphs || a.Work.Warmup != 1 {
		t.Fatalf("defaults: %+v %+v %+v", a.Model, a.Engine, a.Work)
	}
	if got := a.Engine.GraphBuckets; len(got) != 4 || got[3] != 8 {
		t.Fatalf("default buckets %v", got)
	}
	if a.Work.TokenRange != [2]int{0, 512} {
		t.Fatalf("default token range %v", a.Work.TokenRange)
	}
	if string(a.Model.RMSNormEps) != "0.00001" {
		t.Fatalf("eps %q", a.Model.RMSNormEps)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, key, repl string
		want            string // regexp on the error
	}{
		{"unknown top", "+dtype = \"float32\"", "colour = 1", `^t.toml:4:1: colour: unknown field`},
		{"unknown model", "+kind = \"llama\"", "bias = true", `:7:1: model.bias: unknown field`},
		{"float eps", "rms_norm_eps", "rms_norm_eps = 1e-5", `model.rms_norm_eps: wrong type: got a TOML float, want a decimal string`},
		{"bad eps", "rms_norm_eps", `rms_norm_eps = "tiny"`, `:13:\d+: model.rms_norm_eps: "tiny" is not a decimal`},
		{"eps range", "rms_norm_eps", `rms_norm_eps = "1"`, `model.rms_norm_eps: 1 is not in \(0, 1\)`},
		{"string int", "vocab_size", `vocab_size = "512"`, `model.vocab_size: wrong type: got a TOML string, want an integer`},
		{"device", "device", `device = "tpu"`, `^t.toml:2:1: device: "tpu": want cpu or cuda`},
		{"dtype", "dtype", `dtype = "int8"`, `dtype: "int8": want bfloat16`},
		{"float16 on cpu", "dtype", `dtype = "float16"`, `dtype: float16 needs device = "cuda"`},
		{"name", "name", `name = "Bad Name"`, `name: "Bad Name" is not a name`},
		{"kind", "kind", `kind = "gpt"`, `model.kind: "gpt": want llama, mixtral or msa`},
		{"kv heads divide", "num_kv_heads", "num_kv_heads = 3", `:11:1: model.num_kv_heads: 3 does not divide num_heads = 4`},
		{"heads divide hidden", "num_heads", "num_heads = 3", `model.num_kv_heads: 2 does not divide|model.num_heads: 3 does not divide hidden_size`},
		{"odd head dim", "+num_kv_heads = 2", "head_dim = 33", `model.head_dim: 33 is odd`},
		{"llama experts", "+weights_seed = 1", "num_experts = 4", `model.num_experts: a dense llama model has no experts`},
		{"missing field", "hidden_size", "", `model.hidden_size: missing \(required\)`},
		{"missing table", "[engine]", "[engine2]", `engine2: unknown field`},
		{"layers range", "num_layers", "num_layers = 0", `model.num_layers: 0 is not in \[1, 1024\]`},
		{"buckets order", "+kv_pages = 64", "graph_buckets = [1, 4, 2]", `engine.graph_buckets: engine.graph_buckets\[2\] = 2: buckets must increase`},
		{"buckets max", "+kv_pages = 64", "graph_buckets = [1, 16]", `within max_batch = 8`},
		{"graphs on cpu", "+kv_pages = 64", "graphs = true", `engine.graphs: CUDA graphs need device = "cuda"`},
		{"pair len", "prompt_len", "prompt_len = [8]", `workload.prompt_len: want \[min, max\], got 1 values`},
		{"pair order", "prompt_len", "prompt_len = [24, 8]", `workload.prompt_len: \[24, 8\] is not a range`},
		{"token range", "+seed = 7", "token_range = [0, 513]", `workload.token_range: \[0, 513\] is not a range within \[0, 512\]`},
		{"token range empty", "+seed = 7", "token_range = [5, 5]", `with lo < hi`},
		{"kv capacity", "kv_pages", "kv_pages = 8", `engine.kv_pages: 8 pages cannot hold 8 concurrent sequences of up to 40 tokens`},
		{"kv capacity scratch page", "kv_pages", "kv_pages = 24", `engine.kv_pages: 24 pages cannot hold .* needs 25 pages of 16, the scratch page included`},
		{"kv pages minimum", "kv_pages", "kv_pages = 1", `engine.kv_pages: 1 is not in \[2, 16777216\]`},
		{"prefill chunk", "+kv_pages = 64", "prefill_chunk = 0", `engine.prefill_chunk: 0 is not in \[1, 1048576\]`},
		{"tensor parallel range", "+kv_pages = 64", "tensor_parallel = 9", `engine.tensor_parallel: 9 is not in \[1, 8\]`},
		{"moe path value", "+kv_pages = 64", `moe_path = "wide"`, `engine.moe_path: "wide": want "fused" or "deep"`},
		{"moe path dense", "+kv_pages = 64", `moe_path = "deep"`, `engine.moe_path: "deep" needs a mixtral model on at least 2 ranks`},
		{"moe path type", "+kv_pages = 64", `moe_path = 1`, `engine.moe_path: wrong type: got a TOML integer, want a string`},
		{"tensor parallel kv heads", "+kv_pages = 64", "tensor_parallel = 4", `engine.tensor_parallel: 4 ranks do not divide model.num_kv_heads = 2`},
		{"max position", "max_position", "max_position = 32", `workload.output_len: prompt_len max \+ output_len max = 40 exceeds model.max_position = 32`},
		{"waves", "waves", "waves = 0", `workload.waves: 0 is not in`},
		{"checkpoint", "+weights_seed = 1", `checkpoint = "model.bin"`, `model.checkpoint: "model.bin": want the path of a .safetensors file`},
		{"syntax", "seed", "seed = = 7", `^t.toml:\d+:\d+: `},
		{"bad workload name", "+seed = 7", "[workloads.default]\nrequests = 1\nprompt_len = [1, 1]\noutput_len = [1, 1]\nwaves = 1\nseed = 1", `workloads.default: "default" is not a workload name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.toml", []byte(edit(base, tc.key, tc.repl)))
			if err == nil {
				t.Fatal("accepted")
			}
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			if !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Fatalf("error %q does not match %q", err, tc.want)
			}
		})
	}
}

func TestMixtral(t *testing.T) {
	doc := edit(base, "kind", `kind = "mixtral"`)
	if _, err := Parse("t.toml", []byte(doc)); err == nil || !strings.Contains(err.Error(), "model.num_experts: missing") {
		t.Fatalf("mixtral without experts: %v", err)
	}
	doc = edit(doc, "+weights_seed = 1", "num_experts = 4\ntop_k = 5")
	if _, err := Parse("t.toml", []byte(doc)); err == nil || !strings.Contains(err.Error(), "model.top_k: 5 is more than num_experts = 4") {
		t.Fatalf("top_k > experts: %v", err)
	}
	a, err := Parse("t.toml", []byte(strings.Replace(doc, "top_k = 5", "top_k = 2", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if a.Model.NumExperts != 4 || a.Model.TopK != 2 {
		t.Fatalf("experts %+v", a.Model)
	}
}

func TestMSA(t *testing.T) {
	doc := edit(base, "kind", `kind = "msa"`)
	if _, err := Parse("t.toml", []byte(doc)); err == nil || !strings.Contains(err.Error(), "model.index_heads: missing") {
		t.Fatalf("msa without an indexer: %v", err)
	}
	msa := edit(doc, "+weights_seed = 1", "index_heads = 2\nindex_head_dim = 16\nmsa_block_size = 16\nmsa_topk = 2")
	a, err := Parse("t.toml", []byte(msa))
	if err != nil {
		t.Fatal(err)
	}
	if m := a.Model; m.IndexHeads != 2 || m.IndexHeadDim != 16 || m.MSABlockSize != 16 || m.MSATopK != 2 {
		t.Fatalf("indexer %+v", m)
	}
	for _, tc := range []struct{ doc, want string }{
		{edit(msa, "msa_topk", "msa_topk = 0"), `model.msa_topk: 0 is not in \[1, 4096\]`},
		{edit(msa, "msa_topk", "msa_topk = 9"), `model.msa_topk: 9 is more blocks than verify grades a sheet's ranking for \(its top 8\)`},
		{edit(msa, "index_head_dim", "index_head_dim = 1"), `model.index_head_dim: 1 is not in \[2, 1024\]`},
		{edit(msa, "+weights_seed = 1", `checkpoint = "m.safetensors"`), `model.checkpoint: an msa model runs on seeded weights only`},
		{edit(msa, "+kv_pages = 64", "tensor_parallel = 2"), `engine.tensor_parallel: an msa model runs on one rank`},
		{edit(msa, "+weights_seed = 1", "num_experts = 4"), `model.num_experts: a dense msa model has no experts`},
		{edit(base, "+weights_seed = 1", "msa_topk = 2"), `model.msa_topk: only an msa model has an indexer`},
	} {
		if _, err := Parse("t.toml", []byte(tc.doc)); err == nil || !regexp.MustCompile(tc.want).MatchString(err.Error()) {
			t.Errorf("want %q, got %v", tc.want, err)
		}
	}
	// the indexer is part of the identity; other kinds' digests do not
	// carry its (zero) fields
	d1, _ := a.Digest()
	b, err := Parse("t.toml", []byte(edit(msa, "msa_topk", "msa_topk = 3")))
	if err != nil {
		t.Fatal(err)
	}
	if d2, _ := b.Digest(); d1 == d2 {
		t.Error("msa_topk does not change the digest")
	}
	rc, _ := json.Marshal(a.Runtime())
	if !strings.Contains(string(rc), `"msa_topk":2`) {
		t.Errorf("runtime config without the indexer: %s", rc)
	}
	l, _ := Parse("t.toml", []byte(base))
	if rc, _ := json.Marshal(l.Runtime()); strings.Contains(string(rc), "msa") || strings.Contains(string(rc), "index_") {
		t.Errorf("a llama runtime config names indexer fields: %s", rc)
	}
}

func TestDigestResolvedForm(t *testing.T) {
	a, err := Parse("a.toml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	// The same arena with every default spelled out, reordered and with
	// another eps notation.
	spelled := edit(base, "+num_kv_heads = 2", "head_dim = 32")
	spelled = edit(spelled, "+kv_pages = 64", "graph_buckets = [1, 2, 4, 8]\ngraphs = false")
	spelled = edit(spelled, "+seed = 7", "warmup = 1\narrival_every = 0\ntoken_range = [0, 512]")
	spelled = edit(spelled, "rms_norm_eps", `rms_norm_eps = "1e-5"`)
	b, err := Parse("b.toml", []byte(spelled))
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db || len(da) != 64 {
		t.Fatalf("digests differ: %s %s", da, db)
	}
	c, _ := Parse("c.toml", []byte(edit(base, "seed", "seed = 8")))
	if dc, _ := c.Digest(); dc == da {
		t.Fatal("a different workload seed kept the digest")
	}
}

func TestSelectWorkload(t *testing.T) {
	doc := base + "\n[workloads.b2]\nrequests = 2\nprompt_len = [4, 4]\noutput_len = [8, 8]\nwaves = 2\nseed = 3\n"
	a, err := Parse("t.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := a.WorkloadNames(); len(got) != 2 || got[0] != "default" || got[1] != "b2" {
		t.Fatalf("names %v", got)
	}
	s, err := a.Select("b2")
	if err != nil {
		t.Fatal(err)
	}
	if s.Work.Requests != 2 || s.Workloads != nil || s.WorkloadName != "b2" {
		t.Fatalf("selected %+v", s)
	}
	d0, _ := a.Digest()
	d1, _ := s.Digest()
	if d0 == d1 {
		t.Fatal("selection did not change the identity")
	}
	if _, err := a.Select("nope"); err == nil || !strings.Contains(err.Error(), `no workload "nope"`) {
		t.Fatalf("unknown workload: %v", err)
	}
	rc, err := json.Marshal(s.Runtime())
	if err != nil || strings.Contains(string(rc), "workload") || !strings.Contains(string(rc), `"rms_norm_eps":"0.00001"`) {
		t.Fatalf("runtime config %s %v", rc, err)
	}
}

// TestShippedArenas loads every arenas/*.toml and checks the properties the
// issue asks of each.
func TestShippedArenas(t *testing.T) {
	files, err := filepath.Glob("../../arenas/*.toml")
	if err != nil || len(files) < 4 {
		t.Fatalf("arenas: %v %v", files, err)
	}
	got := map[string]*Arena{}
	for _, f := range files {
		a, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSuffix(filepath.Base(f), ".toml"); a.Name != want {
			t.Errorf("%s: name %q, want the file name %q", f, a.Name, want)
		}
		got[a.Name] = a
	}
	for _, name := range []string{"cpu-tiny", "cpu-tiny-moe"} {
		a := got[name]
		if a == nil || a.Device != "cpu" || a.Model.HiddenSize > 256 || a.Model.NumLayers > 4 {
			t.Errorf("%s: not a CI-sized cpu arena: %+v", name, a)
		}
	}
	if a := got["cpu-tiny-moe"]; a == nil || a.Model.Kind != KindMixtral {
		t.Error("cpu-tiny-moe is not mixtral")
	}
	d := got["h200-dense-1b"]
	if d == nil || d.Model.HiddenSize != 2048 || d.Model.NumLayers != 16 || d.Model.NumHeads != 32 || d.Model.NumKVHeads != 8 ||
		d.Model.HeadDim != 64 || d.Model.IntermediateSize != 8192 || d.Model.VocabSize != 128256 || d.Model.RopeTheta != 500000 ||
		d.DType != "bfloat16" || d.Device != "cuda" || !d.Engine.Graphs {
		t.Errorf("h200-dense-1b is not Llama-3.2-1B shaped: %+v", d)
	}
	if d != nil && (d.Work.Requests != 1 || d.Workloads["b64"].Requests != 64) {
		t.Errorf("h200-dense-1b workloads: %+v %+v", d.Work, d.Workloads)
	}
	// prefill_chunk reaches the runtime when an arena sets it, and is left
	// out (the runtime's default) when it does not
	for name, want := range map[string]string{"h200-dense-1b": `"prefill_chunk":8192`, "cpu-tiny": ""} {
		a := got[name]
		if a == nil {
			continue
		}
		rc, err := json.Marshal(a.Runtime())
		if err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(string(rc), `"prefill_chunk"`); has != (want != "") || (want != "" && !strings.Contains(string(rc), want)) {
			t.Errorf("%s runtime config: want %q, got %s", name, want, rc)
		}
	}
	// the tensor-parallel arenas are their one-rank twins on two ranks
	for tp, one := range map[string]string{"cpu-tiny-tp2": "cpu-tiny", "cpu-tiny-moe-tp2": "cpu-tiny-moe", "cpu-tiny-moe-deep-tp2": "cpu-tiny-moe"} {
		a, b := got[tp], got[one]
		if a == nil || b == nil {
			t.Errorf("%s or %s is not shipped", tp, one)
			continue
		}
		if a.Engine.Ranks() != 2 || b.Engine.Ranks() != 1 {
			t.Errorf("%s ranks %d, %s ranks %d", tp, a.Engine.Ranks(), one, b.Engine.Ranks())
		}
		if a.Model != b.Model || a.Work != b.Work || a.DType != b.DType || a.Device != b.Device || (a.Engine.MoEPath == MoEPathDeep) != strings.Contains(tp, "deep") {
			t.Errorf("%s differs from %s beyond its ranks", tp, one)
		}
	}
	for _, name := range []string{"h200x2-dense", "h200x2-moe"} {
		if a := got[name]; a == nil || a.Engine.Ranks() != 2 || a.Device != "cuda" {
			t.Errorf("%s: want a two-rank cuda arena, got %+v", name, a)
		}
	}
	if a, b := got["cpu-tiny-msa"], got["cpu-tiny"]; a == nil || b == nil || a.Model.Kind != KindMSA || a.Device != "cpu" ||
		a.Model.MSATopK*a.Model.MSABlockSize >= a.Work.PromptLen[1] {
		t.Errorf("cpu-tiny-msa: want a cpu msa arena whose prompts outgrow the selected blocks, got %+v", a)
	}
	m := got["h200-moe"]
	if m == nil || m.Model.Kind != KindMixtral || m.Model.NumExperts < 8 || m.Model.TopK != 2 || m.DType != "bfloat16" {
		t.Errorf("h200-moe: %+v", m)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "none.toml")); err == nil || !strings.Contains(err.Error(), "cannot read") {
		t.Fatalf("missing file: %v", err)
	}
	p := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(p, make([]byte, maxFileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("big file: %v", err)
	}
	p = filepath.Join(dir, "ck.toml")
	doc := edit(base, "+weights_seed = 1", `checkpoint = "w/m.safetensors"`)
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if cp, _ := a.CheckpointPath(); cp != filepath.Join(dir, "w", "m.safetensors") {
		t.Fatalf("checkpoint path %q", cp)
	}
}

// FuzzParse: the parser never panics, and whatever it accepts is valid,
// digestible and re-parses to the same identity from its own JSON form's
// facts.
func FuzzParse(f *testing.F) {
	f.Add([]byte(base))
	for _, p := range []string{"cpu-tiny", "cpu-tiny-moe", "h200-dense-1b", "h200-moe"} {
		if b, err := os.ReadFile("../../arenas/" + p + ".toml"); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("name = 1"))
	f.Add([]byte("[model]\nrms_norm_eps = 1e-5\n"))
	f.Add([]byte("[workloads.a]\n[workloads.a.b]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Parse("f.toml", data)
		if err != nil {
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("error %T is not *Error", err)
			}
			return
		}
		if _, err := a.Digest(); err != nil {
			t.Fatalf("accepted arena has no digest: %v", err)
		}
		if a.Model.NumHeads%a.Model.NumKVHeads != 0 || a.Model.HeadDim%2 != 0 || a.Model.TopK > a.Model.NumExperts {
			t.Fatalf("accepted an invalid model: %+v", a.Model)
		}
		for _, n := range a.WorkloadNames() {
			if _, err := a.Select(n); err != nil {
				t.Fatal(err)
			}
		}
	})
}

var update = flag.Bool("update", false, "rewrite testdata/digests.golden")

// TestDigestsGolden pins the identity of every shipped arena: a change to
// the schema, the defaults or a file changes a digest on purpose only
// (go test -update).
func TestDigestsGolden(t *testing.T) {
	files, err := filepath.Glob("../../arenas/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range files {
		a, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range a.WorkloadNames() {
			s, err := a.Select(w)
			if err != nil {
				t.Fatal(err)
			}
			d, err := s.Digest()
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %s %s\n", a.Name, w, d)
		}
	}
	golden := filepath.Join("testdata", "digests.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Fatalf("arena digests changed (go test ./internal/arena -update if on purpose):\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestErrorCause: an unreadable file's error keeps its cause for errors.Is
// but does not print it (the message already says what failed).
func TestErrorCause(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.toml")
	_, err := Load(path)
	var ae *Error
	if !errors.As(err, &ae) || !errors.Is(err, os.ErrNotExist) || err.Error() != path+": cannot read the arena file" {
		t.Fatalf("Load(missing) = %v (%T)", err, err)
	}
}
