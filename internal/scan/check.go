package scan

import (
	"fmt"
	"sort"
	"strings"
)

// Bounds on name resolution. Honest bundles stay far below them; a bundle
// beyond them gets a scan-limit finding, never a silently partial analysis.
const (
	// maxBindings bounds the distinct objects one name may stand for.
	maxBindings = 64
	// maxRounds bounds the re-resolution rounds of the binding fixed
	// point, maxSteps the binding changes it propagates.
	maxRounds = 64
	maxSteps  = 1 << 18
	// maxResolveDepth bounds nested lookups while resolving one name
	// through bundle modules, and the components of a bundle name the
	// scanner resolves at all (each lookup consumes one).
	maxResolveDepth = 256
)

// binding is what a name refers to after following bundle-local re-exports
// and aliases: a dotted absolute name, and whether it is the bundle's own.
// deep marks a bundle name whose resolution hit maxResolveDepth.
type binding struct {
	name  string
	local bool
	deep  bool
}

// pos is a source position, for "does this use come after that import".
type pos struct{ line, col int }

func (p pos) before(q pos) bool {
	return p.line < q.line || (p.line == q.line && p.col < q.col)
}

// checker applies the source rules to parsed files.
//
// Names are resolved file-wide, without scopes or control flow: a name
// stands for everything any import or alias in the file binds it to, so a
// binding in dead code or another function still counts. Aliases (a name
// assigned a name chain) and re-exports (a bundle module's names imported
// elsewhere) are followed across the bundle to a fixed point.
type checker struct {
	ix        *modIndex
	allowed   map[string]bool
	allow     string // the allow-list, for messages
	refs      []refRule
	attrRules map[string]refRule
	escapes   map[string]bool
	// modules holds non-local dotted names known to be modules: the
	// knownModules list and every module a plain import names.
	modules map[string]bool
	// imports maps a file to its import bindings: local name → absolute
	// names (relative imports resolved, re-exports not yet followed).
	imports map[string]map[string][]string
	// aliases maps a file to its alias facts: name → chains.
	aliases map[string]map[string][]string
	// order lists, per file, the names with imports or aliases, in the
	// order they first appear.
	order map[string][]string
	// binds maps a file to what each of its bound names may refer to.
	binds map[string]map[string][]binding
	// overflow marks names whose binding set reached maxBindings;
	// unsettled marks the files of a bundle whose fixed point ran out of
	// rounds or steps.
	overflow  map[string]map[string]bool
	unsettled map[string]bool
	// memo caches resolve; it is cleared whenever binds change.
	memo map[string][]binding
	// modDepth is the most components a bundle module name has.
	modDepth int
}

func newChecker(ix *modIndex, pol Policy, facts map[string]*fileFacts) *checker {
	c := &checker{
		ix:        ix,
		allowed:   make(map[string]bool),
		refs:      referenceRules(),
		attrRules: attributeRules(),
		escapes:   escapeModules(),
		modules:   make(map[string]bool),
		imports:   make(map[string]map[string][]string),
		aliases:   make(map[string]map[string][]string),
		order:     make(map[string][]string),
		binds:     make(map[string]map[string][]binding),
		overflow:  make(map[string]map[string]bool),
		unsettled: make(map[string]bool),
	}
	for _, m := range pol.AllowedImports {
		c.allowed[topLevel(m)] = true
	}
	c.allow = strings.Join(pol.AllowedImports, ", ")
	for _, m := range knownModules() {
		c.modules[m] = true
	}
	for m := range ix.modules {
		c.modDepth = max(c.modDepth, strings.Count(m, ".")+1)
	}
	files := make([]string, 0, len(facts))
	for rel := range facts {
		files = append(files, rel)
	}
	sort.Strings(files)
	for _, rel := range files {
		c.collect(rel, facts[rel])
	}
	c.solve(files)
	return c
}

