package scan

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// scanFiles scans a bundle made of files (no manifest) and returns its
// findings as "path:line rule" strings.
func scanFiles(t *testing.T, files map[string]string) []string {
	t.Helper()
	requirePython(t)
	return scanFilesWith(t, files, "")
}

// scanFilesWith is scanFiles with the parser run by python ("": python3
// from PATH).
func scanFilesWith(t *testing.T, files map[string]string, python string) []string {
	t.Helper()
	root := t.TempDir()
	for rel, body := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep := scanOrFatal(t, Input{Root: root, Python: python})
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.Path+":"+strconv.Itoa(f.Line)+" "+f.Rule)
	}
	return got
}

func TestAliasResolution(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{
			name: "alias chain across files in reverse order",
			files: map[string]string{
				"a.py": "from b import x\ny = x\n",
				"b.py": "from c import z\nx = z\n",
				"c.py": "import torch\nz = torch\n",
				"k.py": "from a import y\ny.nn.functional.silu = None\ny.load('w')\n",
			},
			want: "k.py:2 global-mutation|k.py:3 unsafe-loader",
		},
		{
			name: "cross-file cycle still reaches the import",
			files: map[string]string{
				"a.py": "from b import p\nq = p\n",
				"b.py": "from a import q\nimport torch\np = q or torch\n",
				"k.py": "from a import q\nq.hub.load('x', 'y')\n",
			},
			want: "k.py:2 unsafe-loader",
		},
		{
			name: "re-export chain longer than any hop limit",
			files: func() map[string]string {
				m := map[string]string{"m0.py": "import torch as t\n"}
				for i := 1; i <= 12; i++ {
					m["m"+strconv.Itoa(i)+".py"] = "from m" + strconv.Itoa(i-1) + " import t\n"
				}
				m["k.py"] = "from m12 import t\nt.load('w')\n"
				return m
			}(),
			want: "k.py:2 unsafe-loader",
		},
		{
			name: "a later import does not hide an earlier one",
			files: map[string]string{
				"k.py": "import torch as t\nfrom math import pi as t\nt.load('w')\n",
			},
			want: "k.py:3 unsafe-loader",
		},
		{
			name: "self-extending alias is bounded",
			files: map[string]string{
				"k.py": "import torch as x\nx = x.a\n",
			},
			want: "k.py:0 scan-limit",
		},
		{
			name: "legal aliases stay clean",
			files: map[string]string{
				"k.py": "import torch\nimport torch.nn.functional as F\nact = F.silu\nnnf = torch.nn.functional\n" +
					"y = nnf.silu(torch.ones(1)) if act else None\nt = torch\nz = t.zeros(2)\n",
			},
			want: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(scanFiles(t, tt.files), "|"); got != tt.want {
				t.Errorf("findings %q, want %q", got, tt.want)
			}
		})
	}
}

// TestMatchCapture covers match statements, which Python 3.9 cannot parse.
func TestMatchCapture(t *testing.T) {
	requirePython(t)
	if err := exec.Command("python3", "-I", "-S", "-c", "import sys; sys.exit(sys.version_info < (3, 10))").Run(); err != nil {
		t.Skip("python3 is older than 3.10")
	}
	got := scanFiles(t, map[string]string{
		"k.py": "import torch\nmatch torch:\n    case m:\n        m.nn.functional.silu = None\n",
	})
	if want := "k.py:2 module-alias|k.py:4 global-mutation"; strings.Join(got, "|") != want {
		t.Errorf("findings %q, want %q", strings.Join(got, "|"), want)
	}
}

func TestKnownModulesAreNotEscapes(t *testing.T) {
	escapes := escapeModules()
	for _, m := range knownModules() {
		parts := strings.Split(m, ".")
		for i := 1; i < len(parts); i++ {
			if escapes[parts[i]] && !submoduleNotEscape(strings.Join(parts[:i+1], ".")) {
				t.Errorf("known module %q passes through escape module %q", m, parts[i])
			}
		}
	}
	for _, m := range DefaultPolicy().AllowedImports {
		if escapes[m] {
			t.Errorf("allowed module %q is on the escape list", m)
		}
	}
}

func TestResolveDepthIsReported(t *testing.T) {
	chain := strings.Repeat("a.", maxResolveDepth+8)
	got := scanFiles(t, map[string]string{
		"helpers.py": "import helpers as a\nimport torch as T\n",
		"k.py":       "import helpers\nhelpers." + chain + "T.load('w')\n",
	})
	if want := "k.py:2 scan-limit"; strings.Join(got, "|") != want {
		t.Errorf("findings %q, want %q", strings.Join(got, "|"), want)
	}
	got = scanFiles(t, map[string]string{
		"helpers.py": "import helpers as a\nimport torch as T\n",
		"k.py":       "import helpers\nhelpers.a.a.a.T.load('w')\n",
	})
	if want := "k.py:2 unsafe-loader"; strings.Join(got, "|") != want {
		t.Errorf("findings %q, want %q", strings.Join(got, "|"), want)
	}
}
