package verify_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"cacheon/internal/scan"
	"cacheon/internal/tensor"
	"cacheon/internal/verify"
)

// warmSetup is the one-lane float32 cpu Setup of the warm-job tests.
func warmSetup(e *testEnv, root, bundleDir string) verify.Setup {
	return verify.Setup{Bundle: bundleDir, Device: "cpu", DTypes: []tensor.DType{tensor.F32}, Seed: 1, SeedSet: true,
		Replays: 2, Lanes: 1, Python: e.python, Slots: e.slots, ScratchRoot: root}
}

// waitWorker waits until a worker runs under root (its start under way)
// and returns the processes found.
func waitWorker(t *testing.T, root string) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if ps := processesUnder(t, root); len(ps) > 0 {
			return ps
		}
		if time.Now().After(deadline) {
			t.Fatalf("no worker started under %s", root)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGone checks that no process runs under root and root is empty.
func waitGone(t *testing.T, root, when string) {
	t.Helper()
	if ps := processesUnder(t, root); len(ps) > 0 {
		t.Errorf("processes left %s:\n%s", when, strings.Join(ps, "\n"))
	}
	if ents, _ := os.ReadDir(root); len(ents) > 0 {
		t.Errorf("scratch left %s: %v", when, ents)
	}
}

// pids are the process ids of processesUnder's lines.
func pids(ps []string) map[string]bool {
	out := map[string]bool{}
	for _, p := range ps {
		out[strings.SplitN(p, ":", 2)[0]] = true
	}
	return out
}

// comparable is a report's rows without what depends on the clock.
func comparable(rows []verify.Row) []verify.Row {
	out := append([]verify.Row(nil), rows...)
	for i := range out {
		out[i].Seconds = 0
	}
	return out
}

// TestWarmLikeCold: a bundle verified in a warm job (its worker started
// before the bundle came) gives the same rows, outcomes, shapes, counts
// and worst scores as a cold verify with the same seed, on the worker the
// warm job started; its timing says how long it had warmed. A bundle with
// no row for the warm job's lane (triton_silu is cuda-only: N/A on cpu)
// ends that lane's worker at once, and counts none of it.
func TestWarmLikeCold(t *testing.T) {
	if testing.Short() {
		t.Skip("starts python workers; skipped in -short mode")
	}
	e := newTestEnv(t)
	examples := filepath.Join("..", "..", "examples")
	tests := []struct {
		bundle  string
		workers int // workers the run counts
		outcome verify.Outcome
	}{
		{"silu_torch", 1, verify.NumericalPass},
		{"triton_silu", 0, verify.NotApplicable},
	}
	for _, tt := range tests {
		t.Run(tt.bundle, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			dir := filepath.Join(examples, tt.bundle)

			coldRoot := t.TempDir()
			cold, err := verify.Prepare(ctx, warmSetup(e, coldRoot, dir))
			if err != nil {
				t.Fatalf("cold Prepare: %v", err)
			}
			coldRep, err := cold.Run(ctx, nil)
			cold.Close()
			if err != nil {
				t.Fatalf("cold Run: %v", err)
			}

			warmRoot := t.TempDir()
			w, err := verify.NewWarm(ctx, warmSetup(e, warmRoot, ""))
			if err != nil {
				t.Fatalf("NewWarm: %v", err)
			}
			defer w.Close()
			before := pids(waitWorker(t, warmRoot))
			s := warmSetup(e, warmRoot, dir)
			if !w.Serves(s) {
				t.Fatalf("the warm job does not serve the Setup it was warmed for")
			}
			job, err := w.Prepare(ctx, s)
			if err != nil {
				t.Fatalf("warm Prepare: %v", err)
			}
			defer job.Close()
			if job.Warmed <= 0 {
				t.Errorf("job.Warmed = %v, want > 0 (prepared cold?)", job.Warmed)
			}
			if !strings.HasPrefix(job.Admitted.Dir(), warmRoot+string(os.PathSeparator)) {
				t.Errorf("bundle staged at %s, not in the warm job under %s", job.Admitted.Dir(), warmRoot)
			}
			if tt.workers > 0 {
				// The worker that served is the one started before the bundle.
				now := pids(processesUnder(t, warmRoot))
				for pid := range before {
					if !now[pid] {
						t.Errorf("warm worker %s ended by Prepare", pid)
					}
				}
			}
			warmRep, err := job.Run(ctx, nil)
			if err != nil {
				t.Fatalf("warm Run: %v", err)
			}
			if got, want := comparable(warmRep.Rows), comparable(coldRep.Rows); !reflect.DeepEqual(got, want) {
				t.Errorf("warm rows differ from cold:\n warm %+v\n cold %+v", got, want)
			}
			for _, r := range warmRep.Rows {
				if r.Outcome != tt.outcome {
					t.Errorf("row %s/%s %s: %s %s, want %s", r.Slot, r.Variant, r.DType, r.Outcome, r.Reason, tt.outcome)
				}
			}
			if warmRep.Workers != tt.workers || coldRep.Workers != tt.workers {
				t.Errorf("workers started: warm %d, cold %d, want %d", warmRep.Workers, coldRep.Workers, tt.workers)
			}
			if warmRep.Timing.Warm <= 0 || coldRep.Timing.Warm != 0 {
				t.Errorf("warm_s: warm %v (want > 0), cold %v (want 0)", warmRep.Timing.Warm, coldRep.Timing.Warm)
			}
			if tt.workers == 0 && warmRep.Timing.TorchImport != 0 {
				t.Errorf("torch_import_s %v counts the dropped lane's worker", warmRep.Timing.TorchImport)
			}
			if tt.workers > 0 && warmRep.Timing.TorchImport <= 0 {
				t.Errorf("torch_import_s %v: the warm worker's import is not counted", warmRep.Timing.TorchImport)
			}
			if err := job.Close(); err != nil {
				t.Fatal(err)
			}
			waitGone(t, warmRoot, "after the warm job's Close")
		})
	}
}