// collect records one file's import bindings, aliases and plainly
// imported modules.
func (c *checker) collect(rel string, ff *fileFacts) {
	imports := make(map[string][]string)
	aliases := make(map[string][]string)
	seen := make(map[string]bool)
	note := func(name string) {
		if !seen[name] {
			seen[name] = true
			c.order[rel] = append(c.order[rel], name)
		}
	}
	pkg, _ := packageOf(rel)
	for _, im := range ff.Imports {
		abs, climbs := resolve(pkg, im)
		if climbs {
			continue
		}
		if !im.From {
			if !c.ix.isLocal(im.Module) {
				for i, r := range im.Module {
					if r == '.' {
						c.modules[im.Module[:i]] = true
					}
				}
				c.modules[im.Module] = true
			}
			local, target := topLevel(im.Module), topLevel(im.Module)
			if im.AsName != "" {
				local, target = im.AsName, im.Module
			}
			imports[local] = appendNew(imports[local], target)
			note(local)
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
			imports[local] = appendNew(imports[local], joinName(abs, n.Name))
			note(local)
		}
	}
	for _, a := range ff.Aliases {
		for _, ch := range a.Chains {
			aliases[a.Name] = appendNew(aliases[a.Name], ch)
		}
		note(a.Name)
	}
	c.imports[rel] = imports
	c.aliases[rel] = aliases
	c.binds[rel] = make(map[string][]binding)
}

// aliasEdge is one alias chain: name is bound to what the chain's root
// holds, continued by rest.
type aliasEdge struct {
	name, rest string
}

// bindEvent says that a name of a file gained bindings.
type bindEvent struct {
	file, name string
	delta      []binding
}

// solve computes binds: each file's imports and aliases, resolved through
// the bundle's modules, until nothing changes. New bindings propagate along
// alias chains as they appear (each binding crosses each edge once); what
// depends on bundle-local names (imports of bundle modules, aliases of
// them) is re-resolved in rounds until a round adds nothing.
func (c *checker) solve(files []string) {
	users := make(map[string]map[string][]aliasEdge)
	type localImport struct{ file, name, abs string }
	var locals []localImport
	for _, f := range files {
		users[f] = make(map[string][]aliasEdge)
		for _, n := range c.order[f] {
			for _, abs := range c.imports[f][n] {
				if c.ix.isLocal(abs) {
					locals = append(locals, localImport{f, n, abs})
				}
			}
			for _, ch := range c.aliases[f][n] {
				root, rest := splitRoot(ch)
				users[f][root] = append(users[f][root], aliasEdge{n, rest})
			}
		}
	}
	var queue []bindEvent
	add := func(file, name string, bs []binding) bool {
		delta := c.bind(file, name, bs)
		if len(delta) == 0 {
			return false
		}
		clear(c.memo) // resolutions may have changed
		queue = append(queue, bindEvent{file, name, delta})
		return true
	}
	c.memo = make(map[string][]binding)
	for _, f := range files {
		for _, n := range c.order[f] {
			for _, abs := range c.imports[f][n] {
				add(f, n, c.resolve(abs, 0))
			}
		}
	}
	steps := 0
	for round := 0; ; round++ {
		for len(queue) > 0 {
			if steps++; steps > maxSteps {
				c.giveUp(files)
				return
			}
			ev := queue[0]
			queue = queue[1:]
			for _, e := range users[ev.file][ev.name] {
				for _, v := range ev.delta {
					add(ev.file, e.name, c.extend(v, e.rest))
				}
			}
		}
		// Re-resolve what goes through bundle-local names.
		progressed := false
		for _, li := range locals {
			progressed = add(li.file, li.name, c.resolve(li.abs, 0)) || progressed
		}
		for _, f := range files {
			for _, root := range c.order[f] {
				edges := users[f][root]
				for _, v := range c.binds[f][root] {
					if !v.local {
						continue
					}
					for _, e := range edges {
						progressed = add(f, e.name, c.extend(v, e.rest)) || progressed
					}
				}
			}
		}
		if !progressed {
			break
		}
		if round == maxRounds {
			c.giveUp(files)
			return
		}
	}
	clear(c.memo)
}

// giveUp marks every file with imports or aliases as unsettled.
func (c *checker) giveUp(files []string) {
	for _, f := range files {
		if len(c.order[f]) > 0 {
			c.unsettled[f] = true
		}
	}
	clear(c.memo)
}

// bind adds bindings to a name of a file, up to maxBindings, and returns
// the ones that are new.
func (c *checker) bind(file, name string, bs []binding) []binding {
	cur := c.binds[file][name]
	n := len(cur)
	for _, b := range bs {
		if containsBinding(cur, b) {
			continue
		}
		if len(cur) == maxBindings {
			if c.overflow[file] == nil {
				c.overflow[file] = make(map[string]bool)
			}
			c.overflow[file][name] = true
			break
		}
		cur = append(cur, b)
	}
	c.binds[file][name] = cur
	return cur[n:len(cur):len(cur)]
}

