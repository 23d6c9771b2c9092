package served

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"cacheon/internal/slot"
	"cacheon/internal/worker"
)

// servedCases are bundles run through the real served stage on the CPU
// arenas (torch 1.13): honest ones pass; a wrong kernel and the serving
// tells, honest in every verify row and wrong once their calls relate as
// served calls do, fail.
// epilogue is collective.moe_epilogue.v1's members.
const epilogue = "collective.ar_residual_rmsnorm+collective.moe_finalize_ar_rmsnorm"

type servedCase struct {
	bundle string // relative to the repository root
	slot   string // its row, or "slot+slot" for an atomic bundle's members
	want   string
	reason string // regexp the FAIL reason matches
	arena  string // the arena whose engine decides it ("": any)
}

var servedCases = []servedCase{
	{bundle: "examples/silu_torch", slot: "activation.silu_and_mul", want: Pass},
	{bundle: "examples/decode_torch", slot: "attention.decode", want: Pass},
	{bundle: "examples/broken_silu_wrong_math", slot: "activation.silu_and_mul", want: Fail, reason: `^served call 0 of activation.silu_and_mul: output out: allclose`},
	// Session 26's red-team pass (rt26a): each passes verify's rows at
	// seeds 1 and 2 in every dtype and cheats on a relation between
	// served calls (testdata/<name>/README.md).
	{bundle: served("rmsnorm_residual_stream_tell"), slot: "norm.rmsnorm", want: Fail, reason: `of norm.rmsnorm: output out: allclose`},
	{bundle: served("decode_cache_persist_tell"), slot: "attention.decode", want: Fail, reason: `of attention.decode: output out: matched_ratio`},
	{bundle: served("decode_repeated_value_rows"), slot: "attention.decode", want: Fail, reason: `of attention.decode: output out: matched_ratio`},
	// Since session 27 the engine hands each sdpa call its own copy of q,
	// k and v (dispatch.PACKED): the previous segment is no longer before
	// the view, the tell never fires and the kernel is exact in serving.
	{bundle: served("sdpa_prev_view_room_tell"), slot: "attention.sdpa", want: Pass},
	{bundle: served("sdpa_repeated_value_rows"), slot: "attention.sdpa", want: Fail, reason: `of attention.sdpa: output out: matched_ratio`},
	{bundle: served("silu_gemm_rank_tell"), slot: "activation.silu_and_mul", want: Fail, reason: `of activation.silu_and_mul: output out: allclose`},
	// The red-team pass's tells that waited for serving's later
	// patterns (rt26b); the stage's second wave, staggered with one long
	// prompt, shows them.
	{bundle: served("decode_long_context_tell"), slot: "attention.decode", want: Fail, reason: `of attention.decode: output out: matched_ratio`},
	{bundle: served("decode_growing_batch_tell"), slot: "attention.decode", want: Fail, reason: `of attention.decode: output out: matched_ratio`},
	{bundle: served("rmsnorm_second_prefill_tell"), slot: "norm.rmsnorm", want: Fail, reason: `of norm.rmsnorm: output out: allclose`},
	// An atomic target's members, served together.
	{bundle: "examples/moe_epilogue_atomic", slot: epilogue, want: Pass},
	// Session 27's red-team pass (rt27b): a prompt served again, a kernel
	// exact on every call that rewrites other layers' caches, and atomic
	// members that watch each other's calls.
	{bundle: served("epilogue_sibling_alternation"), slot: epilogue, want: Fail, reason: `of collective.moe_finalize_ar_rmsnorm: rank 0: output out_norm`},
	{bundle: served("rmsnorm_repeat_prompt"), slot: "norm.rmsnorm", want: Fail, reason: `of norm.rmsnorm: output out: allclose`},
	{bundle: served("decode_evict_other_layer"), slot: "attention.decode", want: Fail,
		reason: `^serve \(wave [123]\): .*attention.decode .*the call changed layer [0-9]+'s [KV] cache, which no candidate call may write`},
	// Session 28's red-team pass (rt28): a decode batch that grows past
	// four (the staggered wave now runs up to eight requests, and the
	// arena's own workload is served as a third wave), a tensor-parallel
	// rank's head geometry on a persisting cache (every call geometry of
	// the slot among the arenas gets its engine), and the pass's honest
	// controls in unusual styles.
	{bundle: served("decode_join_beyond_four"), slot: "attention.decode", want: Fail, reason: `of attention.decode: output out: `, arena: "cpu-tiny"},
	{bundle: served("decode_tp_rank_geometry"), slot: "attention.decode", want: Fail, reason: `of attention.decode: `, arena: "cpu-tiny-tp2"},
	{bundle: served("honest_decode_seqloop_baddbmm"), slot: "attention.decode", want: Pass},
	{bundle: served("honest_rmsnorm_rowblocks_workspace"), slot: "norm.rmsnorm", want: Pass},
	// A continuation chunk of a prompt longer than the arena's prefill
	// chunk: no shipped cpu arena can hold such a prompt (256 positions,
	// 512-token chunks), so the tell never fires in their serving.
	{bundle: served("sdpa_chunk_continuation_tell"), slot: "attention.sdpa", want: Pass},
	{bundle: served("rmsnorm_hog_second_prefill"), slot: "norm.rmsnorm", want: Fail, arena: "cpu-tiny",
		reason: `^serve \(wave [23]\): .*; the engine without the candidate loaded and served the same waves: the failure came with the candidate$`},
}

