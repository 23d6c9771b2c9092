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
		reason: `^serve \(wave [12]\): .*attention.decode .*the call changed layer [0-9]+'s [KV] cache, which no candidate call may write`},
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
			rep := Run(context.Background(), Options{
				Bundle: filepath.Join("..", "..", tc.bundle), Rows: tc.rows(), Device: "cpu", Arenas: as, Slots: slots,
				Seed: 11, Python: python, ScratchRoot: t.TempDir(),
			})
			t.Logf("%s in %s: %d selected, %d graded, %.1fs: %s", rep.Outcome, rep.Arena, rep.Selected, rep.Graded, rep.Seconds, rep.Reason)
			if rep.Outcome != tc.want {
				t.Fatalf("outcome %s (%s), want %s", rep.Outcome, rep.Reason, tc.want)
			}
			if tc.reason != "" && !regexp.MustCompile(tc.reason).MatchString(rep.Reason) {
				t.Errorf("reason %q does not match %s", rep.Reason, tc.reason)
			}
			if tc.want == Pass && (rep.Graded == 0 || int64(rep.Graded) != rep.Selected) {
				t.Errorf("graded %d of %d selected calls; the CPU stage dumps every one", rep.Graded, rep.Selected)
			}
		})
	}
}
