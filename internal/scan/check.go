package scan

import (
	"fmt"
	"sort"
	"strings"
)

// fileCheck collects the findings of one file.
type fileCheck struct {
	*checker
	rel   string
	ff    *fileFacts
	binds map[string][]binding
	// shadows lists, per name, where an import directly in the module
	// body binds it; rebound holds the names also assigned or deleted.
	shadows  map[string][]pos
	rebound  map[string]bool
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
	fc := &fileCheck{
		checker: c, rel: rel, binds: c.binds[rel], ff: ff,
		shadows: make(map[string][]pos), rebound: make(map[string]bool),
	}
	if fc.binds == nil {
		fc.binds = make(map[string][]binding)
	}
	fc.shadowing(ff)
	fc.limits()
	fc.imports(ff.Imports)
	fc.calls(ff.Calls)
	fc.attributes(ff.Attributes)
	fc.stores(ff.Stores)
	fc.names(ff.Names)
	fc.unbound(ff.Free)
	fc.finalizers(ff)
	fc.clocks(ff)
	fc.flows(ff.Flows)
	fc.classRefs(ff)
	fc.classBases(ff)
	fc.abcRules(ff)
	fc.argMutatorUses(ff)
	fc.unboundContainerMutators(ff)
	return fc.findings
}

// shadowing records which names an import can be trusted to bind in place
// of a builtin: one directly in the module body, for uses after it, when
// nothing in the file assigns or deletes the name.
func (fc *fileCheck) shadowing(ff *fileFacts) {
	pkg, _ := packageOf(fc.rel)
	for _, im := range ff.Imports {
		if _, climbs := resolve(pkg, im); climbs || !im.Top {
			continue
		}
		at := pos{im.Line, im.Col}
		if !im.From {
			local := topLevel(im.Module)
			if im.AsName != "" {
				local = im.AsName
			}
			fc.shadows[local] = append(fc.shadows[local], at)
			continue
		}
		for _, n := range im.Names {
			local := n.Name
			if n.AsName != "" {
				local = n.AsName
			}
			fc.shadows[local] = append(fc.shadows[local], at)
		}
	}
	for _, n := range ff.Names {
		if n.Ctx != "load" {
			fc.rebound[n.Name] = true
		}
	}
}

// limits reports names the resolver gave up on.
func (fc *fileCheck) limits() {
	if fc.unsettled[fc.rel] {
		fc.add(0, 0, RuleScanLimit, "the bundle's aliases and re-exports are too tangled for the scanner to follow; simplify how names are bound")
	}
	var names []string
	for n := range fc.overflow[fc.rel] {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fc.add(0, 0, RuleScanLimit, "name %q may stand for more than %d imported objects; the scanner cannot follow it, so bind it once", n, maxBindings)
	}
}

func (fc *fileCheck) imports(imports []importFact) {
	pkg, _ := packageOf(fc.rel)
	typeChecking := fc.typeCheckingImports() // typefacts.go
	for _, im := range imports {
		abs, climbs := resolve(pkg, im)
		if climbs {
			fc.add(im.Line, im.Col, RuleImportNotAllowed,
				"relative import with %d dots climbs above the bundle root; import bundle modules from inside the bundle", im.Level)
			continue
		}
		if im.Level == 0 && !fc.allowed[topLevel(abs)] && !fc.ix.isLocal(abs) && !typeChecking[pos{im.Line, im.Col}] {
			if msg := unsupportedImport(abs, topLevel(abs)); msg != "" { // unsupported.go
				fc.add(im.Line, im.Col, RuleImportNotAllowed, "%s", msg)
			} else {
				fc.add(im.Line, im.Col, RuleImportNotAllowed,
					"import of %q is not allowed: the arena allows %s and the bundle's own modules", abs, fc.allow)
			}
		}
		if !im.From {
			fc.referenceAll(fc.resolve(im.Module, 0), im.Line, im.Col, "import of", true, true)
			continue
		}
		for _, n := range im.Names {
			fc.importedDunder(n.Name, im.Line, im.Col)
			if n.Name == "*" {
				fc.add(im.Line, im.Col, RuleStarImport,
					"from %q import * hides which names are bound; import the names you use explicitly", displayModule(abs))
				continue
			}
			mark := len(fc.findings)
			fc.referenceAll(fc.resolve(joinName(abs, n.Name), 0), im.Line, im.Col, "import of", true, true)
			if !fc.ix.isLocal(abs) {
				fc.attributeRule(n.Name, mark, im.Line, im.Col, "import of %q", joinName(abs, n.Name))
			}
		}
	}
}

