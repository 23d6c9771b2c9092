// Package python embeds the hostile-side Python package cacheon_runtime so
// that the static cacheon binary can materialize it next to any interpreter.
//
// Nothing in this package runs Python; it only carries the sources. The Go
// side never imports candidate code and never believes what these scripts say.
package python

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
)

//go:embed cacheon_runtime/*.py cacheon_runtime/engine/*.py
var files embed.FS

// Files returns the embedded cacheon_runtime package sources, rooted so that
// "cacheon_runtime/__init__.py" is a valid path.
func Files() fs.FS { return files }

// Digest identifies the embedded runtime: the SHA-256 over every file's
// path and bytes, in path order. A calibration names the runtime it
// measured by it.
func Digest() string {
	h := sha256.New()
	_ = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%d:%s\n%d:", len(p), p, len(b))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}
