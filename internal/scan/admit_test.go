package scan

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/bundle"
	"cacheon/internal/slot"
)

// stageExample copies examples/silu_torch into a fresh directory (edit
// applies changes to it) and stages that directory.
func stageExample(t *testing.T, cat *slot.Catalog, edit func(dir string)) (origin string, st *bundle.Staged) {
	t.Helper()
	origin = filepath.Join(t.TempDir(), "silu")
	copyTree(t, "../../examples/silu_torch", origin)
	if edit != nil {
		edit(origin)
	}
	st, err := bundle.Stage(context.Background(), origin, filepath.Join(t.TempDir(), "copy"), cat)
	if err != nil {
		t.Fatal(err)
	}
	return origin, st
}

// TestAdmit: a clean bundle is admitted as its private copy; a bundle with
// findings is not; a tree holding what its copy leaves out is judged by
// the tree the miner wrote.
func TestAdmit(t *testing.T) {
	requirePython(t)
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	appendTo := func(name, text string) func(string) {
		return func(dir string) {
			f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString(text); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name string
		edit func(dir string)
		rule string // "" = admitted
	}{
		{"clean", nil, ""},
		{"forbidden import", appendTo("silu.py", "\nimport subprocess\n"), RuleImportNotAllowed},
		{"symlink the copy leaves out", func(dir string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "notes.txt")); err != nil {
				t.Fatal(err)
			}
		}, RuleSymlink},
		{"cache directory the copy leaves out", func(dir string) {
			if err := os.Mkdir(filepath.Join(dir, "__pycache__"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "__pycache__", "silu.cpython-311.pyc"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, RuleBinaryFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			origin, st := stageExample(t, cat, tc.edit)
			a, err := Admit(ctx, st, Config{Slots: cat})
			if tc.rule == "" {
				if err != nil {
					t.Fatalf("Admit: %v", err)
				}
				if a.Dir() == origin || a.Dir() != st.Bundle.Dir || a.ContentHash() != st.ContentHash || a.OriginDir() == "" {
					t.Fatalf("admitted %s (hash %s), want the private copy %s", a.Dir(), a.ContentHash(), st.Bundle.Dir)
				}
				// What runs is the copy: editing the origin afterwards
				// changes nothing the admitted bundle holds.
				appendTo("silu.py", "\nimport subprocess\n")(origin)
				got, err := os.ReadFile(filepath.Join(a.Dir(), "silu.py"))
				if err != nil || strings.Contains(string(got), "subprocess") {
					t.Fatalf("the admitted copy changed with its origin: %v", err)
				}
				return
			}
			var fe *FindingsError
			if !errors.As(err, &fe) || a != nil {
				t.Fatalf("Admit = %v, %v; want findings", a, err)
			}
			var rules []string
			for _, f := range fe.Findings {
				rules = append(rules, f.Rule)
			}
			if !strings.Contains(strings.Join(rules, " "), tc.rule) {
				t.Fatalf("findings %v lack rule %s", rules, tc.rule)
			}
		})
	}
}

// TestCheckManifestFindings: a miner's scan reports a missing or invalid
// manifest as a finding and still scans the tree.
func TestCheckManifestFindings(t *testing.T) {
	requirePython(t)
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "k.py"), []byte("import os\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(context.Background(), dir, Config{Slots: cat})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.Path+" "+f.Rule)
	}
	if want := "k.py import-not-allowed|manifest.toml manifest"; strings.Join(got, "|") != want {
		t.Fatalf("findings %q, want %q", strings.Join(got, "|"), want)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.toml"), []byte("bundle_id = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rep, err = Check(context.Background(), dir, Config{Slots: cat}); err != nil || len(rep.Findings) < 2 || rep.Findings[1].Line != 1 {
		t.Fatalf("invalid manifest: %+v %v", rep, err)
	}
}