func (fc *fileCheck) calls(calls []callFact) {
	for _, c := range calls {
		builtin := !c.Local && fc.builtinAt(c.Func, pos{c.Line, c.Col})
		if c.OfResult {
			fc.classBuildingCall(c, builtin)
			continue
		}
		fc.classBuildingCall(c, builtin)
		switch {
		case forbiddenCall(c.Func) && builtin:
			fc.add(c.Line, c.Col, RuleForbiddenBuiltin,
				"call to %s() is forbidden: bundles may not evaluate code, reach the file system or the interpreter's namespaces", c.Func)
		case isDunder(c.Func) && !harmlessDunder(c.Func):
			fc.add(c.Line, c.Col, RuleDunderAccess, "call to %s() reaches interpreter internals; remove it", c.Func)
		}
		if attrBuiltin(c.Func) && builtin {
			fc.attrBuiltinCall(c)
		}
		if (c.NArgs != 1 || c.NKeywords != 0 || c.Starred || !c.Decorator) && fc.resolvesTo(c.Func, "functools.wraps") {
			fc.wrapsArgs(c.Line, c.Col)
		}
		switch {
		case c.Func != "type" || !builtin:
		case c.OfResult: // type(x)(...): classBuildingCall, and the inner call below
		case c.NArgs != 1 || c.NKeywords != 0 || c.Starred:
			fc.add(c.Line, c.Col, RuleDunderAccess,
				"type() with other than one argument builds a class from a namespace dict, whose keys may be any interpreter hook; write a class statement")
		case !fc.typeCallIdentity(pos{c.Line, c.Col}):
			fc.add(c.Line, c.Col, RuleDunderAccess,
				"type(x)'s result used other than with is/is not, as isinstance's class or for its __name__: type(C) of a class C is type itself, which builds classes from a namespace wherever it flows (a tuple, a return, an attribute, =='s other operand); %s", namespaceWhy)
		}
		fc.referenceAll(fc.binds[c.Func], c.Line, c.Col, "call to", false, c.ModuleLevel)
	}
}

// chain applies the dotted-name rules to a name chain read at one place:
// through what its root is bound to, or as written when it is unbound.
func (fc *fileCheck) chain(chain string, line, col int, moduleLevel bool) {
	root, rest := splitRoot(chain)
	bs := fc.binds[root]
	if len(bs) == 0 {
		fc.reference(binding{name: chain, written: true}, line, col, "use of", false, moduleLevel)
		return
	}
	for _, b := range bs {
		fc.referenceAll(fc.extend(b, rest), line, col, "use of", false, moduleLevel)
	}
}

