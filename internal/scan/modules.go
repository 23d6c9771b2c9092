package scan

import (
	"sort"
	"strings"
	"unicode"
)

// modIndex knows the bundle's own Python modules. The bundle root is the
// import root: kernels/silu.py is module kernels.silu inside package kernels,
// and relative imports resolve against the root as the top package "".
type modIndex struct {
	// modules maps a dotted module name to the file that runs when it is
	// imported: the package's __init__.py, else the module's .py file, else
	// "" (a namespace package). The root package is "".
	modules map[string]string
	// local holds the top-level names that are bundle-local.
	local map[string]bool
	// shadows maps a reserved top-level name the bundle defines anyway to
	// the path to report (the root file or directory).
	shadows map[string]string
}

// newModIndex indexes the .py files of a bundle. reserved holds the names a
// bundle module may not take (see reservedModules).
func newModIndex(pyfiles []string, reserved map[string]bool) *modIndex {
	ix := &modIndex{
		modules: make(map[string]string),
		local:   make(map[string]bool),
		shadows: make(map[string]string),
	}
	inits := make(map[string]string)
	for _, rel := range pyfiles {
		name, pkg, ok := moduleOf(rel)
		if !ok {
			continue
		}
		for i := 1; i <= len(pkg); i++ {
			if _, seen := ix.modules[strings.Join(pkg[:i], ".")]; !seen {
				ix.modules[strings.Join(pkg[:i], ".")] = ""
			}
		}
		if strings.HasSuffix(rel, "/__init__.py") || rel == "__init__.py" {
			inits[name] = rel
		} else if ix.modules[name] == "" {
			ix.modules[name] = rel
		}
		if name == "" {
			continue
		}
		top := topLevel(name)
		if reservedName(reserved, top) {
			if _, seen := ix.shadows[top]; !seen {
				ix.shadows[top] = strings.SplitN(rel, "/", 2)[0]
			}
			continue
		}
		ix.local[top] = true
	}
	for name, rel := range inits {
		ix.modules[name] = rel // a package wins over a module of the same name
	}
	return ix
}

// moduleOf returns the dotted module name of a .py file and the package it
// belongs to (its own name for an __init__.py). ok is false when a path
// component is not a Python identifier, so the file cannot be imported.
func moduleOf(rel string) (name string, pkg []string, ok bool) {
	parts := strings.Split(strings.TrimSuffix(rel, ".py"), "/")
	if parts[len(parts)-1] == "__init__" {
		parts = parts[:len(parts)-1]
		pkg = parts
	} else {
		pkg = parts[:len(parts)-1]
	}
	for _, p := range parts {
		if !isIdentifier(p) {
			return "", nil, false
		}
	}
	return strings.Join(parts, "."), pkg, true
}

// isIdentifier approximates Python's identifier rule (XID_Start XID_Continue*).
func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || unicode.IsLetter(r) || (i > 0 && (unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r))) {
			continue
		}
		return false
	}
	return true
}

// packageOf returns the package a file's relative imports start from; ok is
// false when the file is not importable.
func packageOf(rel string) ([]string, bool) {
	_, pkg, ok := moduleOf(rel)
	return pkg, ok
}

// resolve turns an import into an absolute dotted name. For a relative
// import it also reports whether the dots climb above the bundle root
// (climbs), and the result is always bundle-local.
func resolve(pkg []string, im importFact) (abs string, climbs bool) {
	if im.Level == 0 {
		return im.Module, false
	}
	up := im.Level - 1
	if up > len(pkg) {
		return "", true
	}
	parts := append([]string{}, pkg[:len(pkg)-up]...)
	if im.Module != "" {
		parts = append(parts, strings.Split(im.Module, ".")...)
	}
	return strings.Join(parts, "."), false
}

// isLocal reports whether an absolute module name belongs to the bundle.
// The root package "" (reached only by relative imports) is local.
func (ix *modIndex) isLocal(abs string) bool {
	return abs == "" || ix.local[topLevel(abs)]
}

// filesFor returns the bundle files that run when mod is imported: the
// __init__.py of every enclosing package and the module itself.
func (ix *modIndex) filesFor(mod string) []string {
	var out []string
	if mod == "" {
		if f := ix.modules[""]; f != "" {
			out = append(out, f)
		}
		return out
	}
	parts := strings.Split(mod, ".")
	for i := 1; i <= len(parts); i++ {
		if f := ix.modules[strings.Join(parts[:i], ".")]; f != "" {
			out = append(out, f)
		}
	}
	return out
}

// closure returns the files reached from start by bundle-local imports,
// start and the packages enclosing each file included. facts returns a
// parsed file's facts, or nil.
func (ix *modIndex) closure(start []string, facts func(string) *fileFacts) map[string]bool {
	reached := make(map[string]bool)
	var queue []string
	push := func(files ...string) {
		for _, f := range files {
			if !reached[f] {
				reached[f] = true
				queue = append(queue, f)
			}
		}
	}
	for _, rel := range start {
		push(rel)
		if pkg, ok := packageOf(rel); ok {
			push(ix.filesFor(strings.Join(pkg, "."))...)
		}
	}
	for len(queue) > 0 {
		rel := queue[0]
		queue = queue[1:]
		ff := facts(rel)
		pkg, ok := packageOf(rel)
		if ff == nil || !ok {
			continue
		}
		for _, im := range ff.Imports {
			abs, climbs := resolve(pkg, im)
			if climbs || (im.Level == 0 && !ix.isLocal(abs)) {
				continue
			}
			push(ix.filesFor(abs)...)
			for _, n := range im.Names {
				sub := joinName(abs, n.Name)
				if _, ok := ix.modules[sub]; ok && n.Name != "*" {
					push(ix.filesFor(sub)...)
				}
			}
		}
	}
	return reached
}

// shadowNames returns the reserved names the bundle defines, sorted.
func (ix *modIndex) shadowNames() []string {
	out := make([]string, 0, len(ix.shadows))
	for name := range ix.shadows {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// joinName joins dotted names, either of which may be empty.
func joinName(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "." + b
}
