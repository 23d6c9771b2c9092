package verify_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"cacheon/internal/scan"
	"cacheon/internal/tensor"
	"cacheon/internal/verify"
)

// processesUnder lists the processes whose command line names a path
// under dir (a worker's boot line names its runtime directory, which
// Prepare puts in the job's scratch directory).
func processesUnder(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var out []string
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte(dir)) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// TestPrepareStartsWorkersDuringScan: Prepare starts the lanes' workers
// while the scan runs. A bundle the scan refuses leaves no worker and no
// scratch behind when Prepare returns; an admitted one runs on the workers
// Prepare started (no second start), and Close ends them.
func TestPrepareStartsWorkersDuringScan(t *testing.T) {
	if testing.Short() {
		t.Skip("starts python workers; skipped in -short mode")
	}
	e := newTestEnv(t)
	examples := filepath.Join("..", "..", "examples")
	setup := func(bundleDir string) verify.Setup {
		return verify.Setup{Bundle: bundleDir, Device: "cpu", DTypes: []tensor.DType{tensor.F32}, Seed: 1, SeedSet: true,
			Replays: 2, Lanes: 1, Python: e.python, Slots: e.slots, ScratchRoot: t.TempDir()}
	}

	t.Run("refused", func(t *testing.T) {
		s := setup(filepath.Join(examples, "broken_scan_imports_os"))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := verify.Prepare(ctx, s)
		var fe *scan.FindingsError
		if !errors.As(err, &fe) {
			t.Fatalf("Prepare: %v, want scan findings", err)
		}
		if ps := processesUnder(t, s.ScratchRoot); len(ps) > 0 {
			t.Errorf("workers left after a refused scan:\n%s", strings.Join(ps, "\n"))
		}
		if ents, _ := os.ReadDir(s.ScratchRoot); len(ents) > 0 {
			t.Errorf("scratch left after a refused scan: %v", ents)
		}
	})

	t.Run("admitted", func(t *testing.T) {
		s := setup(filepath.Join(examples, "silu_torch"))
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		job, err := verify.Prepare(ctx, s)
		if err != nil {
			t.Fatalf("Prepare: %v", err)
		}
		// Staged where an engine session stages a stack bundle
		// (worker.StageBundle; TestStagingLikeVerify in internal/engine).
		staged := regexp.MustCompile(`^` + regexp.QuoteMeta(s.ScratchRoot) + `/cacheon-job-[0-9]+/bundles/[0-9a-f]{16}$`)
		if !staged.MatchString(job.Admitted.Dir()) {
			t.Errorf("bundle staged at %s, want %s", job.Admitted.Dir(), staged)
		}
		// The lane's worker runs before Run is called (its start may still
		// be under way when Prepare returns).
		deadline := time.Now().Add(30 * time.Second)
		for len(processesUnder(t, s.ScratchRoot)) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no worker started by Prepare")
			}
			time.Sleep(10 * time.Millisecond)
		}
		rep, err := job.Run(ctx, nil)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if rep.Workers != 1 {
			t.Errorf("%d workers started, want the 1 Prepare started", rep.Workers)
		}
		for _, r := range rep.Rows {
			if r.Outcome != verify.NumericalPass {
				t.Errorf("row %s/%s %s: %s %s", r.Slot, r.Variant, r.DType, r.Outcome, r.Reason)
			}
		}
		if err := job.Close(); err != nil {
			t.Fatal(err)
		}
		if ps := processesUnder(t, s.ScratchRoot); len(ps) > 0 {
			t.Errorf("workers left after Close:\n%s", strings.Join(ps, "\n"))
		}
	})
}