// extend returns what b continued by the dotted rest refers to.
func (c *checker) extend(b binding, rest string) []binding {
	name := joinName(b.name, rest)
	if b.local {
		return c.resolve(name, 0)
	}
	return []binding{{name: name}}
}

// resolve follows bundle-local re-exports and aliases of an absolute name:
// if the longest bundle module prefix of name binds the next component,
// the name continues from each thing that component is bound to.
func (c *checker) resolve(name string, depth int) []binding {
	if !c.ix.isLocal(name) {
		return []binding{{name: name}}
	}
	self := []binding{{name: name, local: true}}
	if name == "" {
		return self
	}
	if depth >= maxResolveDepth || strings.Count(name, ".") >= maxResolveDepth {
		return []binding{{name: name, local: true, deep: true}}
	}
	if r, ok := c.memo[name]; ok {
		return r
	}
	c.memo[name] = self // a cycle leads back to the name itself
	out := self
	parts := strings.Split(name, ".")
	for i := min(len(parts)-1, c.modDepth); i >= 0; i-- {
		file, ok := c.ix.modules[strings.Join(parts[:i], ".")]
		if !ok {
			continue
		}
		if vals := c.binds[file][parts[i]]; file != "" && len(vals) > 0 {
			rest := strings.Join(parts[i+1:], ".")
			out = nil
			for _, v := range vals {
				next := []binding{{name: joinName(v.name, rest)}}
				if v.local {
					next = c.resolve(joinName(v.name, rest), depth+1)
				}
				for _, b := range next {
					if !containsBinding(out, b) {
						out = append(out, b)
					}
				}
			}
		}
		break
	}
	c.memo[name] = out
	return out
}

// fileCheck collects the findings of one file.
type fileCheck struct {
	*checker
	rel   string
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
		checker: c, rel: rel, binds: c.binds[rel],
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
	fc.flows(ff.Flows)
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
		builtin := fc.builtinAt(c.Func, pos{c.Line, c.Col})
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
		fc.referenceAll(fc.binds[c.Func], c.Line, c.Col, "call to", false, c.ModuleLevel)
	}
}

// attrBuiltinCall applies dynamic-attribute, global-mutation and the
// dotted-name rules to getattr/setattr/delattr/hasattr calls.
func (fc *fileCheck) attrBuiltinCall(c callFact) {
	switch {
	case !c.NameLiteral:
		fc.add(c.Line, c.Col, RuleDynamicAttribute,
			"%s() with a computed attribute name hides what is accessed; write obj.attr, or keep a dict of your own objects", c.Func)
	case isDunder(c.NameArg) && c.Func != "hasattr":
		fc.add(c.Line, c.Col, RuleDynamicAttribute,
			"%s() with dunder name %q reaches interpreter internals; remove it", c.Func, c.NameArg)
	}
	if c.Func == "getattr" && c.NameLiteral && isIdentifier(c.NameArg) {
		// getattr(obj, "name") reads what obj.name does.
		mark := len(fc.findings)
		if c.Target != "" {
			fc.chain(c.Target+"."+c.NameArg, c.Line, c.Col, c.ModuleLevel)
		}
		fc.attributeRule(c.NameArg, mark, c.Line, c.Col, "getattr() of %q", c.NameArg)
	}
	if c.Func != "setattr" && c.Func != "delattr" {
		return
	}
	roots, shown := c.TargetRoots, "<expr>"
	if c.Target != "" {
		roots, shown = []string{topLevel(c.Target)}, c.Target
	}
	for _, r := range roots {
		if b, ok := fc.first(r); ok {
			fc.add(c.Line, c.Col, RuleGlobalMutation,
				"%s() on %q changes imported %q, which the engine shares; keep state in your own objects", c.Func, shown, displayModule(b.name))
			return
		}
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
		mark := len(fc.findings)
		if a.Base != "" {
			switch {
			case forbiddenReference(a.Base) && fc.builtinAt(a.Base, pos{a.Line, a.Col}):
				fc.add(a.Line, a.Col, RuleForbiddenBuiltin,
					"use of %s is forbidden: bundles may not evaluate code or reach the interpreter's namespaces", a.Base)
			case isDunder(a.Base) && !harmlessDunder(a.Base):
				fc.add(a.Line, a.Col, RuleDunderAccess, "use of %s reaches interpreter internals; remove it", a.Base)
			}
			fc.chain(a.Base+"."+chain, a.Line, a.Col, a.ModuleLevel)
		}
		for _, name := range a.Attrs {
			fc.attributeRule(name, mark, a.Line, a.Col, "use of %q", showChain(a.Base, chain))
		}
	}
}

