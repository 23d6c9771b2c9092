package verify

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNamesTriton: a bundle names Triton when one of its Python files
// does, in a sub-package too; other files and other bundles do not.
func TestNamesTriton(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  bool
	}{
		{"torch only", map[string]string{"k.py": "import torch\n", "README.md": "not triton"}, false},
		{"top level", map[string]string{"k.py": "import triton\nimport triton.language as tl\n"}, true},
		{"sub-package", map[string]string{"k.py": "from .impl import f\n", "impl/__init__.py": "from triton import jit\n"}, true},
		{"not python", map[string]string{"k.py": "x = 1\n", "notes.txt": "triton"}, false},
		{"empty", map[string]string{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for rel, body := range tc.files {
				p := filepath.Join(dir, rel)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := namesTriton(dir); got != tc.want {
				t.Errorf("namesTriton = %v, want %v", got, tc.want)
			}
		})
	}
	if namesTriton(filepath.Join(t.TempDir(), "missing")) {
		t.Error("a missing directory names Triton")
	}
	if !namesTriton(filepath.Join("..", "..", "examples", "triton_silu")) || namesTriton(filepath.Join("..", "..", "examples", "silu_torch")) {
		t.Error("examples: triton_silu should name Triton, silu_torch not")
	}
}