func (fc *fileCheck) names(names []nameFact) {
	for _, n := range names {
		if n.Ctx == "def" {
			if copyProtocol(n.Name) {
				fc.add(n.Line, n.Col, RuleDunderAccess,
					"defining %s hands copy and pickle a constructor and a state they apply from library frames (attribute stores on any object, calls the scanner does not see); bundles may not define the copy/pickle protocol", n.Name)
			}
			continue // defining a name (def __repr__) is not using it
		}
		builtin := !n.Local && fc.builtinAt(n.Name, pos{n.Line, n.Col})
		switch {
		case forbiddenReference(n.Name) && builtin && (n.Ctx == "load" || isDunder(n.Name)):
			fc.add(n.Line, n.Col, RuleForbiddenBuiltin,
				"reference to %s is forbidden, even without calling it; remove it", n.Name)
		case attrBuiltin(n.Name) && builtin && n.Name != "hasattr" && n.Ctx == "load":
			fc.add(n.Line, n.Col, RuleDynamicAttribute,
				"passing %s around hides what is accessed; write obj.attr at the call site", n.Name)
		case isDunder(n.Name) && !harmlessDunder(n.Name) && !operatorDunder(n.Name):
			fc.add(n.Line, n.Col, RuleDunderAccess, "use of %s reaches interpreter internals; remove it", n.Name)
		case n.Name == "type" && builtin && n.Ctx == "load" && !fc.typeIdentity(pos{n.Line, n.Col}):
			fc.add(n.Line, n.Col, RuleDunderAccess,
				"type used as a value (an alias, an argument, a base class) builds classes wherever it is called with a namespace: %s; call type(x) directly with one argument", namespaceWhy)
		case n.Ctx == "load" && fc.resolvesTo(n.Name, "functools.wraps"):
			// not called here (a called name is a call fact): handed to
			// partial, a list, another function
			fc.wrapsArgs(n.Line, n.Col)
		}
	}
}

// unbound refuses the names the file reads and binds nowhere, but a
// package's submodules its __init__.py has without binding them
// (implicitSubmodules): any other such name the interpreter finds only
// where the scanner does not look, or not at all (a NameError).
func (fc *fileCheck) unbound(free []freeFact) {
	for _, n := range free {
		if len(fc.checker.imports[fc.rel][n.Name]) > 0 {
			continue
		}
		fc.add(n.Line, n.Col, RuleUnboundName,
			"name %q is read here but bound nowhere in this file (no import, assignment, def, parameter or builtin of that name): import or assign what you use", n.Name)
	}
}

// flows applies module-alias: a module object put where no name follows it
// could be mutated or used there without the scanner seeing which module
// it is.
func (fc *fileCheck) flows(flows []flowFact) {
	for _, fl := range flows {
		if inspectingBuiltin(fl.Callee) && fc.surelyBuiltin(fl.Callee) {
			continue // getattr(torch, "x") reads torch, it does not hand it over
		}
		root, rest := splitRoot(fl.Chain)
		module := ""
		for _, b := range fc.binds[root] {
			for _, r := range fc.extend(b, rest) {
				if fc.isModule(r) && (module == "" || r.name < module) {
					module = r.name
				}
			}
		}
		if module != "" {
			fc.add(fl.Line, fl.Col, RuleModuleAlias,
				"module %q (as %q) %s; the scanner follows a module only through names bound by import or plain assignment, so use it by name",
				module, fl.Chain, flowPlaces[fl.Where])
		}
	}
}

// isModule reports whether a resolved name is a module object.
func (fc *fileCheck) isModule(b binding) bool {
	if b.local {
		_, ok := fc.ix.modules[b.name]
		return ok && b.name != ""
	}
	if !strings.Contains(b.name, ".") || fc.modules[b.name] {
		return true
	}
	// A chain ending in the name of an allowed or standard-library module
	// (torch.nn.functional.torch, torch.linalg.sys) is that module
	// re-exported (rt50c: passed as an argument it was an untyped torch).
	_, last, _ := strings.Cut(b.name[strings.LastIndexByte(b.name, '.'):], ".")
	return (fc.allowed[last] || fc.stdlib[last]) && !escapeExempt[last]
}

// first returns what a bound name refers to, for messages: the first in
// name order, non-local bindings before local ones; ok is false when the
// name is not bound.
func (fc *fileCheck) first(name string) (binding, bool) {
	bs := fc.binds[name]
	if len(bs) == 0 {
		return binding{}, false
	}
	best := bs[0]
	for _, b := range bs[1:] {
		if (best.local && !b.local) || (best.local == b.local && b.name < best.name) {
			best = b
		}
	}
	return best, true
}

