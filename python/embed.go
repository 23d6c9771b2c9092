// Package python embeds the hostile-side Python package cacheon_runtime so
// that the static cacheon binary can materialize it next to any interpreter.
//
// Nothing in this package runs Python; it only carries the sources. The Go
// side never imports candidate code and never believes what these scripts say.
package python

import (
	"embed"
	"io/fs"
)

//go:embed cacheon_runtime/*.py cacheon_runtime/engine/*.py
var files embed.FS

// Files returns the embedded cacheon_runtime package sources, rooted so that
// "cacheon_runtime/__init__.py" is a valid path.
func Files() fs.FS { return files }
