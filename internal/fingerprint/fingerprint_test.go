package fingerprint

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"cacheon/internal/canon"
	"cacheon/internal/compattest"
	"cacheon/internal/fault"
	"cacheon/internal/sandbox"
	"cacheon/internal/slot"
)

// TestMain lets the sandbox re-execute this test binary as the
// normalizer's launcher.
func TestMain(m *testing.M) {
	sandbox.MaybeRunChild()
	os.Exit(m.Run())
}

// interpreters lists the Pythons to normalize with, each once by the path
// it runs as (a version manager's shim cannot run in the sandbox): python3
// on PATH, Debian's /usr/bin/python3, python3.12 and python3.11 where they
// run, and the colon-separated $CACHEON_TEST_PYTHONS. It skips the test
// when none runs.
func interpreters(t *testing.T) []string {
	t.Helper()
	cands := []string{"python3", "/usr/bin/python3", "python3.12", "python3.11"}
	if env := os.Getenv("CACHEON_TEST_PYTHONS"); env != "" {
		cands = append(cands, strings.Split(env, ":")...)
	}
	var out []string
	seen := map[string]bool{}
	for _, c := range cands {
		if c == "" {
			continue
		}
		exe, err := exec.Command(c, "-I", "-S", "-c", "import sys; print(sys.executable)").Output()
		if p := strings.TrimSpace(string(exe)); err == nil && p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Skip("no python3")
	}
	t.Logf("interpreters: %q", out)
	return out
}

func catalog(t *testing.T) *slot.Catalog {
	t.Helper()
	cat, err := slot.NewCatalog()
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// copyTree copies the bundle at src into a new temporary directory.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dest := filepath.Join(t.TempDir(), "b")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dest, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dest, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dest
}

// edit is a change to a copy of testdata/base: replacements in a file
// (each old string must occur), a rename, or a new file.
type edit struct {
	file     string
	old, new []string
	rename   string // new path of file
	write    string // file's new contents, when set (creates it)
}

