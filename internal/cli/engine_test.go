package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/engine"
	"cacheon/internal/safetensors"
	"cacheon/internal/tensor"
)

func TestPrintEngineBench(t *testing.T) {
	rep := &engineBenchReport{
		Arena: "cpu-tiny", ArenaDigest: strings.Repeat("a", 64), Workload: "default", Device: "cpu", DType: "float32",
		Strict: true, Python: "3.11", Torch: "1.13", DeviceName: "cpu", Sandbox: []string{"none"},
		Stack:  []engine.StackRow{{Slot: "activation.silu_and_mul", Bundle: "/b", ContentHash: strings.Repeat("c", 64), Variant: "default", Source: "silu.py", Entry: "silu_and_mul"}},
		Loaded: &engine.Loaded{Params: 426600, Layers: 2, Device: "cpu", DType: "float32", KVPages: 64},
		Bench: &engine.BenchResult{
			Warmup: 1,
			Waves: []engine.WaveResult{{Index: 0, Requests: 8, PromptTokens: 124, Generated: 128, Seconds: 0.1, TokensPerSec: 1280,
				PrefillSeconds: 0.02, PrefillTokensPerSec: 6200, DecodeSeconds: 0.08, DecodeTokensPerSec: 1500},
				{Index: 1, Requests: 1, PromptTokens: 4, Generated: 2, Seconds: 0.005, TokensPerSec: 400,
					PrefillSeconds: 0.006, PrefillTokensPerSec: 666, DecodeWithinNoise: true}},
			Median:         engine.Summary{TokensPerSec: 1280, PrefillTokensPerSec: 6200, DecodeTokensPerSec: 1500, Seconds: 0.1},
			Spread:         engine.Spread{MinTokensPerSec: 400, MaxTokensPerSec: 1280},
			TokensDigest:   strings.Repeat("d", 64),
			Slots:          map[string]engine.SlotCounters{"activation.silu_and_mul": {Selected: 3, Completed: 2, Fallback: 1}},
			Receipts:       []engine.Receipt{{Slot: "activation.silu_and_mul", Variant: "default", Reason: "raised", Count: 1}},
			RuntimeProfile: []byte(`{"mode":"eager"}`),
		},
		Audit: []engine.AuditResult{
			{File: "activation.silu_and_mul-0.safetensors", Slot: "activation.silu_and_mul", Call: 0, Outcome: engine.AuditFail, Reason: "output out: allclose", Metric: "allclose", Score: 0.5},
			{File: "activation.silu_and_mul-1.safetensors", Slot: "activation.silu_and_mul", Call: 1, Outcome: engine.AuditFail, Reason: "output out: allclose worse", Metric: "allclose", Score: 0.25},
			{File: "norm.rmsnorm-0.safetensors", Slot: "norm.rmsnorm", Outcome: engine.AuditPass, Metric: "allclose", Score: 1},
		},
		NeverFired:  []string{"norm.rmsnorm"},
		StockTokens: &engine.StockComparison{TokensDigest: strings.Repeat("e", 64), DifferingWaves: []int{1, 2}},
	}
	rep.AuditSlots = engine.SummarizeAudit(rep.Audit)
	var b bytes.Buffer
	printEngineBench(&b, rep)
	out := b.String()
	for _, want := range []string{
		"engine bench cpu-tiny (workload default)  arena " + strings.Repeat("a", 64),
		"model: 2 layers, 426.6K params on cpu, 64 KV pages",
		"stack: activation.silu_and_mul",
		"\n1              8     124     128    0.1000     1280.0",
		"\nmedian ",
		"\n2              1       4       2    0.0050      400.0     0.0060          666.0         -             -\n",
		"(-: 1 wave(s) whose prefill-only wave took as long as the whole wave",
		"activation.silu_and_mul              3         2         1",
		"fallback receipt: activation.silu_and_mul ×1: raised",
		"warning: stack slot norm.rmsnorm never fired",
		"runtime self-reported profile (untrusted, diagnostic only",
		"\nspread  tok/s 400.0-1280.0 over 2 timed wave(s) (-68.8% / +0.0% of the median)\n",
		"\naudit FAIL activation.silu_and_mul: 2 of 2 dump(s) failed; worst activation.silu_and_mul-1.safetensors (call 1): output out: allclose worse (score 0.25)\n",
		"\naudit PASS norm.rmsnorm: 1 dump(s)\n",
		"\naudit: 1 of 3 dump(s) PASS\n",
		"\nWARNING: the stack's tokens DIFFER from the stock stack's on the same arena, workload and seed (timed wave(s) 1, 2; stock tokens digest " + strings.Repeat("e", 64) + ")",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "audit FAIL") != 1 {
		t.Errorf("audit failures are not one line per slot:\n%s", out)
	}
	if strings.Contains(out, "prefill graphs") {
		t.Errorf("a runtime without prefill graphs printed a prefill graphs line:\n%s", out)
	}
	rep.StockTokens = &engine.StockComparison{Match: true, Median: engine.Summary{TokensPerSec: 1300}}
	rep.Loaded.PrefillGraphTokens = []int{32, 64}
	b.Reset()
	printEngineBench(&b, rep)
	if want := "\ntokens: the same as the stock stack's (same arena, workload and seed; stock median 1300.0 tok/s)\n"; !strings.Contains(b.String(), want) || strings.Contains(b.String(), "WARNING") {
		t.Errorf("output lacks %q:\n%s", want, b.String())
	}
	if want := "prefill graphs: a single prompt padded to [32 64] tokens\n"; !strings.Contains(b.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, b.String())
	}
}