// attributeRule applies attributeRules to one attribute name read at a
// place, unless a finding of the same rule was made there since mark.
func (fc *fileCheck) attributeRule(name string, mark, line, col int, what, shown string) {
	r, ok := fc.attrRules[name]
	if !ok {
		return
	}
	for _, f := range fc.findings[mark:] {
		if f.Rule == r.rule && f.Line == line && f.Col == col {
			return
		}
	}
	fc.add(line, col, r.rule, what+": %s", shown, r.why)
}

// chain applies the dotted-name rules to a name chain read at one place:
// through what its root is bound to, or as written when it is unbound.
func (fc *fileCheck) chain(chain string, line, col int, moduleLevel bool) {
	root, rest := splitRoot(chain)
	bs := fc.binds[root]
	if len(bs) == 0 {
		fc.reference(binding{name: chain}, line, col, "use of", false, moduleLevel)
		return
	}
	for _, b := range bs {
		fc.referenceAll(fc.extend(b, rest), line, col, "use of", false, moduleLevel)
	}
}

func (fc *fileCheck) stores(stores []storeFact) {
	for _, s := range stores {
		roots := s.Roots
		if s.Root != "" {
			roots = []string{s.Root}
		}
		for _, r := range roots {
			b, ok := fc.first(r)
			if !ok {
				continue
			}
			verb := "assignment to"
			if s.Ctx == "del" {
				verb = "deletion of"
			}
			fc.add(s.Line, s.Col, RuleGlobalMutation,
				"%s %q changes imported %q, which the engine shares; keep state in your own objects", verb, s.Target, displayModule(b.name))
			break
		}
	}
}

func (fc *fileCheck) names(names []nameFact) {
	for _, n := range names {
		if n.Ctx == "def" {
			continue // defining a name (def __repr__) is not using it
		}
		builtin := fc.builtinAt(n.Name, pos{n.Line, n.Col})
		switch {
		case forbiddenReference(n.Name) && builtin && (n.Ctx == "load" || isDunder(n.Name)):
			fc.add(n.Line, n.Col, RuleForbiddenBuiltin,
				"reference to %s is forbidden, even without calling it; remove it", n.Name)
		case attrBuiltin(n.Name) && builtin && n.Name != "hasattr" && n.Ctx == "load":
			fc.add(n.Line, n.Col, RuleDynamicAttribute,
				"passing %s around hides what is accessed; write obj.attr at the call site", n.Name)
		case isDunder(n.Name) && !harmlessDunder(n.Name):
			fc.add(n.Line, n.Col, RuleDunderAccess, "use of %s reaches interpreter internals; remove it", n.Name)
		}
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
	return !strings.Contains(b.name, ".") || fc.modules[b.name]
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
// root is a module-escape finding of its own.
func (fc *fileCheck) reference(b binding, line, col int, what string, isImport, moduleLevel bool) {
	if b.deep {
		fc.add(line, col, RuleScanLimit, "%s %q is too long or goes through too many bundle re-exports for the scanner to follow (%d at most)", what, b.name, maxResolveDepth)
	}
	if b.local {
		return
	}
	names := []string{b.name} // suffixes of b.name to match the rules on
	if root, _ := splitRoot(b.name); fc.allowed[root] {
		escaped := false
		for start := len(root) + 1; start < len(b.name); {
			end := strings.IndexByte(b.name[start:], '.')
			if end < 0 {
				end = len(b.name)
			} else {
				end += start
			}
			switch p := b.name[start:end]; {
			case fc.allowed[p]:
				names = append(names, b.name[start:])
			case fc.escapes[p] && !submoduleNotEscape(b.name[:end]):
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
