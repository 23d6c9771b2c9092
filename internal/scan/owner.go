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
//     function attributes; not one typing.overload decorates, which binds
//     typing's shared _overload_dummy), or only to literals and to fresh
//     objects: an instance of a bundle class that defines no __new__ and
//     no metaclass, a torch.nn module, a new tensor, a new generator,
//     stream or event.
//
// Everything else (parameters, call results, items, attributes of
// attributes, names bound by for, with, except, match or unpacking) is
// refused by foreign-store. Stores into items (x[i] = v) stay allowed
// unless x comes from an import (global-mutation): writing the validator's
// output tensor is the contract.
//
// A method's receiver is only the instance when nothing calls the method
// with another object: C.m(torch.Tensor), k = C; k.m(obj), type(x).m(obj),
// cls.m(obj), getattr(C, "m"), and a method name used as a plain function
// in its class body all can. unbound-method refuses reading a mutator (a
// method that stores into its receiver) from anything not known to be an
// instance (stores.go), except C.m(self, ...) with the instance's own
// receiver.

// Method kinds, from the decorators.
const (
	kindInstance = "instance"
	kindClass    = "class"
	kindStatic   = "static"
	kindUnsafe   = "unsafe" // a decorator that may call it with anything
)

// safeDecorators are the resolved decorator names that return the object
// they decorate, or a new wrapper that calls it only with the arguments
// its callers give. Any other decorator (a bundle function included) may
// call the function with any object, or return a shared object in its
// place. typing.overload is safe for a method's receiver, which it never
// calls, but returns typing's shared _overload_dummy (see overloaded).
var safeDecorators = map[string]bool{
	"property": true, "functools.lru_cache": true, "functools.cache": true,
	"functools.cached_property": true, "functools.wraps": true, "functools.total_ordering": true,
	"abc.abstractmethod": true, "typing.overload": true, "typing.final": true,
	"typing.override": true, "typing.runtime_checkable": true, "typing.no_type_check": true,
	"typing.dataclass_transform": true, "torch.no_grad": true,
	"torch.inference_mode": true, "torch.enable_grad": true, "dataclasses.dataclass": true,
	"enum.unique": true, "triton.jit": true, "triton.autotune": true, "triton.heuristics": true,
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
	// mutators holds the names of the methods, in any class of the
	// bundle, whose receiver is the instance and which store into it:
	// called with another object as self, they would patch that object.
	mutators map[string]bool
	// mutatorArgs is, per mutator name, the fewest arguments a call must
	// pass for any such method's body to run (methodFact.Required; 0
	// where not known): a call with fewer cannot run one with another
	// object as self.
	mutatorArgs map[string]int
	kinds       map[string][]string // per file, per method
}

// addMutator records a mutator method by name and the arguments a call
// of it must pass (the fewest over the methods of that name).
func (o *ownerIndex) addMutator(name string, required int) {
	if was, ok := o.mutatorArgs[name]; !ok || required < was {
		o.mutatorArgs[name] = max(required, 0)
	}
	o.mutators[name] = true
}

// indexOwners builds the ownership index after name resolution.
func (c *checker) indexOwners(files []string, facts map[string]*fileFacts) {
	c.owners = ownerIndex{classes: make(map[string]classRef), mutators: make(map[string]bool),
		mutatorArgs: make(map[string]int), kinds: make(map[string][]string)}
	for _, rel := range files {
		mod, _, ok := moduleOf(rel)
		for i, cl := range facts[rel].Classes {
			if ok && cl.Top {
				c.owners.classes[joinName(mod, cl.Name)] = classRef{rel, i}
			}
		}
	}
	for _, rel := range files {
		ff := facts[rel]
		kinds := make([]string, len(ff.Methods))
		for i, m := range ff.Methods {
			kinds[i] = c.decoratedKind(rel, ff, i)
			if kinds[i] != kindStatic && !c.plainClass(classRef{rel, m.Class - 1}, 0) {
				kinds[i] = kindUnsafe // a metaclass or class decorator gets its functions
			}
		}
		c.owners.kinds[rel] = kinds
		mutator := func(idx int) {
			if idx >= 1 && idx <= len(kinds) && kinds[idx-1] == kindInstance {
				c.owners.addMutator(ff.Methods[idx-1].Name, ff.Methods[idx-1].Required)
			}
		}
		for _, st := range ff.Stores {
			mutator(st.Receiver) // self.x = v, self.cache[k] = v, self[k] = v
		}
		// self._parameters, self._storage, self.obj: reads the rules
		// admit only on self, as the bundle's own (private.go,
		// introspect.go); called with another object as self, they would
		// read its internals
		for _, a := range ff.Attributes {
			if len(a.Attrs) == 0 {
				continue
			}
			if n := a.Attrs[0]; tensorPrivate[n] || exceptionReferents[n] ||
				(isPrivate(n) && !c.ownPrivate[n] && !namedTupleAPI[n]) {
				mutator(a.Receiver) // admitted only as self's own
			}
		}
		for _, call := range ff.Calls {
			if (call.Func == "setattr" || call.Func == "delattr") && call.Target != "" && !strings.Contains(call.Target, ".") {
				mutator(call.TargetReceiver)
			}
		}
		// A dataclass's generated __init__ stores every field into self:
		// Knob.__init__(torch.ops.aten.mul, f) would set the operator's
		// _op.
		for _, cl := range ff.Classes {
			for _, d := range cl.Decorators {
				for _, n := range c.resolvedNames(rel, d.Chain) {
					if n == "dataclasses.dataclass" {
						c.owners.addMutator("__init__", 0)
					}
				}
			}
		}
	}
}