// TestEngineCheckpointInSandbox loads an arena checkpoint through the
// sandboxed runtime (the sandbox must let it read the file). The
// checkpoint's embedding (tied to lm_head) is all zeros, so every logit is
// 0: greedy picks token 0 with logprob -ln(vocab) — values random weights
// would not give.
func TestEngineCheckpointInSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the arena runtime")
	}
	const v, h, layers, heads, kvHeads, d, inter = 512, 128, 2, 4, 2, 32, 256
	ts := map[string]*tensor.Tensor{}
	put := func(name string, fill float64, shape ...int) {
		n := 1
		for _, s := range shape {
			n *= s
		}
		vals := make([]float64, n)
		for i := range vals {
			vals[i] = fill * float64((i*7919)%13-6) / 6
		}
		x, err := tensor.FromFloat64(tensor.F32, shape, vals)
		if err != nil {
			t.Fatal(err)
		}
		ts[name] = x
	}
	put("model.embed_tokens.weight", 0, v, h)
	put("model.norm.weight", 1, h)
	for li := 0; li < layers; li++ {
		p := fmt.Sprintf("model.layers.%d.", li)
		put(p+"input_layernorm.weight", 1, h)
		put(p+"post_attention_layernorm.weight", 1, h)
		put(p+"self_attn.q_proj.weight", 0.05, heads*d, h)
		put(p+"self_attn.k_proj.weight", 0.05, kvHeads*d, h)
		put(p+"self_attn.v_proj.weight", 0.05, kvHeads*d, h)
		put(p+"self_attn.o_proj.weight", 0.05, h, heads*d)
		put(p+"mlp.gate_proj.weight", 0.05, inter, h)
		put(p+"mlp.up_proj.weight", 0.05, inter, h)
		put(p+"mlp.down_proj.weight", 0.05, h, inter)
	}
	dir := t.TempDir()
	if err := safetensors.WriteFile(filepath.Join(dir, "ckpt.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../arenas/cpu-tiny.toml")
	if err != nil {
		t.Fatal(err)
	}
	toml := strings.Replace(strings.Replace(string(src), `name = "cpu-tiny"`, `name = "cpu-ckpt"`, 1),
		"weights_seed = 1\n", "weights_seed = 1\ncheckpoint = \"ckpt.safetensors\"\n", 1)
	arenaFile := filepath.Join(dir, "cpu-ckpt.toml")
	if err := os.WriteFile(arenaFile, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"engine", "generate", "--arena", arenaFile, "--prompt", "5,6,7", "--max-new", "3"},
		strings.NewReader(""), &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "tokens:   [0 0 0]") || !strings.Contains(out.String(), "logprobs: [-6.2383 -6.2383 -6.2383]") {
		t.Fatalf("the checkpoint's weights were not used:\n%s", out.String())
	}
}

// FuzzPrintProfile: the profile comes from the runtime's reply, so any JSON
// (or none) prints without a panic, and a well-formed phase prints its line.
func FuzzPrintProfile(f *testing.F) {
	f.Add([]byte(`{"decode":{"count":4,"device_ms":2,"split_ms":{"mlp":1,"attention":0.5},"slots_ms":{"norm.rmsnorm":0.1}}}`))
	f.Add([]byte(`{"prefill":{"count":0,"device_ms":0}}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"decode":{"count":1e400}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var buf bytes.Buffer
		printProfile(&buf, raw)
		var phases map[string]profilePhase
		if json.Unmarshal(raw, &phases) != nil {
			return
		}
		if p, ok := phases["decode"]; ok && p.Count > 0 && p.DeviceMS > 0 && !strings.Contains(buf.String(), "decode:") {
			t.Fatalf("a valid decode phase %+v printed no line:\n%s", p, buf.String())
		}
	})
}
