package engine

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cacheon/internal/arena"
	"cacheon/internal/slot"
	"cacheon/internal/worker"
)

// shippedArena is arenas/NAME.toml with its default workload selected,
// and the slot catalog.
func shippedArena(t *testing.T, name string) (*arena.Arena, *slot.Catalog) {
	t.Helper()
	a, err := arena.Load("../../arenas/" + name + ".toml")
	if err != nil {
		t.Fatal(err)
	}
	if a, err = a.Select(""); err != nil {
		t.Fatal(err)
	}
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	return a, cat
}

func tinyArena(t *testing.T) *arena.Arena {
	t.Helper()
	a, err := arena.Load("../../arenas/cpu-tiny.toml")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func startFake(t *testing.T, f *fakeEngine) *Engine {
	t.Helper()
	e, err := Start(context.Background(), Options{Python: "python3", RuntimeParent: "/rt", Dir: t.TempDir(), Starter: f})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Kill() })
	return e
}

func loadFake(t *testing.T, e *Engine, a *arena.Arena) {
	t.Helper()
	if _, err := e.Load(context.Background(), LoadRequest{Arena: a.Runtime(), Strict: true}); err != nil {
		t.Fatal(err)
	}
}

func TestStartUsesEngineModule(t *testing.T) {
	f := &fakeEngine{}
	e := startFake(t, f)
	if e.Hello.DeviceName != "fake-cpu" || e.Hello.PID != 7 {
		t.Fatalf("hello %+v", e.Hello)
	}
	boot := f.argv[len(f.argv)-1]
	if !strings.Contains(boot, "from cacheon_runtime.engine import main; main.main()") || !strings.Contains(boot, `"/rt"`) {
		t.Fatalf("boot line %q", boot)
	}
	// The verify worker's boot line is unchanged by the Module option.
	if got := (worker.Options{Python: "p", RuntimeParent: "/rt"}).Argv(); got[4] != `import sys; sys.path.insert(0, "/rt"); from cacheon_runtime import worker; worker.main()` {
		t.Fatalf("worker boot line %q", got[4])
	}
	if _, err := worker.Start(context.Background(), f, worker.Options{Python: "p", RuntimeParent: "/rt", Dir: "/", Module: "engine.main; import os"}); err == nil {
		t.Fatal("a module name with code in it was accepted")
	}
}