// TestWarmUnused: a warm job no bundle takes is closed with no process
// left and its directory removed, whether closed during its warm-up or
// once its worker runs.
func TestWarmUnused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts python workers; skipped in -short mode")
	}
	e := newTestEnv(t)
	for _, tt := range []struct {
		name        string
		afterWorker bool
	}{
		{"at once", false},
		{"worker running", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			w, err := verify.NewWarm(context.Background(), warmSetup(e, root, ""))
			if err != nil {
				t.Fatalf("NewWarm: %v", err)
			}
			if tt.afterWorker {
				waitWorker(t, root)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			waitGone(t, root, "after Close")
			if _, err := w.Prepare(context.Background(), warmSetup(e, root, filepath.Join("..", "..", "examples", "silu_torch"))); err == nil {
				// A closed warm job serving a Setup is not reused: Prepare
				// must not hand out its (removed) directory.
				t.Errorf("Prepare on a closed warm job succeeded")
			}
			waitGone(t, root, "after Prepare on a closed warm job")
		})
	}
}

// TestWarmMismatchIsCold: a Setup the warm job was not made for is
// prepared cold (in its own job directory, Warmed 0) and the warm job is
// closed.
func TestWarmMismatchIsCold(t *testing.T) {
	if testing.Short() {
		t.Skip("starts python workers; skipped in -short mode")
	}
	e := newTestEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	warmRoot, otherRoot := t.TempDir(), t.TempDir()
	w, err := verify.NewWarm(ctx, warmSetup(e, warmRoot, ""))
	if err != nil {
		t.Fatalf("NewWarm: %v", err)
	}
	defer w.Close()
	waitWorker(t, warmRoot)
	s := warmSetup(e, otherRoot, filepath.Join("..", "..", "examples", "silu_torch"))
	if w.Serves(s) {
		t.Fatalf("a warm job under %s serves a Setup with scratch root %s", warmRoot, otherRoot)
	}
	job, err := w.Prepare(ctx, s)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	defer job.Close()
	if job.Warmed != 0 {
		t.Errorf("job.Warmed = %v, want 0 (cold)", job.Warmed)
	}
	if !strings.HasPrefix(job.Admitted.Dir(), otherRoot+string(os.PathSeparator)) {
		t.Errorf("bundle staged at %s, want under %s", job.Admitted.Dir(), otherRoot)
	}
	waitGone(t, warmRoot, "of the warm job that did not serve")
	if err := job.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, otherRoot, "after the cold job's Close")
}