// rows are the case's rows, each of the bundle's only variant for it.
func (c servedCase) rows() []Row {
	var out []Row
	for _, s := range strings.Split(c.slot, "+") {
		out = append(out, Row{Slot: s})
	}
	return out
}

// served is the path of testdata bundle name from the repository root.
func served(name string) string { return filepath.Join("internal", "served", "testdata", name) }

// TestServedCasesListed keeps testdata and the table in step: every
// bundle there is a case.
func TestServedCasesListed(t *testing.T) {
	ents, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, c := range servedCases {
		listed[c.bundle] = true
	}
	for _, e := range ents {
		if e.IsDir() && !listed[served(e.Name())] {
			t.Errorf("testdata/%s is not in servedCases", e.Name())
		}
		if _, err := os.Stat(filepath.Join("testdata", e.Name(), "README.md")); err != nil {
			t.Errorf("testdata/%s has no README.md", e.Name())
		}
	}
}

func TestServedReal(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the arena runtime")
	}
	python, err := worker.FindPython(context.Background(), "")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no python with torch: %v", err)
		}
		t.Skipf("no python with torch: %v", err)
	}
	slots, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	as := shipped(t)
	for _, tc := range servedCases {
		t.Run(filepath.Base(tc.bundle), func(t *testing.T) {
			reps := Run(context.Background(), Options{
				Bundle: filepath.Join("..", "..", tc.bundle), Rows: tc.rows(), Device: "cpu", Arenas: as, Slots: slots,
				Seed: 11, Python: python, ScratchRoot: t.TempDir(),
			})
			for _, rep := range reps {
				t.Logf("%s in %s: %d selected, %d graded, %.1fs: %s", rep.Outcome, rep.Arena, rep.Selected, rep.Graded, rep.Seconds, rep.Reason)
				if tc.want == Pass && rep.Outcome == Pass && (rep.Graded == 0 || int64(rep.Graded) != rep.Selected) {
					t.Errorf("%s: graded %d of %d selected calls; the CPU stage dumps every one", rep.Arena, rep.Graded, rep.Selected)
				}
			}
			// A stage ends at its first FAIL; an honest bundle passes
			// every geometry's engine.
			last := reps[len(reps)-1]
			if tc.want == Pass {
				for _, rep := range reps {
					if rep.Outcome != Pass && rep.Outcome != NotApplicable {
						t.Fatalf("%s: outcome %s (%s), want PASS", rep.Arena, rep.Outcome, rep.Reason)
					}
				}
			} else if last.Outcome != tc.want {
				t.Fatalf("outcome %s in %s (%s), want %s", last.Outcome, last.Arena, last.Reason, tc.want)
			}
			if tc.reason != "" && !regexp.MustCompile(tc.reason).MatchString(last.Reason) {
				t.Errorf("reason %q does not match %s", last.Reason, tc.reason)
			}
			if tc.arena != "" && last.Arena != tc.arena {
				t.Errorf("decided in %s, want %s", last.Arena, tc.arena)
			}
		})
	}
}
