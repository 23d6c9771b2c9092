package sqlitefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpen: the directory is made private, the file 0600, the journal WAL;
// a second Open of the directory is refused while the first holds it and
// allowed once it closed; a directory others may write to is refused.
func TestOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	db, err := Open(t.Context(), dir, "x.db", "lock")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "x.db"): 0o600} {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, st.Mode().Perm(), err, want)
		}
	}
	var sync int
	if err := db.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
		t.Errorf("synchronous = %d, %v; want 2 (FULL)", sync, err)
	}
	if _, err := Open(t.Context(), dir, "x.db", "lock"); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open while the first holds the lock: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(t.Context(), dir, "x.db", "lock")
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	again.Close()

	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(t.Context(), open, "x.db", "lock"); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("open in a 0777 directory: %v", err)
	}
	if _, err := Open(t.Context(), filepath.Join(t.TempDir(), "a?b"), "x.db", "lock"); err == nil {
		t.Fatal("a path with '?' was accepted")
	}
}
