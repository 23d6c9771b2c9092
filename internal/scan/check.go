package scan

import (
	"fmt"
	"strings"
)

// maxAliasHops bounds how far a name re-exported by bundle modules is
// followed ("from .utils import T" where utils did "import torch as T").
const maxAliasHops = 8

// binding is what a name bound by an import refers to after following
// bundle-local re-exports: a dotted absolute name, and whether it is the
// bundle's own.
type binding struct {
	name  string
	local bool
}

// checker applies the source rules to parsed files.
type checker struct {
	ix      *modIndex
	allowed map[string]bool
	allow   string // the allow-list, for messages
	refs    []refRule
	// raw maps a file to its import bindings: local name → absolute name
	// (relative imports resolved, re-exports not yet followed).
	raw map[string]map[string]string
}

func newChecker(ix *modIndex, pol Policy, facts map[string]*fileFacts) *checker {
	c := &checker{
		ix:      ix,
		allowed: make(map[string]bool),
		refs:    referenceRules(),
		raw:     make(map[string]map[string]string),
	}
	for _, m := range pol.AllowedImports {
		c.allowed[topLevel(m)] = true
	}
	c.allow = strings.Join(pol.AllowedImports, ", ")
	for rel, ff := range facts {
		c.raw[rel] = rawBindings(rel, ff)
	}
	return c
}

// rawBindings lists the names a file's imports bind, anywhere in the file.
func rawBindings(rel string, ff *fileFacts) map[string]string {
	out := make(map[string]string)
	pkg, _ := packageOf(rel)
	for _, im := range ff.Imports {
		abs, climbs := resolve(pkg, im)
		if climbs {
			continue
		}
		if !im.From {
			if im.AsName != "" {
				out[im.AsName] = im.Module
			} else {
				out[topLevel(im.Module)] = topLevel(im.Module)
			}
			continue
		}
		for _, n := range im.Names {
			if n.Name == "*" {
				continue
			}
			local := n.Name
			if n.AsName != "" {
				local = n.AsName
			}
			out[local] = joinName(abs, n.Name)
		}
	}
	return out
}

// canonical follows bundle-local re-exports of an absolute name: if the
// longest bundle module prefix of name binds the next component by an
// import, the name continues from what that import names.
func (c *checker) canonical(name string, hops int) binding {
	if !c.ix.isLocal(name) {
		return binding{name: name}
	}
	if hops >= maxAliasHops || name == "" {
		return binding{name: name, local: true}
	}
	parts := strings.Split(name, ".")
	for i := len(parts) - 1; i >= 0; i-- {
		file, ok := c.ix.modules[strings.Join(parts[:i], ".")]
		if !ok {
			continue
		}
		if target, bound := c.raw[file][parts[i]]; bound && file != "" {
			return c.canonical(joinName(target, strings.Join(parts[i+1:], ".")), hops+1)
		}
		break
	}
	return binding{name: name, local: true}
}

// fileCheck collects the findings of one file.
type fileCheck struct {
	*checker
	rel      string
	binds    map[string]binding
	findings []Finding
}

func (fc *fileCheck) add(line, col int, rule, format string, args ...any) {
	fc.findings = append(fc.findings, Finding{
		Path: displayPath(fc.rel), Line: line, Col: col, Rule: rule,
		Message: fmt.Sprintf(format, args...),
	})
}

// check applies every source rule to one parsed file.
func (c *checker) check(rel string, ff *fileFacts) []Finding {
	fc := &fileCheck{checker: c, rel: rel, binds: make(map[string]binding)}
	for local, abs := range c.raw[rel] {
		fc.binds[local] = c.canonical(abs, 0)
	}
	fc.imports(ff.Imports)
	fc.calls(ff.Calls)
	fc.attributes(ff.Attributes)
	fc.stores(ff.Stores)
	fc.names(ff.Names)
	return fc.findings
}

func (fc *fileCheck) imports(imports []importFact) {
	pkg, _ := packageOf(fc.rel)
	for _, im := range imports {
		abs, climbs := resolve(pkg, im)
		if climbs {
			fc.add(im.Line, im.Col, RuleImportNotAllowed,
				"relative import with %d dots climbs above the bundle root; import bundle modules from inside the bundle", im.Level)
			continue
		}
		if im.Level == 0 && !fc.allowed[topLevel(abs)] && !fc.ix.isLocal(abs) {
			fc.add(im.Line, im.Col, RuleImportNotAllowed,
				"import of %q is not allowed: the arena allows %s and the bundle's own modules", abs, fc.allow)
		}
		if !im.From {
			fc.reference(fc.canonical(im.Module, 0), im.Line, im.Col, "import of", true, true)
			continue
		}
		for _, n := range im.Names {
			fc.importedDunder(n.Name, im.Line, im.Col)
			if n.Name == "*" {
				fc.add(im.Line, im.Col, RuleStarImport,
					"from %q import * hides which names are bound; import the names you use explicitly", displayModule(abs))
				continue
			}
			fc.reference(fc.canonical(joinName(abs, n.Name), 0), im.Line, im.Col, "import of", true, true)
		}
	}
}

func (fc *fileCheck) calls(calls []callFact) {
	for _, c := range calls {
		switch {
		case forbiddenCall(c.Func) && fc.builtin(c.Func):
			fc.add(c.Line, c.Col, RuleForbiddenBuiltin,
				"call to %s() is forbidden: bundles may not evaluate code, reach the file system or the interpreter's namespaces", c.Func)
		case isDunder(c.Func) && !harmlessDunder(c.Func):
			fc.add(c.Line, c.Col, RuleDunderAccess, "call to %s() reaches interpreter internals; remove it", c.Func)
		}
		if attrBuiltin(c.Func) && fc.builtin(c.Func) {
			fc.attrBuiltinCall(c)
		}
		if b, ok := fc.binds[c.Func]; ok {
			fc.reference(b, c.Line, c.Col, "call to", false, c.ModuleLevel)
		}
	}
}

