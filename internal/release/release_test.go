package release_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/product"
	"cacheon/internal/product/producttest"
	"cacheon/internal/release"
)

func TestBuildIsDeterministic(t *testing.T) {
	s := buildSample(t)
	// The same inputs from another place, with other file times and
	// permission bits, give byte-identical output.
	other := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.CopyFS(other, os.DirFS(s.sourceDir)); err != nil {
		t.Fatal(err)
	}
	if err := filepath.WalkDir(other, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chmod(p, 0o664)
	}); err != nil {
		t.Fatal(err)
	}
	in := s.inputs(filepath.Join(t.TempDir(), "rel2"))
	in.Sources = []string{other}
	rep, err := release.Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Descriptor != s.report.Descriptor {
		t.Fatalf("descriptor %s, first build %s", rep.Descriptor, s.report.Descriptor)
	}
	for _, f := range []string{release.TreeFile, release.TarFile, release.SBOMFile, release.DescriptorFile} {
		a, _ := os.ReadFile(filepath.Join(s.out, f))
		b, _ := os.ReadFile(filepath.Join(in.Out, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between builds", f)
		}
	}
	info, err := os.Stat(filepath.Join(in.Out, release.TreeDir, release.ManifestPath))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o644 || info.ModTime().Unix() != 0 {
		t.Fatalf("release.json mode %v time %v", info.Mode(), info.ModTime())
	}
}

func TestBuildRefuses(t *testing.T) {
	s := buildSample(t)
	other := s.record
	other.Review.Notes = "another review of the same crown"
	changedSrc := filepath.Join(t.TempDir(), "changed")
	if err := os.CopyFS(changedSrc, os.DirFS(s.sourceDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(changedSrc, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nonEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(nonEmpty, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		edit    func(*release.BuildInput)
		wantErr string
	}{
		{"no integration record", func(in *release.BuildInput) { in.Records = nil }, "no integration record"},
		{"an extra integration record", func(in *release.BuildInput) { in.Records = append(in.Records, other) }, "covers no contribution"},
		{"source tree changed", func(in *release.BuildInput) { in.Sources = []string{changedSrc} }, "matches none of the given source trees"},
		{"an unlisted source tree", func(in *release.BuildInput) { in.Sources = append(in.Sources, changedSrc) }, "is not a source of the release"},
		{"output not empty", func(in *release.BuildInput) { in.Out = nonEmpty }, "is not empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := s.inputs(filepath.Join(t.TempDir(), "out"))
			c.edit(&in)
			_, err := release.Build(in)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want %q", err, c.wantErr)
			}
		})
	}
}

func TestSignAndVerify(t *testing.T) {
	s := buildSample(t)
	priv, pub, _, _ := keys(t)
	if _, err := release.Verify(s.out, pub); err == nil || !strings.Contains(err.Error(), "not signed") {
		t.Fatalf("unsigned release: %v", err)
	}
	rep, err := release.Sign(s.out, priv)
	if err != nil {
		t.Fatal(err)
	}
	got, err := release.Verify(s.out, pub)
	if err != nil {
		t.Fatal(err)
	}
	if got.Descriptor != rep.Descriptor || got.KeyID != release.KeyID(pub) || len(got.Contributions) != 1 {
		t.Fatalf("report %+v", got)
	}
	if c := got.Contributions[0]; c.Target != silu || c.Contributor != "miner-1" {
		t.Fatalf("contribution %+v", c)
	}
	_, otherPub, _, _ := keys(t)
	_, err = release.Verify(s.out, otherPub)
	var f *release.Failure
	if !errors.As(err, &f) || f.File != release.SignatureFile || !strings.Contains(f.Reason, "no signature by key") {
		t.Fatalf("other key: %v", err)
	}
}

// flip inverts one byte of a file in the release directory.
func flip(t *testing.T, file string, at func(data []byte) int) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	i := at(data)
	data[i] ^= 0x01
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func middle(data []byte) int { return len(data) / 2 }

// TestTamperedByteFailsVerification changes the signed release in one
// place at a time and checks that verification fails naming that file.
func TestTamperedByteFailsVerification(t *testing.T) {
	kernel := release.TreeDir + "/sources/engine/" + producttest.Prefix + "/kernel.py"
	cases := []struct {
		name     string
		tamper   func(t *testing.T, dir string)
		wantFile string
	}{
		{"payload file in the tree", func(t *testing.T, dir string) { flip(t, filepath.Join(dir, kernel), middle) }, kernel},
		{"surrounding source file", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, release.TreeDir, "sources/engine/README.md"), middle)
		}, release.TreeDir + "/sources/engine/README.md"},
		{"release manifest in the tree", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, release.TreeDir, release.ManifestPath), middle)
		}, release.TreeDir + "/" + release.ManifestPath},
		{"an extra file in the tree", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, release.TreeDir, "sources/engine/evil.py"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, release.TreeDir + "/sources/engine/evil.py"},
		{"a file made executable", func(t *testing.T, dir string) {
			if err := os.Chmod(filepath.Join(dir, kernel), 0o755); err != nil {
				t.Fatal(err)
			}
		}, kernel},
		{"a file removed", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, kernel)); err != nil {
				t.Fatal(err)
			}
		}, kernel},
		{"a symlink in the tree", func(t *testing.T, dir string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, release.TreeDir, "link")); err != nil {
				t.Fatal(err)
			}
		}, release.TreeDir + "/link"},
		{"tree listing", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, release.TreeFile), func(b []byte) int { return bytes.Index(b, []byte(`"sha256":"`)) + 12 })
		}, release.TreeFile},
		{"engine tar content", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, release.TarFile), func([]byte) int { return 512 + 3 })
		}, release.TarFile},
		{"engine tar header", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, release.TarFile), func([]byte) int { return 2 })
		}, release.TarFile},
		{"engine tar trailer", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, release.TarFile), func(b []byte) int { return len(b) - 1 })
		}, release.TarFile},
		{"sbom", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, release.SBOMFile), func(b []byte) int { return bytes.Index(b, []byte("sealed model")) + 1 })
		}, release.SBOMFile},
		{"descriptor", func(t *testing.T, dir string) { flip(t, filepath.Join(dir, release.DescriptorFile), middle) }, release.DescriptorFile},
		{"signature", func(t *testing.T, dir string) {
			flip(t, filepath.Join(dir, release.SignatureFile), func(b []byte) int { return bytes.Index(b, []byte(`"sig":"`)) + 10 })
		}, release.SignatureFile},
		{"an extra top-level file", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "run.sh"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := buildSample(t)
			priv, pub, _, _ := keys(t)
			if _, err := release.Sign(s.out, priv); err != nil {
				t.Fatal(err)
			}
			if _, err := release.Verify(s.out, pub); err != nil {
				t.Fatalf("before tampering: %v", err)
			}
			c.tamper(t, s.out)
			_, err := release.Verify(s.out, pub)
			var f *release.Failure
			if !errors.As(err, &f) {
				t.Fatalf("verify after tampering: %v", err)
			}
			t.Log(err)
			if f.File != c.wantFile {
				t.Fatalf("failure names %q (%v), want %q", f.File, err, c.wantFile)
			}
		})
	}
}

