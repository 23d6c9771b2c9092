// Package arenas embeds the shipped arena files (arenas/*.toml) so that the
// static cacheon binary can run `cacheon engine bench --arena cpu-tiny` from
// any directory. internal/arena parses them; this package carries the bytes
// and resolves an --arena argument (a file or a shipped name, Resolve).
package arenas

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.toml
var files embed.FS

// Lookup returns the shipped arena file name+".toml".
func Lookup(name string) ([]byte, bool) {
	if name == "" || strings.ContainsAny(name, "/\\") {
		return nil, false
	}
	b, err := fs.ReadFile(files, name+".toml")
	return b, err == nil
}

// Names lists the shipped arenas, sorted.
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".toml"))
	}
	sort.Strings(out)
	return out
}
