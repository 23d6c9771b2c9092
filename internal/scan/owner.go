package scan

import (
	"strings"
	"unicode"
)

// Ownership: which objects a bundle may store into.
//
// An assignment to an attribute (x.a = v, x.a += v, del x.a, for x.a in
// ..., setattr(x, "a", v)) changes the object x for everyone who holds it.
// When x is torch.Tensor, a class reached through type(t), a function of
// torch or anything else the bundle did not create, the store patches the
// process the engine shares. So an attribute store is allowed only on an
// object the bundle owns, directly (one attribute link):
//
//   - the receiver of a method of the bundle's own classes (self in a
//     method, cls in a classmethod), when the method's decorators cannot
//     call it with another object (see safeDecorator);
//   - a name the file binds only by class or def statements (class and
//     function attributes), or only to literals and to fresh objects: an
//     instance of a bundle class that defines no __new__ and no metaclass,
//     a torch.nn module, a new tensor, a new generator, stream or event.
//
// Everything else (parameters, call results, items, attributes of
// attributes, names bound by for, with, except, match or unpacking) is
// refused by foreign-store. Stores into items (x[i] = v) stay allowed
// unless x comes from an import (global-mutation): writing the validator's
// output tensor is the contract.
//
// A method's receiver is only the instance when nothing calls the method
// with another object: C.m(torch.Tensor), type(x).m(obj), cls.m(obj) and
// super().m(obj) in a classmethod, getattr(C, "m"), and a method name used
// as a plain function in its class body all can. unbound-method refuses
// them, except C.m(self, ...) with the instance's own receiver.

// Method kinds, from the decorators.
const (
	kindInstance = "instance"
	kindClass    = "class"
	kindStatic   = "static"
	kindUnsafe   = "unsafe" // a decorator that may call it with anything
)

// safeDecorators are the resolved decorator names that only wrap a method
// (they call it with the arguments its callers give).
var safeDecorators = map[string]bool{
	"property": true, "functools.lru_cache": true, "functools.cache": true,
	"functools.cached_property": true, "abc.abstractmethod": true, "typing.overload": true,
	"typing.final": true, "typing.override": true, "torch.no_grad": true,
	"torch.inference_mode": true, "torch.enable_grad": true,
}

// classRef names a class statement: its file and index in the file's
// classes.
type classRef struct {
	file string
	idx  int
}

// ownerIndex is what the ownership rules know of the whole bundle.
type ownerIndex struct {
	// classes maps a module-qualified top-level class name ("helpers.C")
	// to its statement.
	classes map[string]classRef
	// instanceMethods holds the names of the methods whose receiver is
	// the instance, in any class of the bundle.
	instanceMethods map[string]bool
	kinds           map[string][]string // per file, per method
}

// indexOwners builds the ownership index after name resolution.
func (c *checker) indexOwners(files []string, facts map[string]*fileFacts) {
	c.owners = ownerIndex{classes: make(map[string]classRef), instanceMethods: make(map[string]bool),
		kinds: make(map[string][]string)}
	for _, rel := range files {
		ff := facts[rel]
		mod, _, ok := moduleOf(rel)
		for i, cl := range ff.Classes {
			if ok && cl.Top {
				c.owners.classes[joinName(mod, cl.Name)] = classRef{rel, i}
			}
		}
		kinds := make([]string, len(ff.Methods))
		for i := range ff.Methods {
			kinds[i] = c.decoratedKind(rel, ff, i)
			if kinds[i] == kindInstance {
				c.owners.instanceMethods[ff.Methods[i].Name] = true
			}
		}
		c.owners.kinds[rel] = kinds
	}
}

// decoratedKind judges a method's decorators.
func (c *checker) decoratedKind(rel string, ff *fileFacts, i int) string {
	m := ff.Methods[i]
	kind := kindInstance
	for _, d := range m.Decorators {
		names := c.resolvedNames(rel, d.Chain)
		switch {
		case d.Chain == "staticmethod" && len(names) == 1 && names[0] == "staticmethod":
			return kindStatic
		case d.Chain == "classmethod" && len(names) == 1 && names[0] == "classmethod":
			kind = kindClass
		case len(names) > 0 && allSafe(names):
		case !d.Call && c.propertyPart(ff, m.Class, d.Chain):
		default:
			kind = kindUnsafe
		}
	}
	if kind == kindUnsafe {
		for _, d := range m.Decorators {
			if d.Chain == "staticmethod" {
				return kindStatic
			}
		}
	}
	return kind
}

func allSafe(names []string) bool {
	for _, n := range names {
		if !safeDecorators[n] {
			return false
		}
	}
	return true
}

// propertyPart reports "@name.setter" (getter, deleter) for a method name
// of the same class.
func (c *checker) propertyPart(ff *fileFacts, class int, chain string) bool {
	base, part, ok := strings.Cut(chain, ".")
	if !ok || (part != "setter" && part != "getter" && part != "deleter") {
		return false
	}
	for _, m := range ff.Methods {
		if m.Class == class && m.Name == base {
			return true
		}
	}
	return false
}

// resolvedNames returns what a name chain refers to: through its root's
// import and alias bindings, or as written when nothing in the file binds
// the root. nil when the root is rebound some other way or the chain is
// empty.
func (c *checker) resolvedNames(rel, chain string) []string {
	if chain == "" {
		return nil
	}
	root, rest := splitRoot(chain)
	bs := c.binds[rel][root]
	if len(bs) == 0 {
		if c.reboundBy[rel][root] || len(c.imports[rel][root]) > 0 {
			return nil
		}
		return []string{chain}
	}
	var out []string
	for _, b := range bs {
		for _, r := range c.extend(b, rest) {
			if r.local {
				return nil
			}
			out = append(out, r.name)
		}
	}
	return out
}

