package engine

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cacheon/internal/safetensors"
	"cacheon/internal/slot"
	"cacheon/internal/tensor"
)

// writeDump writes one audit dump of case c as the runtime does: inputs
// under their names, entry inputs again under "in.<name>" (changed when
// touchInput), outputs computed by mutate(reference).
func writeDump(t testing.TB, dir string, c *slot.Case, call int, touchInput bool, mutate func([]float64)) {
	t.Helper()
	ref, err := c.Reference()
	if err != nil {
		t.Fatal(err)
	}
	outs, err := c.Outputs()
	if err != nil {
		t.Fatal(err)
	}
	ts := map[string]*tensor.Tensor{}
	for _, n := range c.Spec.InputNames() {
		ts[n] = c.Ranks[0][n]
	}
	for i, a := range c.Spec.Args {
		if a.Kind == slot.ArgInput {
			after := c.Ranks[0][a.Name]
			if touchInput && i == 0 {
				after = &tensor.Tensor{DType: after.DType, Shape: after.Shape, Data: append([]byte(nil), after.Data...)}
				after.Data[0] ^= 1
			}
			ts["in."+a.Name] = after
		}
	}
	for _, o := range outs {
		v := append([]float64(nil), ref[o.Name]...)
		if mutate != nil {
			mutate(v)
		}
		ot, err := tensor.FromFloat64(o.Spec.DType, o.Spec.Shape, v)
		if err != nil {
			t.Fatal(err)
		}
		ts[o.Name] = ot
	}
	name := fmt.Sprintf("%s-%d.safetensors", c.Spec.Name, call)
	if err := safetensors.WriteFile(filepath.Join(dir, name), ts, map[string]string{"slot": c.Spec.Name, "call": fmt.Sprint(call)}); err != nil {
		t.Fatal(err)
	}
}

func TestRegrade(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	scalars := map[string]map[string]float64{}
	names := append(Seams("mixtral"), "activation.silu_and_mul", "attention.msa_block_score", "attention.msa_prefill_block_score")
	for i, name := range names {
		spec, _ := cat.Lookup(name)
		for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
			c, err := spec.NewCase(slot.CaseParams{Seed: 11, Shape: spec.Shapes[0], DType: dt, Index: i})
			if err != nil {
				t.Fatal(err)
			}
			scalars[name] = maps.Clone(c.Scalars)
			// CaseFromInputs recovers the dims and scalars (an msa block
			// size, which no input's shape holds, from the scalars given).
			given := map[string]float64{"causal": c.Scalars["causal"], "eps": c.Scalars["eps"]}
			if bs, ok := c.Scalars["block_size"]; ok {
				given["block_size"] = bs
				if _, err := spec.CaseFromInputs(c.Ranks[0], nil); err == nil {
					t.Fatalf("%s: rebuilt without its block size", name)
				}
				if _, err := spec.CaseFromInputs(c.Ranks[0], map[string]float64{"block_size": 2.5}); err == nil || !strings.Contains(err.Error(), "not a positive integer") {
					t.Fatalf("%s: block size 2.5: %v", name, err)
				}
			}
			back, err := spec.CaseFromInputs(c.Ranks[0], given)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for k, v := range c.Dims {
				if k != "CAUSAL" && back.Dims[k] != v {
					t.Fatalf("%s: dim %s = %d, recovered %d", name, k, v, back.Dims[k])
				}
			}
			call := 0
			if dt == tensor.BF16 {
				call = 10
			}
			writeDump(t, dir, c, call, false, nil)
			writeDump(t, dir, c, call+1, false, func(v []float64) {
				for j := range v {
					v[j] = -v[j] + 1 // a wrong kernel
				}
			})
			writeDump(t, dir, c, call+2, true, nil)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "junk.safetensors"), []byte("nope"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ignored"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Regrade(dir, cat, scalars)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(names)*6+1 {
		t.Fatalf("%d results", len(res))
	}
	for _, r := range res {
		switch {
		case r.File == "junk.safetensors":
			if r.Outcome != AuditFail || !strings.Contains(r.Reason, "unexpected dump name") {
				t.Errorf("junk: %+v", r)
			}
		case r.Call%10 == 0:
			if r.Outcome != AuditPass || r.Score <= 0 {
				t.Errorf("%s: good dump %s: %s", r.File, r.Outcome, r.Reason)
			}
		case r.Call%10 == 1:
			if r.Outcome != AuditFail || !strings.Contains(r.Reason, "output out") {
				t.Errorf("%s: wrong dump %s: %s", r.File, r.Outcome, r.Reason)
			}
		default:
			if r.Outcome != AuditFail || !strings.Contains(r.Reason, "input mutation: the candidate wrote to input") {
				t.Errorf("%s: mutating dump %s: %s", r.File, r.Outcome, r.Reason)
			}
		}
	}
}

