package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/store"
	"cacheon/internal/store/pgtest"
	"cacheon/internal/store/storetest"
)

func openSQLite(t *testing.T) store.Store {
	s, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, openSQLite, storetest.Options{})
}

func TestPostgresConformance(t *testing.T) {
	srv := pgtest.Start(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := store.Open(context.Background(), srv.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}, storetest.Options{Concurrent: true})
}

func TestSQLiteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	s, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for path, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, filepath.Join(dir, "cacheon.db"): 0o600} {
		st, err := os.Stat(path)
		if err != nil || st.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, st.Mode(), err, want)
		}
	}
	if s.Backend() != "sqlite" {
		t.Errorf("Backend = %q", s.Backend())
	}
}

func TestSQLiteSecondOpenFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	s, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.Open(context.Background(), dir)
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Errorf("second Open: err = %v, want ErrLocked naming %s", err, dir)
	}
	s.Close()
	s2, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s2.Close()
}

func TestSQLiteReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "db")
	s, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.SetCursor(ctx, store.Position{Block: 4, Index: 1}) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.View(ctx, func(tx store.Tx) error {
		if p, err := tx.Cursor(ctx); err != nil || p != (store.Position{Block: 4, Index: 1}) {
			t.Errorf("cursor after reopen = %+v, %v", p, err)
		}
		return nil
	})
}
