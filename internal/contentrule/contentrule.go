// Package contentrule is the established rule for which files of a
// directory tree count as its content (DESIGN.md §4): the files a bundle's
// content hash covers, a package or an extraction carries, and a reviewed
// source tree lists. It is its one definition; bundle and product both use
// it, and it depends on nothing.
package contentrule

import "strings"

// ExcludedDir reports whether a directory called name is left out with
// everything below it: ".git" and "__pycache__".
func ExcludedDir(name string) bool {
	return name == ".git" || name == "__pycache__"
}

// Excluded reports whether the slash-separated relative path rel is left
// out of the content hash (and so out of packages and extractions): any
// component that is an ExcludedDir, a final name starting with "._" (macOS
// resource forks), or a final name whose suffix is ".pyc" or ".pyo". The
// suffix follows Python's pathlib rule, so the bare names ".pyc" and ".pyo"
// have no suffix and are kept.
func Excluded(rel string) bool {
	parts := strings.Split(rel, "/")
	for _, p := range parts {
		if ExcludedDir(p) {
			return true
		}
	}
	name := parts[len(parts)-1]
	if strings.HasPrefix(name, "._") {
		return true
	}
	if i := strings.LastIndexByte(name, '.'); i > 0 && i < len(name)-1 {
		switch name[i:] {
		case ".pyc", ".pyo":
			return true
		}
	}
	return false
}