func apply(t *testing.T, dir string, edits []edit) {
	t.Helper()
	for _, e := range edits {
		p := filepath.Join(dir, e.file)
		if e.write != "" {
			if err := os.WriteFile(p, []byte(e.write), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := string(data)
		for i := range e.old {
			if !strings.Contains(s, e.old[i]) {
				t.Fatalf("%s does not contain %q", e.file, e.old[i])
			}
			s = strings.ReplaceAll(s, e.old[i], e.new[i])
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if e.rename != "" {
			if err := os.Rename(p, filepath.Join(dir, e.rename)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func r(file string, pairs ...string) edit {
	e := edit{file: file}
	for i := 0; i+1 < len(pairs); i += 2 {
		e.old = append(e.old, pairs[i])
		e.new = append(e.new, pairs[i+1])
	}
	return e
}

const (
	silu, helpers, cuda = "kernels/silu.py", "kernels/helpers.py", "kernels/silu.cu"
	manifest, meta      = "manifest.toml", "metadata/silu.json"
)

var pairs = []struct {
	name  string
	edits []edit
	same  bool
}{
	{"one comment changed", []edit{r(silu, "# split the input in two halves", "# halves, split")}, true},
	{"comments added", []edit{r(silu, "SCALE = 1.0\n", "SCALE = 1.0  # the scale\n# more\n")}, true},
	{"reformatted", []edit{r(silu,
		"gate, up = half_split(x)", "(gate, up) = half_split( x )",
		"result = F.silu(gate.float()).to(x.dtype) * up", "result = (\n        F.silu(gate.float())\n        .to(x.dtype)\n        * up\n    )",
		"\n\ndef silu_and_mul", "\ndef silu_and_mul")}, true},
	{"locals renamed", []edit{r(silu, "gate", "g", "up", "u", "result", "res", "rows", "acc", "[r for r in range(res.shape[0]) if r >= 0]", "[i for i in range(res.shape[0]) if i >= 0]")}, true},
	{"parameters renamed", []edit{r(silu, "x", "inp", "out", "dst")}, true},
	{"helper locals and parameters renamed", []edit{r(helpers,
		"def half_split(t, axis=-1):", "def half_split(tensor, dim=-1):",
		"n = t.shape[axis] // 2", "half = tensor.shape[dim] // 2",
		"return t[..., :n], t[..., n:]", "return tensor[..., :half], tensor[..., half:]")}, true},
	{"docstrings changed", []edit{r(silu, "The slot's entry.", "Entry point.", "silu_and_mul: silu", "SiLU and mul: silu")}, true},
	{"docstrings removed", []edit{r(silu, `    """The slot's entry."""`+"\n", ""), r(helpers, `"""Helpers for the silu kernel."""`, "")}, true},
	{"string statement as a comment", []edit{r(silu, "    out.copy_", "    \"copy the result\"\n    out.copy_")}, true},
	{"manifest comments and layout", []edit{r(manifest,
		"# A small bundle: one slot, a source that imports a bundle-local helper.", "# another comment",
		`dtypes = ["float32", "bfloat16"]`, `dtypes = [ "bfloat16", "float32" ]  # both`,
		`entry = "silu_and_mul"`+"\n", "",
		`slot = "activation.silu_and_mul"`+"\nsource", `slot = "activation.silu_and_mul"`+"\nentry = \"silu_and_mul\"\nsource")}, true},
	{"bundle id", []edit{r(manifest, `"fingerprint-base"`, `"my-own-bundle"`)}, true},
	{"metadata layout", []edit{r(meta, "{\n  ", "{", ",\n  ", ", ")}, true},
	{"source file renamed", []edit{r(manifest, "kernels/silu.py", "kernels/act.py"), {file: silu, rename: "kernels/act.py"}}, true},
	{"CUDA comments and layout", []edit{r(cuda, "/* one element */", "", "// silu_and_mul in CUDA", "// SiLU", "if (i < d) {", "if (i<d)\n    {")}, true},
	{"CUDA file renamed", []edit{r(manifest, "kernels/silu.cu", "kernels/act.cu"), {file: cuda, rename: "kernels/act.cu"}}, true},
	{"a README added", []edit{{file: "README.md", write: "# notes\n"}}, true},

	{"constant", []edit{r(silu, "SCALE = 1.0", "SCALE = 1.5")}, false},
	{"helper constant", []edit{r(helpers, "// 2", "// 4")}, false},
	{"operator", []edit{r(silu, ".to(x.dtype) * up", ".to(x.dtype) + up")}, false},
	{"comparison", []edit{r(silu, "if r >= 0", "if r > 0")}, false},
	{"call", []edit{r(silu, "F.silu(", "F.gelu(")}, false},
	{"method", []edit{r(silu, "gate.float()", "gate.double()")}, false},
	{"module-level name", []edit{r(silu, "SCALE", "FACTOR")}, false},
	{"entry renamed", []edit{r(silu, "def silu_and_mul", "def entry"), r(manifest, `entry = "silu_and_mul"`, `entry = "entry"`)}, false},
	{"statement added", []edit{r(silu, "    return len(rows)", "    torch.cuda.synchronize()\n    return len(rows)")}, false},
	{"argument order", []edit{r(silu, "def silu_and_mul(x, out)", "def silu_and_mul(out, x)")}, false},
	{"manifest dtypes", []edit{r(manifest, `dtypes = ["float32", "bfloat16"]`, `dtypes = ["bfloat16"]`)}, false},
	{"metadata domain", []edit{r(meta, "65536", "4096")}, false},
	{"helper module renamed", []edit{r(silu, "kernels.helpers", "kernels.util"), {file: helpers, rename: "kernels/util.py"}}, false},
	{"a new helper module", []edit{{file: "kernels/extra.py", write: "X = 1\n"}}, false},
	{"CUDA constant", []edit{r(cuda, "1.0f", "2.0f")}, false},
	{"CUDA operator", []edit{r(cuda, "* x[i + d]", "+ x[i + d]")}, false},
	{"string constant in code", []edit{r(silu, "return len(rows)", "return len(rows), 'x'")}, false},
}

// TestPairs fingerprints copies of testdata/base with one change each:
// changes a copier makes for free keep the fingerprint, real code changes
// change it. Every interpreter found gives the same fingerprints.
func TestPairs(t *testing.T) {
	cat := catalog(t)
	pys := interpreters(t)
	var first map[string]string
	for _, py := range pys {
		f := New(Config{Slots: cat, Python: py})
		got := map[string]string{}
		base, err := f.Fingerprint(t.Context(), "testdata/base")
		if err != nil {
			t.Fatalf("python %q: base: %v", py, err)
		}
		if err := canon.ValidDigest(base); err != nil {
			t.Fatal(err)
		}
		got["base"] = base
		for _, tc := range pairs {
			dir := copyTree(t, "testdata/base")
			apply(t, dir, tc.edits)
			fp, err := f.Fingerprint(t.Context(), dir)
			if err != nil {
				t.Fatalf("python %q: %s: %v", py, tc.name, err)
			}
			got[tc.name] = fp
			if (fp == base) != tc.same {
				t.Errorf("python %q: %s: same fingerprint = %v, want %v", py, tc.name, fp == base, tc.same)
			}
		}
		if first == nil {
			first = got
			continue
		}
		for k, v := range got {
			if first[k] != v {
				t.Errorf("python %q: %s: fingerprint %s differs from python %q's %s", py, k, v, pys[0], first[k])
			}
		}
	}
}

// TestCompatBundles fingerprints the compatibility corpus's bundles that
// load: each gets a distinct fingerprint, except hash-edge's bundle, which
// is miner_allreduce_torch plus a notes folder: a copy.
func TestCompatBundles(t *testing.T) {
	cat := catalog(t)
	f := New(Config{Slots: cat})
	seen := map[string]string{}
	for _, b := range compattest.Bundles(t) {
		fp, err := f.Fingerprint(t.Context(), b.Dir)
		if err != nil {
			if fault.Of(err) == fault.Candidate {
				continue // a bundle this validator does not load
			}
			t.Fatalf("%s: %v", b.Name, err)
		}
		if b.Name == "hash-edge/allreduce_with_notes_dir" {
			if seen[fp] != "miner_allreduce_torch" {
				t.Errorf("%s: fingerprint %s, want miner_allreduce_torch's", b.Name, fp)
			}
			continue
		}
		if other, ok := seen[fp]; ok {
			t.Errorf("%s and %s share the fingerprint %s", b.Name, other, fp)
		}
		seen[fp] = b.Name
	}
	if len(seen) < 5 {
		t.Errorf("only %d compat bundles fingerprinted", len(seen))
	}
}

func TestErrors(t *testing.T) {
	cat := catalog(t)
	f := New(Config{Slots: cat})
	dir := copyTree(t, "testdata/base")
	apply(t, dir, []edit{r(helpers, "return t[", "return (t[")})
	if _, err := f.Fingerprint(t.Context(), dir); err == nil || !(fault.Of(err) == fault.Candidate) || !strings.Contains(err.Error(), "kernels/helpers.py") {
		t.Errorf("syntax error: %v, want a candidate error naming kernels/helpers.py", err)
	}
	dir = copyTree(t, "testdata/base")
	apply(t, dir, []edit{r(manifest, `abi_version`, `abi_versio`)})
	if _, err := f.Fingerprint(t.Context(), dir); err == nil || !(fault.Of(err) == fault.Candidate) {
		t.Errorf("bad manifest: %v, want a candidate error", err)
	}
	if _, err := New(Config{}).Fingerprint(t.Context(), "testdata/base"); err == nil {
		t.Error("no catalog: want an error")
	}
	_, err := New(Config{Slots: cat, Python: "/nonexistent/python3"}).Fingerprint(t.Context(), "testdata/base")
	if err == nil || (fault.Of(err) == fault.Candidate) {
		t.Errorf("missing interpreter: %v, want an infrastructure error", err)
	}
}