// decoratedKind judges a method by its name and decorators.
func (c *checker) decoratedKind(rel string, ff *fileFacts, i int) string {
	m := ff.Methods[i]
	kind := kindInstance
	switch m.Name {
	case "__new__":
		return kindStatic // an implicit staticmethod
	case "__init_subclass__", "__class_getitem__":
		kind = kindClass // implicit classmethods
	}
	for _, d := range m.Decorators {
		names := c.resolvedNames(rel, d.Chain)
		switch {
		case d.Chain == "staticmethod" && len(names) == 1 && names[0] == "staticmethod":
			return kindStatic
		case d.Chain == "classmethod" && len(names) == 1 && names[0] == "classmethod":
			if kind != kindUnsafe {
				kind = kindClass
			}
		case len(names) > 0 && allSafe(names):
		case !d.Call && c.propertyPart(ff, m.Class, d.Chain):
		default:
			kind = kindUnsafe
		}
	}
	return kind
}

// safeDecorated reports whether every decorator of a def or class is safe.
func (c *checker) safeDecorated(rel string, ds []decoratorFact) bool {
	for _, d := range ds {
		if names := c.resolvedNames(rel, d.Chain); len(names) == 0 || !allSafe(names) {
			return false
		}
	}
	return true
}

// plainClass reports a class statement whose class object is the one the
// statement creates and whose functions nothing but its callers gets: no
// keywords (metaclass=), safe decorators, and bases that are foreign or
// plain bundle classes.
func (c *checker) plainClass(ref classRef, depth int) bool {
	ff := c.facts[ref.file]
	if ref.idx < 0 || ref.idx >= len(ff.Classes) || depth > 16 {
		return false
	}
	cl := ff.Classes[ref.idx]
	if cl.Keywords || !c.safeDecorated(ref.file, cl.Decorators) || c.overloaded(ref.file, cl.Decorators) {
		return false
	}
	if cl.Metaclass != "" {
		// abc.ABCMeta (what abc.ABC derives from) only tracks abstract
		// methods and registrations; any other metaclass gets the class's
		// functions first.
		names := c.resolvedNames(ref.file, cl.Metaclass)
		if len(names) != 1 || names[0] != "abc.ABCMeta" {
			return false
		}
	}
	for _, base := range cl.Bases {
		refs, foreign := c.baseClasses(ref.file, base)
		if foreign {
			continue
		}
		if len(refs) == 0 {
			return false
		}
		for _, r := range refs {
			if !c.plainClass(r, depth+1) {
				return false
			}
		}
	}
	return true
}

// baseClasses resolves a base of a class of file rel: foreign (a name of
// an import or a builtin), or the bundle classes it may be (none when it
// is neither: an expression or another kind of binding).
func (c *checker) baseClasses(rel, base string) (refs []classRef, foreign bool) {
	if base == "" {
		return nil, false
	}
	if names := c.resolvedNames(rel, base); names != nil {
		return nil, true
	}
	root, rest := splitRoot(base)
	if len(c.binds[rel][root]) == 0 {
		if rest != "" {
			return nil, false
		}
		ff := c.facts[rel]
		for _, n := range ff.Names {
			if n.Name == base && n.Ctx != "load" && (n.Ctx != "def" || n.Kind != "class") {
				return nil, false
			}
		}
		for i, cl := range ff.Classes {
			if cl.Name == base {
				refs = append(refs, classRef{rel, i})
			}
		}
		return refs, false
	}
	for _, b := range c.binds[rel][root] {
		for _, r := range c.extend(b, rest) {
			ref, ok := c.owners.classes[r.name]
			if !r.local || !ok {
				return nil, false
			}
			refs = append(refs, ref)
		}
	}
	return refs, false
}

