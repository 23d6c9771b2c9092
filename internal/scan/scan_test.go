package scan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"cacheon/internal/sandbox"
)

var update = flag.Bool("update", false, "rewrite the expected.txt golden files")

// requirePython skips the test only when no python3 is installed at all.
func requirePython(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
}

// fixtureInput is testdata/bundles/<name>/input.json.
type fixtureInput struct {
	HasManifest bool     `json:"has_manifest"`
	Sources     []string `json:"sources"`
	CUDASources []string `json:"cuda_sources"`
}

func loadInput(t testing.TB, dir string) Input {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "input.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fi fixtureInput
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fi); err != nil {
		t.Fatalf("%s/input.json: %v", dir, err)
	}
	return Input{
		Root:        filepath.Join(dir, "bundle"),
		HasManifest: fi.HasManifest,
		Sources:     fi.Sources,
		CUDASources: fi.CUDASources,
	}
}

// copyTree copies a fixture bundle so tests can add runtime-only entries and
// so that nothing a scan might write lands in testdata.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// render is the golden form of a report.
func render(rep *Report) string {
	var b strings.Builder
	b.WriteString("# files: " + strconv.Itoa(rep.Files) + "\n")
	for _, f := range rep.Findings {
		b.WriteString(f.String())
		b.WriteString("\n")
	}
	return b.String()
}

func scanOrFatal(t testing.TB, in Input) *Report {
	t.Helper()
	rep, err := Scan(context.Background(), in, DefaultPolicy())
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return rep
}

