package verify

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The bounds of namesTriton's look at a bundle: how many Python files, and
// how many bytes of each.
const (
	tritonHintFiles = 256
	tritonHintBytes = 1 << 20
)

// namesTriton reports whether a Python file of the bundle directory names
// Triton ("triton" in its first tritonHintBytes), for the first
// tritonHintFiles such files found. It is a hint, not a check: it decides
// only whether the workers compute Triton's cache key while they import
// torch (Options.Triton), which saves a Triton kernel's first call about
// 0.3 s on the H200 and costs a bundle without Triton about as much
// (docs/performance.md, session 19). Symlinks are not followed, and any
// error reads as no.
func namesTriton(dir string) bool {
	found, seen := false, 0
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || found || seen >= tritonHintFiles {
			return filepath.SkipAll
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(d.Name(), ".py") {
			return nil
		}
		seen++
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer f.Close()
		head, _ := io.ReadAll(io.LimitReader(f, tritonHintBytes))
		found = bytes.Contains(head, []byte("triton"))
		return nil
	})
	return found
}