// surelyBuiltin reports whether nothing in the file binds name (no import,
// alias, assignment, def or parameter), so that a call to it is the
// builtin's.
func (fc *fileCheck) surelyBuiltin(name string) bool {
	return len(fc.binds[name]) == 0 && len(fc.checker.imports[fc.rel][name]) == 0 && !fc.rebound[name]
}

// builtinAt reports whether a bare name used at p means the builtin of that
// name. Only an import directly in the module body, before p, of a name
// nothing else in the file assigns or deletes, makes it something else
// ("from torch import compile" is not compile()); an import inside a
// function or under a condition may never run. A dunder is always the
// builtin's: no legitimate import provides one.
func (fc *fileCheck) builtinAt(name string, p pos) bool {
	if isDunder(name) || fc.rebound[name] {
		return true
	}
	for _, at := range fc.shadows[name] {
		if at.before(p) {
			return false
		}
	}
	return true
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

func (fc *fileCheck) referenceAll(bs []binding, line, col int, what string, isImport, moduleLevel bool) {
	for _, b := range bs {
		fc.reference(b, line, col, what, isImport, moduleLevel)
	}
}

// reference applies the dotted-name rules to one resolved name. Bundle
// names are exempt; module-level-only entries apply to uses in
// module-level code, not to imports.
//
// A name rooted at an allowed module is also matched from every component
// that names an allowed or escape module (F.torch.load is torch.load,
// torch.os.system is os.system), and an escape module anywhere after the
// root is a module-escape finding of its own. When no deny rule speaks,
// the name (and those suffixes) must be on the attribute allow-list
// (attrs.go), and a standard-library module it passes through is an
// escape too.
func (fc *fileCheck) reference(b binding, line, col int, what string, isImport, moduleLevel bool) {
	if b.deep {
		fc.add(line, col, RuleScanLimit, "%s %q is too long or goes through too many bundle re-exports for the scanner to follow (%d at most)", what, b.name, maxResolveDepth)
	}
	if b.local {
		return
	}
	names := []string{b.name} // suffixes of b.name to match the rules on
	escaped := false
	if root, _ := splitRoot(b.name); fc.allowed[root] {
		for start := len(root) + 1; start < len(b.name); {
			end := strings.IndexByte(b.name[start:], '.')
			if end < 0 {
				end = len(b.name)
			} else {
				end += start
			}
			switch p := b.name[start:end]; {
			case fc.allowed[p] && !fc.attrs.submodules[b.name[:end]]:
				// (collections.abc is collections' own submodule, not the
				// abc module re-exported)
				names = append(names, b.name[start:])
			case fc.escape(p, b.name[:end]):
				names = append(names, b.name[start:])
				if !escaped {
					escaped = true
					fc.add(line, col, RuleModuleEscape,
						"%s %q reaches module %q through %q; a module outside the arena's allow-list is no more allowed when an allowed module re-exports it",
						what, b.name, p, b.name[:start-1])
				}
			}
			start = end + 1
		}
	}
	done := make(map[string]bool)
	for _, r := range fc.refs {
		if done[r.rule] || (r.moduleLevelOnly && (isImport || !moduleLevel)) {
			continue
		}
		for _, name := range names {
			if hasDottedPrefix(name, r.prefix) {
				done[r.rule] = true
				fc.add(line, col, r.rule, "%s %q: %s", what, b.name, r.why)
				break
			}
		}
	}
	if len(done) > 0 || escaped || b.written || fc.hasAttributeRule(b.name) {
		return // one finding per use; a chain as written is no module's
	}
	for _, name := range names {
		if v := fc.attrs.check(name); !v.ok {
			shown := fmt.Sprintf("%q", b.name)
			if name != b.name {
				shown = fmt.Sprintf("%q (as %q)", b.name, name)
			}
			fc.add(line, col, RuleModuleAttribute,
				"%s %s: %s; a bundle may use only what the attribute allow-list names (docs/verify.md, Static policy)", what, shown, v.why)
			return
		}
	}
	fc.stdlibEscape(b.name, line, col, what)
}

// hasAttributeRule reports a component of name that an attribute rule
// (from_file, load_library, ...) reports wherever it is read.
func (fc *fileCheck) hasAttributeRule(name string) bool {
	for _, part := range strings.Split(name, ".") {
		if _, ok := fc.attrRules[part]; ok {
			return true
		}
	}
	return false
}

// stdlibEscape reports the first component of a name the allow-list
// allows that is a standard-library module the allowed package
// re-exports (torch.textwrap), not its own submodule nor a function of the
// same name (torch.select). The listed escape modules are reported before
// the allow-list (escapeModules); this catches the rest.
func (fc *fileCheck) stdlibEscape(name string, line, col int, what string) {
	root, _ := splitRoot(name)
	if !fc.allowed[root] {
		return
	}
	for start := len(root) + 1; start < len(name); {
		end := strings.IndexByte(name[start:], '.')
		if end < 0 {
			end = len(name)
		} else {
			end += start
		}
		p, upTo := name[start:end], name[:end]
		if fc.stdlib[p] && !escapeExempt[p] && !fc.allowed[p] && !fc.attrs.submodules[upTo] && !submoduleNotEscape(upTo) {
			fc.add(line, col, RuleModuleEscape,
				"%s %q reaches module %q through %q; a module outside the arena's allow-list is no more allowed when an allowed module re-exports it",
				what, name, p, name[:start-1])
			return
		}
		start = end + 1
	}
}

// escape reports whether component p of a chain rooted at an allowed
// module, reached as the dotted prefix upTo, is a listed escape module
// (escapeModules) rather than the package's own submodule.
func (fc *fileCheck) escape(p, upTo string) bool {
	return fc.escapes[p] && !fc.allowed[p] && !submoduleNotEscape(upTo) && !fc.attrs.submodules[upTo]
}

// escapeExempt lists standard-library module names that are also names of
// functions and methods of the allowed packages (torch.select,
// Tensor.chunk), which are not re-exported modules.
var escapeExempt = map[string]bool{
	"chunk": true, "select": true, "trace": true, "copy": true, "array": true,
	"string": true, "stat": true, "time": true, "token": true,
}

// splitRoot splits a dotted chain into its first component and the rest.
func splitRoot(chain string) (root, rest string) {
	if i := strings.IndexByte(chain, '.'); i >= 0 {
		return chain[:i], chain[i+1:]
	}
	return chain, ""
}

// appendNew appends s to list unless it is there already.
func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

func containsBinding(bs []binding, b binding) bool {
	for _, x := range bs {
		if x == b {
			return true
		}
	}
	return false
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

// resolvesTo reports whether a dotted name, through what its root is
// bound to, may be the dotted name want.
func (fc *fileCheck) resolvesTo(chain, want string) bool {
	root, rest := splitRoot(chain)
	for _, b := range fc.binds[root] {
		for _, r := range fc.extend(b, rest) {
			if r.name == want {
				return true
			}
		}
	}
	return false
}

// wrapsArgs refuses functools.wraps given more than the wrapped function:
// assigned/updated name the attributes it copies onto whatever it is
// applied to (functools.wraps(src, assigned=("default",))(torch.ops.aten.add)
// rebinds an attribute of a torch object).
func (fc *fileCheck) wrapsArgs(line, col int) {
	fc.add(line, col, RuleModuleAttribute,
		"use of \"functools.wraps\" other than as a decorator called with the wrapped function alone (assigned/updated, *args, the function handed on, or the decorator applied to an object by a call): it copies attributes, the wrapped object's __dict__ included, onto what it is applied to; write @functools.wraps(f) above your own def")
}