// TestWarmScanRefused: a bundle that fails the scan in a warm job is
// reported as a cold Prepare reports it (scan findings, the candidate's)
// and the warm job's workers end with its directory.
func TestWarmScanRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts python workers; skipped in -short mode")
	}
	e := newTestEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := t.TempDir()
	w, err := verify.NewWarm(ctx, warmSetup(e, root, ""))
	if err != nil {
		t.Fatalf("NewWarm: %v", err)
	}
	defer w.Close()
	waitWorker(t, root)
	_, err = w.Prepare(ctx, warmSetup(e, root, filepath.Join("..", "..", "examples", "broken_scan_imports_os")))
	var fe *scan.FindingsError
	if !errors.As(err, &fe) {
		t.Fatalf("Prepare: %v, want scan findings", err)
	}
	if !strings.Contains(err.Error(), "verify does not run a bundle that fails the scan") {
		t.Errorf("error %q does not say the bundle is not run", err)
	}
	waitGone(t, root, "after a refused scan")
}

// TestWarmStartsWhatTheManifestAsks: a warm job whose Setup names the
// bundle directory that will come starts the workers its manifest's rows
// need before it is taken, the ranks of a collective row's group among
// them, and those ranks serve the run; without a bundle named it starts
// the lane's single worker only.
func TestWarmStartsWhatTheManifestAsks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts python workers; skipped in -short mode")
	}
	e := newTestEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := filepath.Join("..", "..", "examples", "all_reduce_torch")
	setup := func(root, bundleDir string) verify.Setup {
		s := warmSetup(e, root, bundleDir)
		s.WorldSizes = []int{2}
		return s
	}
	// waitCount waits until n workers run under root, and a moment more
	// for any that should not.
	waitCount := func(root string, n int) map[string]bool {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for len(processesUnder(t, root)) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d workers started under %s", len(processesUnder(t, root)), n, root)
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		ps := processesUnder(t, root)
		if len(ps) != n {
			t.Fatalf("%d workers under %s, want %d:\n%s", len(ps), root, n, strings.Join(ps, "\n"))
		}
		return pids(ps)
	}

	plain := t.TempDir()
	w0, err := verify.NewWarm(ctx, setup(plain, ""))
	if err != nil {
		t.Fatal(err)
	}
	waitCount(plain, 1)
	w0.Close()
	waitGone(t, plain, "after Close")

	root := t.TempDir()
	w, err := verify.NewWarm(ctx, setup(root, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ranks := waitCount(root, 2)
	job, err := w.Prepare(ctx, setup(root, dir))
	if err != nil {
		t.Fatalf("warm Prepare: %v", err)
	}
	defer job.Close()
	// The ranks started before the bundle came are the run's (Prepare
	// kept them; a row asks the pool for its set and gets them).
	now := pids(processesUnder(t, root))
	for pid := range ranks {
		if !now[pid] {
			t.Errorf("rank %s started before the bundle came was ended by Prepare", pid)
		}
	}
	rep, err := job.Run(ctx, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, r := range rep.Rows {
		if r.Outcome != verify.Pass && r.Outcome != verify.NumericalPass {
			t.Errorf("row %s %s ws %d: %s %s", r.Slot, r.DType, r.WorldSize, r.Outcome, r.Reason)
		}
	}
	if rep.Workers != 2 {
		t.Errorf("workers started: %d, want the group's 2 ranks", rep.Workers)
	}
}