// attrBuiltinCall applies dynamic-attribute and global-mutation to
// getattr/setattr/delattr/hasattr calls.
func (fc *fileCheck) attrBuiltinCall(c callFact) {
	switch {
	case !c.NameLiteral:
		fc.add(c.Line, c.Col, RuleDynamicAttribute,
			"%s() with a computed attribute name hides what is accessed; write obj.attr, or keep a dict of your own objects", c.Func)
	case isDunder(c.NameArg) && c.Func != "hasattr":
		fc.add(c.Line, c.Col, RuleDynamicAttribute,
			"%s() with dunder name %q reaches interpreter internals; remove it", c.Func, c.NameArg)
	}
	if c.Func != "setattr" && c.Func != "delattr" || c.Target == "" {
		return
	}
	if b, ok := fc.binds[topLevel(c.Target)]; ok {
		fc.add(c.Line, c.Col, RuleGlobalMutation,
			"%s() on %q changes imported %q, which the engine shares; keep state in your own objects", c.Func, c.Target, displayModule(b.name))
	}
}

func (fc *fileCheck) attributes(attrs []attrFact) {
	for _, a := range attrs {
		chain := strings.Join(a.Attrs, ".")
		for _, name := range a.Attrs {
			if isDunder(name) && !harmlessDunder(name) {
				fc.add(a.Line, a.Col, RuleDunderAccess,
					"access to %s (in %q) reaches interpreter internals; use the public API instead", name, showChain(a.Base, chain))
				break
			}
		}
		switch {
		case a.Base == "":
			continue
		case forbiddenReference(a.Base) && fc.builtin(a.Base):
			fc.add(a.Line, a.Col, RuleForbiddenBuiltin,
				"use of %s is forbidden: bundles may not evaluate code or reach the interpreter's namespaces", a.Base)
		case isDunder(a.Base) && !harmlessDunder(a.Base):
			fc.add(a.Line, a.Col, RuleDunderAccess, "use of %s reaches interpreter internals; remove it", a.Base)
		}
		b, ok := fc.binds[a.Base]
		if ok {
			b = fc.canonical(joinName(b.name, chain), 0)
		} else {
			b = binding{name: a.Base + "." + chain}
		}
		fc.reference(b, a.Line, a.Col, "use of", false, a.ModuleLevel)
	}
}

func (fc *fileCheck) stores(stores []storeFact) {
	for _, s := range stores {
		b, ok := fc.binds[s.Root]
		if !ok {
			continue
		}
		verb := "assignment to"
		if s.Ctx == "del" {
			verb = "deletion of"
		}
		fc.add(s.Line, s.Col, RuleGlobalMutation,
			"%s %q changes imported %q, which the engine shares; keep state in your own objects", verb, s.Target, displayModule(b.name))
	}
}

func (fc *fileCheck) names(names []nameFact) {
	for _, n := range names {
		switch {
		case forbiddenReference(n.Name) && fc.builtin(n.Name) && (n.Ctx == "load" || isDunder(n.Name)):
			fc.add(n.Line, n.Col, RuleForbiddenBuiltin,
				"reference to %s is forbidden, even without calling it; remove it", n.Name)
		case attrBuiltin(n.Name) && fc.builtin(n.Name) && n.Name != "hasattr" && n.Ctx == "load":
			fc.add(n.Line, n.Col, RuleDynamicAttribute,
				"passing %s around hides what is accessed; write obj.attr at the call site", n.Name)
		case isDunder(n.Name) && !harmlessDunder(n.Name):
			fc.add(n.Line, n.Col, RuleDunderAccess, "use of %s reaches interpreter internals; remove it", n.Name)
		}
	}
}

// builtin reports whether a bare name means the builtin of that name: it is
// not rebound by an import ("from torch import compile" is not compile()),
// unless it is a dunder, which no legitimate import provides.
func (fc *fileCheck) builtin(name string) bool {
	_, bound := fc.binds[name]
	return !bound || isDunder(name)
}

// importedDunder reports "from m import __builtins__" and the like: a module's
// dunder globals are the same escape hatches as the attribute forms.
func (fc *fileCheck) importedDunder(name string, line, col int) {
	switch {
	case isDunder(name) && forbiddenReference(name):
		fc.add(line, col, RuleForbiddenBuiltin, "import of %s is forbidden: bundles may not evaluate code or reach the interpreter's namespaces", name)
	case isDunder(name) && !harmlessDunder(name):
		fc.add(line, col, RuleDunderAccess, "import of %s reaches interpreter internals; remove it", name)
	}
}

// reference applies the dotted-name rules to one resolved name. Bundle
// names are exempt; module-level-only entries apply to uses in
// module-level code, not to imports.
func (fc *fileCheck) reference(b binding, line, col int, what string, isImport, moduleLevel bool) {
	if b.local {
		return
	}
	done := make(map[string]bool)
	for _, r := range fc.refs {
		if done[r.rule] || !hasDottedPrefix(b.name, r.prefix) {
			continue
		}
		if r.moduleLevelOnly && (isImport || !moduleLevel) {
			continue
		}
		done[r.rule] = true
		fc.add(line, col, r.rule, "%s %q: %s", what, b.name, r.why)
	}
}

// showChain renders an attribute chain with its root for messages.
func showChain(base, chain string) string {
	if base == "" {
		return "(...)." + chain
	}
	return base + "." + chain
}

// displayModule names the root package "" readably.
func displayModule(name string) string {
	if name == "" {
		return "."
	}
	return name
}