func TestBenchTimesOnTheHost(t *testing.T) {
	a := tinyArena(t)
	f := &fakeEngine{perToken: 2 * time.Millisecond}
	e := startFake(t, f)
	loadFake(t, e, a)
	var lines []string
	res, err := Bench(context.Background(), e, a, BenchOptions{Waves: 3, Warmup: -1, Progress: func(s string) { lines = append(lines, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Waves) != 3 || res.Warmup != 0 {
		t.Fatalf("waves %d warmup %d", len(res.Waves), res.Warmup)
	}
	for _, w := range res.Waves {
		// 16 output tokens at 2ms: the full wave takes >= 32ms, the
		// prefill-only wave >= 2ms, whatever the fake claims.
		if w.Seconds < 0.032 || w.PrefillSeconds < 0.002 || w.Seconds > 5 {
			t.Fatalf("wave %d: host times %.4f / %.4f", w.Index, w.Seconds, w.PrefillSeconds)
		}
		if w.Generated != 8*16 || w.Requests != 8 {
			t.Fatalf("wave %d: %d tokens for %d requests", w.Index, w.Generated, w.Requests)
		}
		if got := float64(w.Generated) / w.Seconds; got != w.TokensPerSec || w.TokensPerSec > 8*16/0.032 {
			t.Fatalf("wave %d: tokens/s %.1f, host says %.1f", w.Index, w.TokensPerSec, got)
		}
		if w.DecodeTokensPerSec <= 0 || w.PrefillTokensPerSec <= 0 {
			t.Fatalf("wave %d: splits %+v", w.Index, w)
		}
		if w.Steps.Decode != 15 {
			t.Fatalf("steps %+v", w.Steps)
		}
	}
	if m := res.Median.TokensPerSec; m <= 0 || m > 8*16/0.032 {
		t.Fatalf("median %.1f", m)
	}
	if res.Slots["activation.silu_and_mul"].Selected != 20 || res.Slots["norm.rmsnorm"].Fired() != 40 {
		t.Fatalf("slots %+v", res.Slots)
	}
	// The fake's own claim (1e9 tok/s) is kept only as an untrusted
	// diagnostic.
	if !strings.Contains(string(res.RuntimeProfile), "tokens_per_s") {
		t.Fatalf("profile %s", res.RuntimeProfile)
	}
	if len(res.TokensDigest) != 64 || len(lines) != 6 {
		t.Fatalf("digest %q progress %q", res.TokensDigest, lines)
	}
	// The same workload gives the same tokens (the fake is deterministic),
	// so the digest is a function of the requests.
	res2, err := Bench(context.Background(), e, a, BenchOptions{Waves: 3, Warmup: -1})
	if err != nil {
		t.Fatal(err)
	}
	if res2.TokensDigest != res.TokensDigest {
		t.Fatal("same workload, different token digest")
	}
}

func TestBenchFailures(t *testing.T) {
	a := tinyArena(t)
	for _, tc := range []struct {
		name string
		f    *fakeEngine
		want string
		is   func(error) bool
	}{
		{"dies mid-wave", &fakeEngine{dieAt: 3}, "wave 2 (prefill only): generate: the engine exited unexpectedly (exit status 139): Fatal Python error: Segmentation fault",
			func(err error) bool { var d *DiedError; return errors.As(err, &d) }},
		{"candidate error", &fakeEngine{candidateAt: 2}, "wave 1 (full): generate: candidate failure (the engine aborted): kernel exploded after selection",
			IsCandidateFailure},
		{"short reply", &fakeEngine{shortAt: 2}, "wave 1 (full): generate: request w0-r0: 15 tokens for max_new_tokens 16 (ignore_eos true)",
			func(err error) bool { return !IsCandidateFailure(err) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startFake(t, tc.f)
			loadFake(t, e, a)
			_, err := Bench(context.Background(), e, a, BenchOptions{Waves: 2, Warmup: -1})
			if err == nil || err.Error() != tc.want || !tc.is(err) {
				t.Fatalf("error %v\nwant  %s", err, tc.want)
			}
		})
	}
}

func TestLoadRequest(t *testing.T) {
	a := tinyArena(t)
	f := &fakeEngine{}
	e := startFake(t, f)
	stack := map[string]SlotEntry{"activation.silu_and_mul": {Bundle: "/b", Source: "silu.py", Entry: "silu_and_mul", Variant: "default", Domain: map[string]any{"capabilities": map[string]any{}}}}
	l, err := e.Load(context.Background(), LoadRequest{Arena: a.Runtime(), Stack: stack, Strict: true, Audit: Audit{Every: 3, Dir: "/audit", MaxDumps: 8}})
	if err != nil {
		t.Fatal(err)
	}
	if l.Layers != 2 || l.Params != 12345 {
		t.Fatalf("loaded %+v", l)
	}
	req := f.loadReq
	au := req["audit"].(map[string]any)
	if au["share"] != "0" || au["every"].(float64) != 3 || req["strict"] != true || req["graphs"] != false {
		t.Fatalf("load request %v", req)
	}
	m := req["arena"].(map[string]any)["model"].(map[string]any)
	if m["rms_norm_eps"] != "0.00001" {
		t.Fatalf("eps travels as %v", m["rms_norm_eps"])
	}
	if _, ok := req["arena"].(map[string]any)["workload"]; ok {
		t.Fatal("the workload went to the runtime")
	}
	if req["stack"].(map[string]any)["activation.silu_and_mul"].(map[string]any)["entry"] != "silu_and_mul" {
		t.Fatalf("stack %v", req["stack"])
	}

	f2 := &fakeEngine{loadFail: ClassLoad}
	e2 := startFake(t, f2)
	_, err = e2.Load(context.Background(), LoadRequest{Arena: a.Runtime()})
	if err == nil || !strings.Contains(err.Error(), "load: the runtime failed: load_error: ImportError: no module named kernels") {
		t.Fatalf("load failure: %v", err)
	}
}

func TestScoreAndGenerateChecks(t *testing.T) {
	a := tinyArena(t)
	e := startFake(t, &fakeEngine{})
	loadFake(t, e, a)
	nll, err := e.Score(context.Background(), [][]int{{1, 2, 3, 4}, {5, 6}}, []int{1, 1})
	if err != nil || len(nll) != 2 || len(nll[0]) != 3 || len(nll[1]) != 1 {
		t.Fatalf("score %v %v", nll, err)
	}
	if _, err := e.Score(context.Background(), [][]int{{1}}, []int{1}); err == nil {
		t.Fatal("accepted from == len")
	}
	// A vocabulary smaller than the fake's tokens: the check catches it.
	reqs := []Request{{RID: "a", Prompt: []int{300}, MaxNewTokens: 2, IgnoreEOS: true}}
	if _, err := e.Generate(context.Background(), reqs, nil, 100); err == nil || !strings.Contains(err.Error(), "outside the vocabulary [0, 100)") {
		t.Fatalf("vocab check: %v", err)
	}
	g, err := e.Generate(context.Background(), reqs, nil, 512)
	if err != nil || g.Wall <= 0 || len(g.Results[0].Tokens) != 2 {
		t.Fatalf("generate %+v %v", g, err)
	}
	if _, err := e.Generate(context.Background(), reqs, []int{0, 1}, 512); err == nil {
		t.Fatal("accepted arrivals of the wrong length")
	}
}

func TestCheckResults(t *testing.T) {
	reqs := []Request{{RID: "a", Prompt: []int{1}, MaxNewTokens: 2, IgnoreEOS: true}}
	for _, tc := range []struct {
		name string
		res  []Result
		want string
	}{
		{"ok", []Result{{RID: "a", Tokens: []int{1, 2}, Logprobs: []float64{-1, 0}}}, ""},
		{"count", nil, "0 results for 1 requests"},
		{"rid", []Result{{RID: "b", Tokens: []int{1, 2}, Logprobs: []float64{-1, -1}}}, `result 0 is for "b"`},
		{"logprobs len", []Result{{RID: "a", Tokens: []int{1, 2}, Logprobs: []float64{-1}}}, "1 logprobs for 2 tokens"},
		{"positive logprob", []Result{{RID: "a", Tokens: []int{1, 2}, Logprobs: []float64{-1, 0.5}}}, "logprob 1 = 0.5"},
		{"negative token", []Result{{RID: "a", Tokens: []int{-1, 2}, Logprobs: []float64{-1, -1}}}, "token 0 = -1"},
		{"too many", []Result{{RID: "a", Tokens: []int{1, 2, 3}, Logprobs: []float64{-1, -1, -1}}}, "3 tokens for max_new_tokens 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkResults(reqs, tc.res, 10)
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRequestsDeterministic(t *testing.T) {
	a := tinyArena(t)
	w1, err := Requests(a.Work, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := Requests(a.Work, 0, false)
	w3, _ := Requests(a.Work, 1, false)
	wu, _ := Requests(a.Work, 0, true)
	if len(w1.Requests) != 8 || len(w1.Arrivals) != 8 || w1.Arrivals[3] != 6 {
		t.Fatalf("wave %+v", w1)
	}
	same := func(a, b Wave) bool {
		for i := range a.Requests {
			if !slices.Equal(a.Requests[i].Prompt, b.Requests[i].Prompt) {
				return false
			}
		}
		return true
	}
	if !same(w1, w2) || same(w1, w3) || same(w1, wu) {
		t.Fatal("request streams are not deterministic per (seed, wave, kind)")
	}
	for _, r := range w1.Requests {
		if len(r.Prompt) < 8 || len(r.Prompt) > 24 || r.MaxNewTokens != 16 || !r.IgnoreEOS {
			t.Fatalf("request %+v", r)
		}
		for _, tok := range r.Prompt {
			if tok < 1 || tok >= 512 {
				t.Fatalf("token %d outside [1, 512)", tok)
			}
		}
	}
	p := w1.PrefillOnly()
	if p.Arrivals != nil || p.Requests[0].MaxNewTokens != 1 || p.Requests[0].RID != "w0-r0-p" || w1.Requests[0].MaxNewTokens != 16 {
		t.Fatalf("prefill wave %+v", p.Requests[0])
	}
	// A golden first prompt pins the generator across Go versions.
	goldenPrompt := []int{41, 61, 492, 500}
	if got := w1.Requests[0].Prompt[:4]; !slices.Equal(got, goldenPrompt) {
		t.Fatalf("first prompt tokens %v, golden %v (the request stream changed: every arena read changes with it)", got, goldenPrompt)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestWaveSplit(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name               string
		gen                int
		full, pre          time.Duration
		decodeRate         float64
		noise              bool
		prefillRate, total float64
	}{
		{"decode measured", 9, 100 * ms, 20 * ms, 100, false, 400, 90},
		{"prefill as long as the wave", 9, 20 * ms, 25 * ms, 0, true, 320, 450},
		{"nothing to decode", 1, 20 * ms, 25 * ms, 0, false, 320, 50},
	} {
		wr := WaveResult{Requests: 1, PromptTokens: 8, Generated: tc.gen}
		wr.split(tc.full, tc.pre)
		if wr.DecodeWithinNoise != tc.noise || math.Abs(wr.DecodeTokensPerSec-tc.decodeRate) > 1e-9 ||
			math.Abs(wr.PrefillTokensPerSec-tc.prefillRate) > 1e-9 || math.Abs(wr.TokensPerSec-tc.total) > 1e-9 {
			t.Errorf("%s: %+v", tc.name, wr)
		}
	}
}

// A wave whose decode time is lost in timing noise has no decode rate: it
// leaves the decode median instead of pulling it towards zero.
func TestSummarizeUnresolvedDecode(t *testing.T) {
	ws := []WaveResult{
		{Requests: 1, Generated: 9, Seconds: 1, TokensPerSec: 9, DecodeSeconds: 0.5, DecodeTokensPerSec: 16},
		{Requests: 1, Generated: 9, Seconds: 1, TokensPerSec: 9, DecodeSeconds: 0.4, DecodeTokensPerSec: 20},
		{Requests: 1, Generated: 9, Seconds: 1, TokensPerSec: 9, DecodeWithinNoise: true},
		{Requests: 1, Generated: 1, Seconds: 1, TokensPerSec: 1, DecodeTokensPerSec: 0}, // nothing to decode
	}
	if got := summarize(ws).DecodeTokensPerSec; got != 16 {
		t.Fatalf("decode median = %v, want 16 (the median of 16, 20 and 0)", got)
	}
}

func TestStackFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	specs, err := LoadStackFile(write("s.toml", "[slots.\"norm.rmsnorm\"]\nbundle = \"b/n\"\n[slots.\"activation.silu_and_mul\"]\nbundle = \"/abs/s\"\nvariant = \"v1\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Slot != "activation.silu_and_mul" || specs[0].Bundle != "/abs/s" || specs[0].Variant != "v1" ||
		specs[1].Bundle != filepath.Join(dir, "b/n") {
		t.Fatalf("specs %+v", specs)
	}
	js, err := LoadStackFile(write("s.json", `{"slots":{"norm.rmsnorm":{"bundle":"x"}}}`))
	if err != nil || len(js) != 1 || js[0].Bundle != filepath.Join(dir, "x") {
		t.Fatalf("json %+v %v", js, err)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"bad.toml", "[slots.\"norm.rmsnorm\"]\nbundel = \"x\"\n", "2:1: unknown field slots.norm.rmsnorm.bundel"},
		{"empty.toml", "", "no [slots"},
		{"nob.toml", "[slots.\"norm.rmsnorm\"]\nvariant = \"x\"\n", "bundle is required"},
		{"bad.json", `{"slots":{},"x":1}`, "unknown field"},
		{"int.toml", "[slots.\"norm.rmsnorm\"]\nbundle = 5\n", `2:10: slots."norm.rmsnorm".bundle: want a string, got a number`},
		{"slots.toml", "slots = 3\n", `slots: want a table of [slots."NAME"] tables, got a number`},
		{"int.json", `{"slots":{"a":{"bundle":5}}}`, `slots."a".bundle: want a string, got a number`},
	} {
		if _, err := LoadStackFile(write(tc.name, tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	a := tinyArena(t)
	if err := CheckStack(a, []string{"norm.rmsnorm"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckStack(a, []string{"moe.fused_experts"}); err == nil || !strings.Contains(err.Error(), "no seam for slot moe.fused_experts in a llama model") {
		t.Fatalf("check stack: %v", err)
	}
}

// FuzzParseStackFile: a stack file either fails with an error naming the
// file, or gives one spec per slot, sorted, each with a non-empty slot name
// and an absolute bundle path.
func FuzzParseStackFile(f *testing.F) {
	f.Add("s.toml", []byte("[slots.\"activation.silu_and_mul\"]\nbundle = \"../examples/silu_torch\"\nvariant = \"default\"\n"))
	f.Add("s.json", []byte(`{"slots":{"norm.rmsnorm":{"bundle":"/abs/b"}}}`))
	f.Add("s.toml", []byte("[slots]\n"))
	f.Add("s.toml", []byte("[slots.x]\nbundle = 3\n"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		path := filepath.Join("/stacks", filepath.Base("x"+name))
		specs, err := parseStackFile(path, data)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name %s", err, path)
			}
			return
		}
		for i, s := range specs {
			if !filepath.IsAbs(s.Bundle) {
				t.Fatalf("spec %d: bundle %q is not absolute", i, s.Bundle)
			}
			if i > 0 && specs[i-1].Slot >= s.Slot {
				t.Fatalf("specs not sorted by slot: %q then %q", specs[i-1].Slot, s.Slot)
			}
		}
	})
}
