package bundle

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"cacheon/internal/slot"
)

// stageHash stages src into dest and returns the copy's content hash.
func stageHash(src, dest string) (string, error) {
	cat, err := slot.NewCatalog()
	if err != nil {
		return "", err
	}
	s, err := Stage(context.Background(), src, dest, cat)
	if err != nil {
		return "", err
	}
	return s.ContentHash, nil
}

func TestStage(t *testing.T) {
	src := "../../examples/silu_torch"
	want, err := ContentHash(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	got, err := stageHash(src, filepath.Join(tmp, "dir"))
	if err != nil || got != want {
		t.Fatalf("directory snapshot: %s %v, want %s", got, err, want)
	}
	var archive bytes.Buffer
	if _, err := Package(src, &archive); err != nil {
		t.Fatal(err)
	}
	tgz := filepath.Join(tmp, "b.tar.gz")
	if err := os.WriteFile(tgz, archive.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := stageHash(tgz, filepath.Join(tmp, "tgz")); err != nil || got != want {
		t.Fatalf("archive snapshot: %s %v, want %s", got, err, want)
	}
	if _, err := stageHash(filepath.Join(tmp, "none"), filepath.Join(tmp, "x")); err == nil {
		t.Fatal("snapshot of a missing bundle")
	}
}