func TestSignRefusesBrokenRelease(t *testing.T) {
	s := buildSample(t)
	priv, _, _, _ := keys(t)
	flip(t, filepath.Join(s.out, release.TreeDir, release.ManifestPath), middle)
	if _, err := release.Sign(s.out, priv); err == nil {
		t.Fatal("signed a tampered release")
	}
	if _, err := os.Stat(filepath.Join(s.out, release.SignatureFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a signature was written: %v", err)
	}
}

func TestMaterialize(t *testing.T) {
	ok := []release.Entry{
		{Path: "b/x", Mode: product.ModeFile, Data: []byte("x")},
		{Path: "a", Mode: product.ModeExec, Data: []byte("#!/bin/sh\n")},
	}
	dir := filepath.Join(t.TempDir(), "t")
	l, err := release.Materialize(dir, ok)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 || l[0].Path != "a" || l[0].Mode != product.ModeExec {
		t.Fatalf("listing %+v", l)
	}
	if err := release.Reopen(dir, l); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b", "x"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := release.Reopen(dir, l); err == nil || !strings.Contains(err.Error(), "b/x: content changed") {
		t.Fatalf("reopen after a change: %v", err)
	}
	for _, c := range []struct {
		name    string
		entries []release.Entry
		wantErr string
	}{
		{"file and directory", append(ok, release.Entry{Path: "a/b", Mode: product.ModeFile}), `lies below "a"`},
		{"duplicate", append(ok, ok[0]), "appears twice"},
		{"escaping path", []release.Entry{{Path: "../x", Mode: product.ModeFile}}, "path"},
		{"bad mode", []release.Entry{{Path: "x", Mode: "0600"}}, "mode"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := release.Materialize(filepath.Join(t.TempDir(), "t"), c.entries)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want %q", err, c.wantErr)
			}
		})
	}
}
