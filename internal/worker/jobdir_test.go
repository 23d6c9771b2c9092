package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"cacheon/internal/bundle"
	"cacheon/internal/slot"
)

func TestStageBundle(t *testing.T) {
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	root := t.TempDir()
	job, err := NewJob(root)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(job) || filepath.Dir(job) != root || !regexp.MustCompile(`^cacheon-job-[0-9]+$`).MatchString(filepath.Base(job)) {
		t.Fatalf("job directory %s: want %s/cacheon-job-N", job, root)
	}
	work, err := NewWorkDir(job)
	if err != nil || filepath.Dir(work) != job || !strings.HasPrefix(filepath.Base(work), "workers-") {
		t.Fatalf("workers directory %s (%v): want %s/workers-N", work, err, job)
	}
	silu, _ := filepath.Abs("../../examples/silu_torch")
	rms, _ := filepath.Abs("../../examples/rmsnorm_torch")

	first, err := StageBundle(ctx, silu, job, cat)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(JobBundles(job), first.ContentHash[:BundleNameLen])
	if first.Bundle.Dir != want {
		t.Fatalf("staged at %s, want %s", first.Bundle.Dir, want)
	}
	if _, err := os.Stat(filepath.Join(want, "silu.py")); err != nil {
		t.Fatal(err)
	}
	// The same bundle again (another slot of a stack): the first copy.
	again, err := StageBundle(ctx, silu, job, cat)
	if err != nil || again.Bundle.Dir != want || again.ContentHash != first.ContentHash {
		t.Fatalf("staged again at %v (%v), want %s", again, err, want)
	}
	ents, err := os.ReadDir(JobBundles(job))
	if err != nil || len(ents) != 1 {
		t.Fatalf("bundles directory holds %v (%v), want the one copy and no staging leftovers", ents, err)
	}

	// Another bundle whose name is taken (two hashes that share their
	// first digits): refused, not the wrong copy.
	other, err := NewJob(root)
	if err != nil {
		t.Fatal(err)
	}
	st, err := StageBundle(ctx, rms, other, cat)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(want, filepath.Join(JobBundles(job), st.ContentHash[:BundleNameLen])); err != nil {
		t.Fatal(err)
	}
	if _, err := StageBundle(ctx, rms, job, cat); err == nil || !strings.Contains(err.Error(), "holds another bundle") {
		t.Fatalf("a name taken by another bundle: %v", err)
	}

	// A missing origin is the stage's "open" failure.
	_, err = StageBundle(ctx, filepath.Join(root, "missing"), job, cat)
	var se *bundle.StageError
	if !errors.As(err, &se) || se.Step != "open" {
		t.Fatalf("missing origin: %v, want a StageError at open", err)
	}
}