func TestRegradeRejects(t *testing.T) {
	cat, _ := slot.NewCatalog()
	spec, _ := cat.Lookup("norm.rmsnorm")
	c, err := spec.NewCase(slot.CaseParams{Seed: 1, Shape: spec.Shapes[0], DType: tensor.F32})
	if err != nil {
		t.Fatal(err)
	}
	outs, _ := c.Outputs()
	ref, _ := c.Reference()
	good, _ := tensor.FromFloat64(tensor.F32, outs[0].Spec.Shape, ref["out"])
	wrongShape, _ := tensor.FromFloat64(tensor.F32, []int{1, len(ref["out"])}, ref["out"])
	bf, _ := tensor.FromFloat64(tensor.BF16, c.Ranks[0]["weight"].Shape, c.Ranks[0]["weight"].Float64s())
	x, w := c.Ranks[0]["x"], c.Ranks[0]["weight"]
	dump := func(x, w, out *tensor.Tensor, extra ...string) map[string]*tensor.Tensor {
		m := map[string]*tensor.Tensor{"x": x, "weight": w, "in.x": x, "in.weight": w, "out": out}
		for _, k := range extra {
			delete(m, k)
		}
		return m
	}
	for _, tc := range []struct {
		name string
		ts   map[string]*tensor.Tensor
		meta map[string]string
		want string
	}{
		{"meta", dump(x, w, good), map[string]string{"slot": "norm.rmsnorm", "call": "9"}, "does not match the file name"},
		{"missing input", dump(x, w, good, "weight"), nil, "input weight: missing"},
		{"missing after", dump(x, w, good, "in.x"), nil, "input x: its value after the call (in.x) is missing"},
		{"mixed dtypes", map[string]*tensor.Tensor{"x": x, "weight": bf, "in.x": x, "in.weight": bf, "out": good}, nil, "weight is bfloat16, other inputs are float32"},
		{"output shape", dump(x, w, wrongShape), nil, "output out is float32"},
		{"no output", dump(x, w, good, "out"), nil, "output out: missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			meta := tc.meta
			if meta == nil {
				meta = map[string]string{"slot": "norm.rmsnorm", "call": "0"}
			}
			if err := safetensors.WriteFile(filepath.Join(dir, "norm.rmsnorm-0.safetensors"), tc.ts, meta); err != nil {
				t.Fatal(err)
			}
			res, err := Regrade(dir, cat, map[string]map[string]float64{"norm.rmsnorm": {"eps": c.Scalars["eps"]}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 || res[0].Outcome != AuditFail || !strings.Contains(res[0].Reason, tc.want) {
				t.Fatalf("%+v, want FAIL with %q", res, tc.want)
			}
		})
	}
	if _, err := Regrade(filepath.Join(t.TempDir(), "none"), cat, nil); err == nil {
		t.Fatal("missing dir accepted")
	}
}

// TestRegradeAll: every dump is regraded once, never more of them at once
// than there are cores, never more than regradeBytes of them (a larger
// one alone).
func TestRegradeAll(t *testing.T) {
	sizes := []int64{regradeBytes / 2, regradeBytes / 3, 2 * regradeBytes, 10, 10, regradeBytes / 2, regradeBytes, 1, 1, 1, 1, 1}
	var mu sync.Mutex
	running, bytes := 0, int64(0)
	seen := make([]int, len(sizes))
	regradeAll(len(sizes), sizes, func(i int) {
		w := min(sizes[i], regradeBytes)
		mu.Lock()
		running++
		bytes += w
		if running > max(1, runtime.GOMAXPROCS(0)) || (running > 1 && bytes > regradeBytes) {
			t.Errorf("dump %d: %d regrades, %d bytes at once", i, running, bytes)
		}
		seen[i]++
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		running--
		bytes -= w
		mu.Unlock()
	})
	for i, n := range seen {
		if n != 1 {
			t.Errorf("dump %d regraded %d times", i, n)
		}
	}
}

// BenchmarkRegrade: 8 silu dumps of 2 048 tokens × 2·8 192 (bfloat16,
// 64 MiB of input each), regraded one at a time and side by side
// (regradeDir).
func BenchmarkRegrade(b *testing.B) {
	cat, err := slot.NewCatalog()
	if err != nil {
		b.Fatal(err)
	}
	spec, ok := cat.Lookup("activation.silu_and_mul")
	if !ok {
		b.Fatal("no silu slot")
	}
	dir := b.TempDir()
	for call := range 8 {
		c, err := spec.NewCase(slot.CaseParams{Seed: uint64(call), Shape: slot.Shape{Name: "bench", Dims: slot.Dims{"N": 2048, "D": 8192}}, DType: tensor.BF16, Dist: slot.Normal})
		if err != nil {
			b.Fatal(err)
		}
		writeDump(b, dir, c, call, false, nil)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("one-at-a-time", func(b *testing.B) {
		for b.Loop() {
			for _, e := range ents {
				m := dumpName.FindStringSubmatch(e.Name())
				r := AuditResult{File: e.Name(), Slot: m[1]}
				r.Call, _ = strconv.Atoi(m[2])
				regradeOne(filepath.Join(dir, e.Name()), cat, nil, &r)
				if r.Outcome != AuditPass {
					b.Fatal(r.Reason)
				}
			}
		}
	})
	b.Run("side-by-side", func(b *testing.B) {
		for b.Loop() {
			res, err := regradeDir(dir, cat, nil, nil)
			if err != nil || len(res) != 8 || res[0].Outcome != AuditPass {
				b.Fatal(err, res)
			}
		}
	})
}

// TestAuditSlots: an msa arena's audit grades the block-score slots at its
// selection width, and changes nothing else; other arenas keep the catalog.
func TestAuditSlots(t *testing.T) {
	msa, cat := shippedArena(t, "cpu-tiny-msa")
	dense, _ := shippedArena(t, "cpu-tiny")
	for _, name := range []string{"attention.msa_block_score", "attention.msa_prefill_block_score", "norm.rmsnorm"} {
		want, _ := cat.Lookup(name)
		got, ok := AuditSlots(cat, msa).Lookup(name)
		if !ok {
			t.Fatalf("%s: not found", name)
		}
		wantK, wantMin := want.Correctness.K, want.Correctness.MinOverlap
		if strings.HasPrefix(name, "attention.msa") {
			wantK, wantMin = msa.Model.MSATopK, "1"
		}
		if got.Correctness.K != wantK || got.Correctness.Metric != want.Correctness.Metric || got.Correctness.MinOverlap != wantMin {
			t.Errorf("%s on msa: correctness %+v, want K %d, min overlap %s", name, got.Correctness, wantK, wantMin)
		}
		if d, _ := AuditSlots(cat, dense).Lookup(name); d != want {
			t.Errorf("%s on cpu-tiny: not the catalog's spec", name)
		}
	}
	if again, _ := cat.Lookup("attention.msa_block_score"); again.Correctness.K != 8 || again.Correctness.MinOverlap != "0.875" {
		t.Errorf("the catalog's policy changed to %+v", again.Correctness)
	}
	if _, ok := AuditSlots(cat, msa).Lookup("no.such_slot"); ok {
		t.Error("an unknown slot was found")
	}
}

// TestAuditHidesBestBlock: a decode sheet that pushes one block of each
// row below all others keeps 7 of the top 8. When that block is the
// row's K-th, the catalog's policy (K = 8, overlap 0.875) passes it and
// the audit of an arena selecting 8 blocks (AuditSlots: overlap 1) fails
// it; when it is the row's best, clearly above the K-th, both fail it
// (the overlap's slack covers near-ties only, rt33a's
// msa_decode_sink_block_drop).
func TestAuditHidesBestBlock(t *testing.T) {
	msa, cat := shippedArena(t, "h200-msa")
	spec, _ := cat.Lookup("attention.msa_block_score")
	var c *slot.Case
	var nb int
	for seed := uint64(1); c == nil && seed < 50; seed++ {
		cs, err := spec.NewCase(slot.CaseParams{Seed: seed, Shape: spec.Shapes[0], DType: tensor.F32})
		if err != nil {
			t.Fatal(err)
		}
		r, err := cs.Reference()
		if err != nil {
			t.Fatal(err)
		}
		nb = (cs.Dims["S"] + cs.Dims["BS"] - 1) / cs.Dims["BS"]
		for row := 0; row*nb < len(r["out"]); row++ {
			if finite(r["out"][row*nb:(row+1)*nb]) > msa.Model.MSATopK {
				c = cs
			}
		}
	}
	if c == nil {
		t.Fatal("no case has a row with more visible blocks than msa_topk")
	}
	scalars := map[string]map[string]float64{spec.Name: {"block_size": float64(c.Dims["BS"])}}
	for _, hidden := range []struct {
		name          string
		rank          int // the hidden block's rank in its row, 0 = best
		catalogPasses bool
	}{{"best block", 0, false}, {"K-th block", msa.Model.MSATopK - 1, true}} {
		dir := t.TempDir()
		writeDump(t, dir, c, 0, false, func(v []float64) {
			for row := 0; row*nb < len(v); row++ {
				cells := v[row*nb : (row+1)*nb]
				// Rows of more blocks than the arena selects; a shorter
				// row is graded by its ranking, which this would fail in
				// both policies.
				if finite(cells) <= msa.Model.MSATopK {
					continue
				}
				order := make([]int, 0, len(cells))
				lowest := math.Inf(1)
				for j, x := range cells {
					if !math.IsInf(x, -1) {
						order = append(order, j)
						lowest = min(lowest, x)
					}
				}
				sort.SliceStable(order, func(a, b int) bool { return cells[order[a]] > cells[order[b]] })
				cells[order[hidden.rank]] = lowest - 1
			}
		})
		for _, tc := range []struct {
			name  string
			slots SlotLookup
			pass  bool
		}{{"catalog", cat, hidden.catalogPasses}, {"h200-msa audit", AuditSlots(cat, msa), false}} {
			res, err := Regrade(dir, tc.slots, scalars)
			if err != nil || len(res) != 1 {
				t.Fatalf("%s, %s: %v %v", hidden.name, tc.name, res, err)
			}
			if (res[0].Outcome == AuditPass) != tc.pass {
				t.Errorf("%s hidden, %s: %s %s, want pass %v", hidden.name, tc.name, res[0].Outcome, res[0].Reason, tc.pass)
			}
		}
	}
}

func finite(v []float64) int {
	n := 0
	for _, x := range v {
		if !math.IsInf(x, -1) {
			n++
		}
	}
	return n
}
