package bundle

import (
	"os"
	"strings"
)

// stripDir is the name the top folder is renamed to while its contents
// move up: a component no member may have (checkMemberName refuses it), so
// it collides with nothing the folder holds.
const stripDir = "__pycache__"

// singleTop returns the top folder that every extracted member lies under
// when there is exactly one and it holds manifest.toml as a regular file
// (the established tool's layout), else "".
func (x *extractor) singleTop() string {
	top := ""
	for p := range x.seen {
		first, _, _ := strings.Cut(p, "/")
		switch {
		case top == "":
			top = first
		case first != top:
			return ""
		}
	}
	if x.seen[top] == regularFile || x.seen[top+"/"+ManifestName] != regularFile {
		return ""
	}
	return top
}

// stripTop moves the contents of the top folder of root up into root and
// removes the folder, all through root.
func stripTop(root *os.Root, top string) error {
	if err := root.Rename(top, stripDir); err != nil {
		return err
	}
	d, err := root.Open(stripDir)
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := root.Rename(stripDir+"/"+n, n); err != nil {
			return err
		}
	}
	return root.Remove(stripDir)
}