// overloaded reports a decorator that binds the statement's name to an
// object that is not the bundle's: typing.overload returns typing's shared
// _overload_dummy; triton.jit, autotune and heuristics return the
// compiler's objects, whose attributes (the source text, the configs, the
// timings) Triton compiles and tunes from (rt53: a store into a kernel's
// _src ran code the scanner never read). Safe for a method's receiver,
// not for stores through the name.
func (c *checker) overloaded(rel string, ds []decoratorFact) bool {
	for _, d := range ds {
		for _, n := range c.resolvedNames(rel, d.Chain) {
			switch n {
			case "typing.overload", "triton.jit", "triton.autotune", "triton.heuristics":
				return true
			}
		}
	}
	return false
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
		case n.Ctx == "def" && n.Kind == "function" && fc.safeDecorated(fc.rel, n.Decorators) && !fc.overloaded(fc.rel, n.Decorators):
		case n.Ctx == "def" && n.Kind == "class" && fc.safeDecorated(fc.rel, n.Decorators) && fc.plainClassAt(n, ff):
		case n.Ctx == "store" && n.Value != nil && n.Value.Kind == "literal":
		case n.Ctx == "store" && n.Value != nil && n.Value.Kind == "call" && fc.fresh(n.Value.Callee, ff, 0):
		case n.Ctx == "store" && n.Value != nil && n.Value.Kind == "call" && fc.returnsArgument(n.Value.Callee):
			// Cfg = dataclasses.dataclass(Cfg): the call's own argument,
			// which argMutatorUses requires to be the bundle's
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
// bundle's: an instance of a plain bundle class without __new__, a
// torch.nn module class, a tensor factory, dict/list/set.
func (fc *fileCheck) fresh(callee string, ff *fileFacts, depth int) bool {
	if callee == "" {
		return false
	}
	switch callee {
	case "dict", "list", "set", "bytearray":
		return len(fc.binds[callee]) == 0 && !fc.rebound[callee]
	}
	if names := fc.resolvedNames(fc.rel, callee); names != nil {
		for _, n := range names {
			if !freshFactories[n] && !torchModuleClass(n) {
				return false
			}
		}
		return true
	}
	refs, _ := fc.baseClasses(fc.rel, callee)
	return len(refs) > 0 && fc.freshClasses(refs, depth)
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

// plainClassAt reports whether the class statement a def name fact
// stands for is plain.
func (fc *fileCheck) plainClassAt(n nameFact, ff *fileFacts) bool {
	for i, cl := range ff.Classes {
		if cl.Name == n.Name && cl.Line == n.Line && cl.Col == n.Col {
			return fc.plainClass(classRef{fc.rel, i}, 0)
		}
	}
	return false
}

// freshClasses reports whether instantiating each class gives a new
// instance: a plain class with no __new__ in it or its bundle bases.
func (fc *fileCheck) freshClasses(refs []classRef, depth int) bool {
	if depth > 16 {
		return false
	}
	for _, ref := range refs {
		if !fc.plainClass(ref, 0) {
			return false
		}
		ff := fc.facts[ref.file]
		for _, m := range ff.Methods {
			if m.Class == ref.idx+1 && m.Name == "__new__" {
				return false
			}
		}
		for _, base := range ff.Classes[ref.idx].Bases {
			sub, _ := fc.baseClasses(ref.file, base)
			if !fc.freshClasses(sub, depth+1) {
				return false
			}
		}
	}
	return true
}

// instanceName reports a bare name the file binds only to new instances
// (calls of plain bundle classes, torch.nn modules, tensor factories) or
// to literals (displays, comprehensions, constants, lambdas: none of them
// is a class, so no method read from one is a plain function).
func (fc *fileCheck) instanceName(name string, ff *fileFacts) bool {
	if len(fc.binds[name]) > 0 || len(fc.checker.imports[fc.rel][name]) > 0 {
		return false
	}
	bound := false
	for _, n := range ff.Names {
		if n.Name != name || n.Ctx == "load" {
			continue
		}
		if n.Ctx != "store" || n.Value == nil {
			return false
		}
		if n.Value.Kind != "literal" && (n.Value.Kind != "call" || !fc.fresh(n.Value.Callee, ff, 0)) {
			return false
		}
		bound = true
	}
	return bound
}
