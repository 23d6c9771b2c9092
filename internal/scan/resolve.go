package scan

import (
	"slices"
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
	// written marks a chain taken as written: its root is bound by no
	// import or alias of the file.
	written bool
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
	// knownModules list, the allowed packages' real submodules (the parse
	// script's list) and every module a plain import names.
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
	// attrs is the attribute allow-list; stdlib the interpreter's
	// standard-library module names (module-escape).
	attrs  *attrPolicy
	stdlib map[string]bool
	// facts are the parsed files; reboundBy holds, per file, the names
	// bound other than by import (assigned, deleted, def, class, param).
	facts     map[string]*fileFacts
	reboundBy map[string]map[string]bool
	owners    ownerIndex
	// ownPrivate holds the private names the bundle binds itself
	// (foreignPrivate).
	ownPrivate map[string]bool
}

// newChecker resolves the names of every parsed file. env is the parse
// script's header (nil when there were no sources): its standard-library
// list and the allowed packages' submodules refine module-escape and the
// attribute allow-list.
func newChecker(ix *modIndex, pol Policy, facts map[string]*fileFacts, env *factsHeader) *checker {
	if env == nil {
		env = &factsHeader{}
	}
	submodules := make(map[string]bool)
	for _, list := range [][]string{knownModules(), env.Submodules} {
		for _, m := range list {
			submodules[m] = true
		}
	}
	c := &checker{
		attrs:      newAttrPolicy(attrTables(), submodules),
		stdlib:     make(map[string]bool),
		facts:      facts,
		ownPrivate: ownPrivateNames(facts),
		reboundBy:  make(map[string]map[string]bool),
		ix:         ix,
		allowed:    make(map[string]bool),
		refs:       referenceRules(),
		attrRules:  attributeRules(),
		escapes:    escapeModules(),
		modules:    make(map[string]bool),
		imports:    make(map[string]map[string][]string),
		aliases:    make(map[string]map[string][]string),
		order:      make(map[string][]string),
		binds:      make(map[string]map[string][]binding),
		overflow:   make(map[string]map[string]bool),
		unsettled:  make(map[string]bool),
	}
	for _, m := range pol.AllowedImports {
		c.allowed[topLevel(m)] = true
	}
	c.allow = strings.Join(pol.AllowedImports, ", ")
	for _, list := range [][]string{knownModules(), env.Submodules} {
		for _, m := range list {
			c.modules[m] = true // rt50c: torch.functional, torch.return_types
		}
	}
	for m := range ix.modules {
		c.modDepth = max(c.modDepth, strings.Count(m, ".")+1)
	}
	files := make([]string, 0, len(facts))
	for rel := range facts {
		files = append(files, rel)
	}
	sort.Strings(files)
	for _, m := range env.Stdlib {
		c.stdlib[m] = true
	}
	for _, rel := range files {
		c.collect(rel, facts[rel])
		rebound := make(map[string]bool)
		for _, n := range facts[rel].Names {
			if n.Ctx != "load" {
				rebound[n.Name] = true
			}
		}
		c.reboundBy[rel] = rebound
	}
	c.implicitSubmodules(files)
	c.solve(files)
	c.indexOwners(files, facts)
	return c
}

// implicitSubmodules binds, in a package's __init__.py, the name of every
// submodule of it that a file of the bundle imports, in any form: the
// import system sets a submodule as its package's attribute, which is a
// global of __init__.py that no statement there binds (rt51a: after
// `from .helper import SCALE`, `helper` in kern/__init__.py is the module
// kern.helper, and `helper.T.sys` was a chain on a name the scanner could
// not type).
func (c *checker) implicitSubmodules(files []string) {
	for _, rel := range files {
		pkg, _ := packageOf(rel)
		for _, im := range c.facts[rel].Imports {
			abs, climbs := resolve(pkg, im)
			if climbs || !c.ix.isLocal(abs) {
				continue
			}
			mods := []string{abs}
			if im.From {
				for _, n := range im.Names {
					if n.Name != "*" {
						mods = append(mods, joinName(abs, n.Name))
					}
				}
			}
			for _, m := range mods {
				if _, ok := c.ix.modules[m]; !ok || m == "" {
					continue
				}
				// a.b.c sets c on a.b and b on a (and a on the root
				// package, where the bundle root has an __init__.py)
				for end := len(m); end > 0; {
					i := strings.LastIndexByte(m[:end], '.')
					parent, sub := "", m[i+1:end]
					if i >= 0 {
						parent = m[:i]
					}
					if init := c.ix.modules[parent]; init != "" && c.imports[init] != nil {
						c.imports[init][sub] = appendNew(c.imports[init][sub], joinName(parent, sub))
						if !slices.Contains(c.order[init], sub) {
							c.order[init] = append(c.order[init], sub)
						}
					}
					end = max(i, 0)
				}
			}
		}
	}
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