// methodKind returns the kind of a method by its receiver index (1-based);
// "" for 0 or an index out of range.
func (fc *fileCheck) methodKind(idx int) string {
	kinds := fc.owners.kinds[fc.rel]
	if idx < 1 || idx > len(kinds) {
		return ""
	}
	return kinds[idx-1]
}

// ownedReceiver reports a receiver the bundle owns: self or cls of a
// method whose decorators only wrap it.
func (fc *fileCheck) ownedReceiver(idx int) bool {
	k := fc.methodKind(idx)
	return k == kindInstance || k == kindClass
}

// ownedName reports a bare name the file binds only by class or def
// statements, literals and fresh objects.
func (fc *fileCheck) ownedName(name string, ff *fileFacts) bool {
	if len(fc.binds[name]) > 0 || len(fc.checker.imports[fc.rel][name]) > 0 {
		return false
	}
	bound := false
	for _, n := range ff.Names {
		if n.Name != name || n.Ctx == "load" {
			continue
		}
		switch {
		case n.Ctx == "def" && (n.Kind == "class" || n.Kind == "function"):
		case n.Ctx == "store" && n.Value != nil && n.Value.Kind == "literal":
		case n.Ctx == "store" && n.Value != nil && n.Value.Kind == "call" && fc.fresh(n.Value.Callee, ff, 0):
		default:
			return false
		}
		bound = true
	}
	return bound
}

// freshFactories are the foreign callables whose result is a new object.
var freshFactories = map[string]bool{
	"torch.empty": true, "torch.zeros": true, "torch.ones": true, "torch.full": true,
	"torch.empty_like": true, "torch.zeros_like": true, "torch.ones_like": true,
	"torch.full_like": true, "torch.empty_strided": true, "torch.tensor": true,
	"torch.arange": true, "torch.Generator": true, "torch.cuda.Stream": true, "torch.cuda.Event": true,
}

// fresh reports whether calling callee returns a new object of the
// bundle's: a bundle class without __new__ or metaclass, a torch.nn
// module class, a tensor factory, dict/list/set.
func (fc *fileCheck) fresh(callee string, ff *fileFacts, depth int) bool {
	if callee == "" || depth > 16 {
		return false
	}
	if !strings.Contains(callee, ".") && len(fc.binds[callee]) == 0 && len(fc.checker.imports[fc.rel][callee]) == 0 {
		switch callee {
		case "dict", "list", "set", "bytearray":
			return !fc.rebound[callee]
		}
		refs, all := fc.localClasses(callee, ff)
		return all && fc.freshClasses(refs, depth)
	}
	names := fc.resolvedNames(fc.rel, callee)
	if names == nil {
		// Through a bundle module: every binding must be a fresh class.
		root, rest := splitRoot(callee)
		var refs []classRef
		for _, b := range fc.binds[root] {
			for _, r := range fc.extend(b, rest) {
				ref, ok := fc.owners.classes[r.name]
				if !r.local || !ok {
					return false
				}
				refs = append(refs, ref)
			}
		}
		return len(refs) > 0 && fc.freshClasses(refs, depth)
	}
	for _, n := range names {
		if !freshFactories[n] && !torchModuleClass(n) {
			return false
		}
	}
	return true
}

// torchModuleClass reports torch.nn.X for a capitalised X (a module class).
func torchModuleClass(name string) bool {
	rest, ok := strings.CutPrefix(name, "torch.nn.")
	if !ok || rest == "" || strings.Contains(rest, ".") {
		return false
	}
	r := []rune(rest)
	return unicode.IsUpper(r[0])
}

// localClasses returns the classes a bare name of this file is bound to by
// class statements; all is false when anything else binds it too.
func (fc *fileCheck) localClasses(name string, ff *fileFacts) (refs []classRef, all bool) {
	all = true
	for _, n := range ff.Names {
		if n.Name != name || n.Ctx == "load" {
			continue
		}
		if n.Ctx != "def" || n.Kind != "class" {
			all = false
		}
	}
	for i, cl := range ff.Classes {
		if cl.Name == name {
			refs = append(refs, classRef{fc.rel, i})
		}
	}
	return refs, all && len(refs) > 0
}

// freshClasses reports whether instantiating each class gives a new
// instance: no __new__, no keywords (metaclass), and bundle bases alike.
func (fc *fileCheck) freshClasses(refs []classRef, depth int) bool {
	for _, ref := range refs {
		ff := fc.facts[ref.file]
		cl := ff.Classes[ref.idx]
		if cl.Keywords {
			return false
		}
		for _, m := range ff.Methods {
			if m.Class == ref.idx+1 && m.Name == "__new__" {
				return false
			}
		}
		for _, base := range cl.Bases {
			if base == "" {
				return false
			}
			sub := &fileCheck{checker: fc.checker, rel: ref.file, binds: fc.checker.binds[ref.file], rebound: fc.reboundBy[ref.file]}
			if names := sub.resolvedNames(ref.file, base); names != nil {
				continue // a foreign base
			}
			if !sub.fresh(base, ff, depth+1) {
				return false
			}
		}
	}
	return true
}

// anyBundleClass reports whether a bare name may be one of the bundle's
// classes (a class statement of this file, or imported from a bundle
// module).
func (fc *fileCheck) anyBundleClass(name string, ff *fileFacts) bool {
	for _, cl := range ff.Classes {
		if cl.Name == name {
			return true
		}
	}
	for _, b := range fc.binds[name] {
		if _, ok := fc.owners.classes[b.name]; ok && b.local {
			return true
		}
	}
	return false
}