func TestFixtures(t *testing.T) {
	requirePython(t)
	entries, err := os.ReadDir(filepath.Join("testdata", "bundles"))
	if err != nil {
		t.Fatal(err)
	}
	known := make(map[string]bool)
	for _, r := range Rules() {
		known[r.ID] = true
	}
	for _, e := range entries {
		dir := filepath.Join("testdata", "bundles", e.Name())
		t.Run(e.Name(), func(t *testing.T) {
			t.Parallel()
			in := loadInput(t, dir)
			root := t.TempDir()
			copyTree(t, in.Root, root)
			in.Root = root
			rep := scanOrFatal(t, in)
			for _, f := range rep.Findings {
				if !known[f.Rule] {
					t.Errorf("finding with unlisted rule: %s", f)
				}
			}
			got := render(rep)
			golden := filepath.Join(dir, "expected.txt")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("findings differ from %s (run go test ./internal/scan -update after checking):\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

// TestRuntimeFileRules covers entries git cannot carry: links, a FIFO,
// __pycache__, .git, a name with a newline and an oversized source.
func TestRuntimeFileRules(t *testing.T) {
	requirePython(t)
	root := t.TempDir()
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("manifest.toml", "")
	write("entry.py", "import torch\n")
	write("__pycache__/entry.cpython-311.pyc", "\x00bytecode")
	write("pkg/__pycache__/x.pyc", "\x00")
	write(".git/HEAD", "ref: refs/heads/main\n")
	write(".venv/lib/site.py", "import os\n")
	write("evil\nname.py", "import os\n")
	write("big.py", "x = 1\n"+strings.Repeat("#", maxSourceBytes))
	for link, target := range map[string]string{
		"link.py":     "entry.py",
		"linkdir":     "pkg",
		"declared.py": "/etc/passwd",
		"dangling.py": "nowhere.py",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		`"evil\nname.py":0:0 bad-filename the path is not valid UTF-8 or contains control characters; rename it`,
		".git:0:0 hidden-dir hidden directories (such as .git) must not be packaged; remove it from the bundle",
		".venv:0:0 hidden-dir hidden directories (such as .git) must not be packaged; remove it from the bundle",
		"__pycache__:0:0 binary-file __pycache__ holds compiled bytecode; package the bundle without it",
		"big.py:0:0 scan-limit the file is larger than 1048576 bytes; split it",
		"dangling.py:0:0 symlink symbolic links are not allowed in a bundle; copy the file in or remove the link",
		"declared.py:0:0 symlink symbolic links are not allowed in a bundle; copy the file in or remove the link",
		"link.py:0:0 symlink symbolic links are not allowed in a bundle; copy the file in or remove the link",
		"linkdir:0:0 symlink symbolic links are not allowed in a bundle; copy the file in or remove the link",
		"pkg/__pycache__:0:0 binary-file __pycache__ holds compiled bytecode; package the bundle without it",
	}
	if err := mkfifo(filepath.Join(root, "pipe")); err == nil {
		want = append(want, "pipe:0:0 special-file devices, pipes and sockets are not allowed in a bundle; remove it")
	} else {
		t.Logf("no FIFO on this system: %v", err)
	}
	rep := scanOrFatal(t, Input{Root: root, HasManifest: true, Sources: []string{"entry.py", "declared.py"}})
	assertFindings(t, rep, want)
}

// TestDeclaredMetadata: a row's metadata JSON is declared data wherever it
// lives (meta/ as well as metadata/); a file beside it is not, and a
// metadata path that is not JSON exempts nothing.
func TestDeclaredMetadata(t *testing.T) {
	root := t.TempDir()
	for rel, body := range map[string]string{
		"k.py":          "def f(x, out):\n    out.copy_(x)\n",
		"meta/a.json":   "{}",
		"meta/b.json":   "{}",
		"meta/notes.py": "X = 1\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep := scanOrFatal(t, Input{Root: root, HasManifest: true, Sources: []string{"k.py"}, Metadata: []string{"meta/a.json", "meta/notes.py"}})
	assertFindings(t, rep, []string{
		"meta/b.json:0:0 undeclared-file not declared in manifest.toml and not imported by a declared source; remove it or declare it",
		"meta/notes.py:0:0 undeclared-file not declared in manifest.toml and not imported by a declared source; remove it or declare it",
	})
}

func assertFindings(t *testing.T, rep *Report, want []string) {
	t.Helper()
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.String())
	}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n--- got\n%s\n--- want\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestNeverExecutes proves the parse step never runs bundle code: every
// module body would create a marker file, including files named like the
// modules the parse script imports, and the scan runs from inside the bundle.
func TestNeverExecutes(t *testing.T) {
	requirePython(t)
	root := t.TempDir()
	marker := filepath.Join(t.TempDir(), "executed")
	body := "import os\nopen(" + pyQuote(marker) + ", 'w').close()\nos.system('touch ' + " + pyQuote(marker) + ")\n"
	for _, name := range []string{
		"kernel.py", "__init__.py", "__main__.py", "json.py", "ast.py", "sys.py",
		"sitecustomize.py", "usercustomize.py", "encodings/__init__.py", "pkg/__init__.py",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(root)
	rep := scanOrFatal(t, Input{Root: root})
	if len(rep.Findings) == 0 {
		t.Fatal("expected findings for open() and os imports")
	}
	if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("bundle code ran during the scan (marker %s: %v)", marker, err)
	}
}

func pyQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// fakePython writes an interpreter wrapper that runs the real parse script
// under python3 after patching ast.parse with hook (Python source).
func fakePython(t *testing.T, hook string) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	// The wrapper runs in the parser's sandbox: it must exec the real
	// interpreter, not a version manager's shim.
	real, err := exec.Command("python3", "-c", "import os, sys; print(os.path.realpath(sys.executable))").Output()
	if err != nil {
		t.Fatal(err)
	}
	py := strings.TrimSpace(string(real))
	dir := t.TempDir()
	prelude := filepath.Join(dir, "prelude.py")
	code := "import ast, os, signal, sys, time\n_real = ast.parse\n" + hook +
		"\nsys.argv = sys.argv[1:]\nexec(compile(open(sys.argv[0]).read(), sys.argv[0], 'exec'), {'__name__': '__main__'})\n"
	if err := os.WriteFile(prelude, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(dir, "python")
	// The scanner asks the interpreter where it lives (python -I -c
	// SCRIPT: passed through), then calls python -I -S -W ignore SCRIPT in
	// the sandbox, which grants the wrapper's directory.
	sh := "#!/bin/sh\nif [ \"$1\" = -I ] && [ \"$2\" = -c ]; then exec " + shQuote(py) + " \"$@\"; fi\nexec " + shQuote(py) + " -I -S " + shQuote(prelude) + " \"$5\"\n"
	if err := os.WriteFile(wrapper, []byte(sh), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func TestParserCrashIsolatesFile(t *testing.T) {
	py := fakePython(t, `def _parse(src, *a, **k):
    if b"CRASH_ME" in src:
        import ctypes; ctypes.string_at(0)  # a real fault: the sandboxed parser is its PID namespace's init, which ignores signals sent from inside
    return _real(src, *a, **k)
ast.parse = _parse`)
	root := t.TempDir()
	for name, body := range map[string]string{
		"a.py": "import torch\n",
		"b.py": "# CRASH_ME\nimport os\n",
		"c.py": "import os\n",
		"d.py": "# CRASH_ME\n",
		"e.py": "eval('1')\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep := scanOrFatal(t, Input{Root: root, Python: py})
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.Path+" "+f.Rule)
	}
	want := "b.py syntax-error|c.py import-not-allowed|d.py syntax-error|e.py forbidden-builtin"
	if strings.Join(got, "|") != want {
		t.Errorf("got %q, want %q", strings.Join(got, "|"), want)
	}
}

func TestFactsOverflowIsolatesFile(t *testing.T) {
	requirePython(t)
	p, err := newParser(context.Background(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	// The limit is the header (its size depends on what the interpreter
	// has installed) plus 12 KiB: room for every file but big.py.
	head, _, _, _, err := p.run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.limit = len(head) + 12<<10
	srcs := []source{
		{path: "a.py", data: []byte("import torch\n")},
		{path: "big.py", data: []byte(strings.Repeat("a;", 2000) + "\n")},
		{path: "c.py", data: []byte("import os\n")},
		{path: "d.py", data: []byte(strings.Repeat("b\n", 150))},
		{path: "e.py", data: []byte(strings.Repeat("c\n", 150))},
	}
	_, results, err := p.parseAll(context.Background(), srcs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, r := range results {
		switch {
		case r.overflow:
			got = append(got, srcs[i].path+":overflow")
		case r.crash != "":
			got = append(got, srcs[i].path+":crash")
		case r.facts == nil:
			got = append(got, srcs[i].path+":missing")
		default:
			got = append(got, srcs[i].path+":ok")
		}
	}
	if want := "a.py:ok big.py:overflow c.py:ok d.py:ok e.py:ok"; strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", strings.Join(got, " "), want)
	}
}

func TestInfrastructureErrors(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "k.py"), []byte("import torch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("missing interpreter", func(t *testing.T) {
		_, err := Scan(context.Background(), Input{Root: root, Python: filepath.Join(t.TempDir(), "no-python")}, DefaultPolicy())
		if err == nil || !strings.Contains(err.Error(), "find python interpreter") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("missing root", func(t *testing.T) {
		_, err := Scan(context.Background(), Input{Root: filepath.Join(root, "nope")}, DefaultPolicy())
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		py := fakePython(t, "time.sleep(30)")
		start := time.Now()
		_, err := Scan(context.Background(), Input{Root: root, Python: py, Timeout: 300 * time.Millisecond}, DefaultPolicy())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("timeout took %v", d)
		}
	})
	t.Run("interpreter writes garbage", func(t *testing.T) {
		py := fakePython(t, "sys.stdout.write('{\"python\":\"3\",\"stdlib\":[],\"extra\":1}\\n'); sys.exit(0)")
		_, err := Scan(context.Background(), Input{Root: root, Python: py}, DefaultPolicy())
		if err == nil || !strings.Contains(err.Error(), "unknown field") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("no python sources needs no interpreter", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("hi\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := Scan(context.Background(), Input{Root: dir, Python: "/nonexistent/python3"}, DefaultPolicy())
		if err != nil || len(rep.Findings) != 0 || rep.Files != 1 {
			t.Fatalf("rep = %+v, err = %v", rep, err)
		}
	})
}

func TestPolicyIsConfigurable(t *testing.T) {
	requirePython(t)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "k.py"), []byte("import numpy\nimport torch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Scan(context.Background(), Input{Root: root}, Policy{AllowedImports: []string{"numpy"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Line != 2 || rep.Findings[0].Rule != RuleImportNotAllowed {
		t.Fatalf("findings = %v", rep.Findings)
	}
}

func BenchmarkScanExample(b *testing.B) {
	requirePython(b)
	in := loadInput(b, filepath.Join("testdata", "bundles", "clean-triton"))
	ctx := context.Background()
	for b.Loop() {
		rep, err := Scan(ctx, in, DefaultPolicy())
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Findings) != 0 {
			b.Fatalf("findings: %v", rep.Findings)
		}
	}
}

// TestMain lets the sandbox re-execute this test binary as the parser's
// confined child.
func TestMain(m *testing.M) {
	sandbox.MaybeRunChild()
	os.Exit(m.Run())
}
