package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakePython writes an executable that stands in for the interpreter of
// the fill: it runs script with sh (TRITON_CACHE_DIR is in its
// environment).
func fakePython(t *testing.T, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrepareTritonHelpers(t *testing.T) {
	ctx := context.Background()
	t.Run("builds once, then reuses", func(t *testing.T) {
		cache := t.TempDir()
		count := filepath.Join(t.TempDir(), "runs")
		py := fakePython(t, `echo run >> `+count+`
mkdir -p "$TRITON_CACHE_DIR/UTILS" "$TRITON_CACHE_DIR/KERNEL"
echo elf > "$TRITON_CACHE_DIR/UTILS/cuda_utils.so"
echo cubin > "$TRITON_CACHE_DIR/KERNEL/k.cubin"`)
		for range 2 {
			dir, err := PrepareTritonHelpers(ctx, py, cache)
			if err != nil {
				t.Fatal(err)
			}
			if dir != filepath.Join(cache, "triton", "cache") {
				t.Fatalf("dir %s", dir)
			}
		}
		runs, _ := os.ReadFile(count)
		if got := strings.Count(string(runs), "run"); got != 1 {
			t.Fatalf("the fill ran %d times, want once", got)
		}
	})
	t.Run("a failed fill is not ready, and not tried by every run", func(t *testing.T) {
		cache := t.TempDir()
		count := filepath.Join(t.TempDir(), "runs")
		py := fakePython(t, "echo run >> "+count+"; echo no cuda >&2; exit 1")
		if _, err := PrepareTritonHelpers(ctx, py, cache); err == nil || !strings.Contains(err.Error(), "no cuda") {
			t.Fatalf("err = %v, want the fill's own words", err)
		}
		if _, err := os.Stat(filepath.Join(cache, "triton", ".ready")); !os.IsNotExist(err) {
			t.Fatalf("a failed fill left .ready: %v", err)
		}
		if _, err := PrepareTritonHelpers(ctx, py, cache); err == nil || !strings.Contains(err.Error(), "an earlier build failed") || !strings.Contains(err.Error(), "no cuda") {
			t.Fatalf("second try: err = %v", err)
		}
		if runs, _ := os.ReadFile(count); strings.Count(string(runs), "run") != 1 {
			t.Fatalf("the failing fill ran %d times, want once", strings.Count(string(runs), "run"))
		}
	})
	t.Run("a fill that builds no host module is refused", func(t *testing.T) {
		cache := t.TempDir()
		py := fakePython(t, `mkdir -p "$TRITON_CACHE_DIR/KERNEL"; echo x > "$TRITON_CACHE_DIR/KERNEL/k.cubin"`)
		if _, err := PrepareTritonHelpers(ctx, py, cache); err == nil || !strings.Contains(err.Error(), "no host module") {
			t.Fatalf("err = %v", err)
		}
	})
}
