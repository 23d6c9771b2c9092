package scan

import (
	"fmt"
	"sort"
	"strings"
)

// Abstract base classes (issue 16, class 3: process-wide state changed
// without a store). ABCMeta answers isinstance and issubclass for an ABC
// from its registry, its __subclasshook__ and, recursively, from every
// subclass it has: so a bundle class deriving from numbers.Real that
// registers torch.Tensor (S.register(torch.Tensor)), or that defines a
// __subclasshook__ saying yes to it, makes every tensor a numbers.Real for
// the whole process, and fills Real's own cache with the answer. No
// attribute store is involved. So:
//
//   - a bundle class may not derive from another module's ABC (numbers.*,
//     collections.abc.*, typing's aliases of them and its Supports*
//     protocols, collections' ChainMap/UserDict/UserList/UserString, and
//     the same names re-exported by torch: torch.types.Sequence); abc.ABC,
//     metaclass=abc.ABCMeta, typing.Protocol and typing.Generic stay, they
//     are how a bundle writes its own ABCs;
//   - no bundle class may define __subclasshook__ (abc.ABC's answers walk
//     its subclasses too);
//   - register may not be read from a bundle ABC (a class deriving from
//     abc.ABC, typing.Protocol or metaclass=abc.ABCMeta, unless the class
//     defines a method of that name itself), from cls in one of its class
//     methods, from type(x) in a bundle that has such a class, nor from an
//     ABC of another module however it is reached (typing.Sequence.register
//     registers with collections.abc.Sequence).
//
// A register read from a parameter or an item is not seen here; the
// runtime guard (python/cacheon_runtime/abcstate.py) compares every ABC's
// registry, subclasses and cache after each call.

// abcModules are modules every class of which is an ABC.
var abcModules = []string{"numbers", "collections.abc"}

// abcNames are the last components that name an ABC (or a class deriving
// from one) when reached through an allowed module: collections.abc's
// classes as typing and torch re-export them, typing's own protocols and
// collections' classes built on the ABCs.
var abcNames = map[string]bool{
	"Awaitable": true, "Coroutine": true, "AsyncIterable": true, "AsyncIterator": true,
	"AsyncGenerator": true, "Hashable": true, "Iterable": true, "Iterator": true, "Generator": true,
	"Reversible": true, "Sized": true, "Container": true, "Callable": true, "Collection": true,
	"AbstractSet": true, "MutableSet": true, "Mapping": true, "MutableMapping": true,
	"MappingView": true, "KeysView": true, "ItemsView": true, "ValuesView": true, "Sequence": true,
	"MutableSequence": true, "ByteString": true, "Buffer": true, "ContextManager": true,
	"AsyncContextManager": true, "SupportsAbs": true, "SupportsBytes": true, "SupportsComplex": true,
	"SupportsFloat": true, "SupportsIndex": true, "SupportsInt": true, "SupportsRound": true,
	"ChainMap": true, "UserDict": true, "UserList": true, "UserString": true,
	"Number": true, "Complex": true, "Real": true, "Rational": true, "Integral": true,
}

// ownABCBases are the foreign bases through which a bundle class is an ABC
// of its own (its registry and hook answer for its ancestors only through
// the checks above).
var ownABCBases = map[string]bool{"abc.ABC": true, "typing.Protocol": true}

// metaclassBases are foreign names that stand for type itself as a base
// (typing.Type[X] derives from type: a metaclass).
var metaclassBases = []string{"typing.Type"}

const abcWhy = "ABCMeta answers isinstance for an ABC from its registry, its __subclasshook__ and those of every subclass, so a bundle class can make any object (torch.Tensor) an instance of it for the whole process"

// foreignABC reports whether a resolved foreign name is another module's
// ABC (by the lists above).
func foreignABC(name string) bool {
	for _, m := range abcModules {
		if strings.HasPrefix(name, m+".") {
			return true
		}
	}
	i := strings.LastIndexByte(name, '.')
	return i > 0 && abcNames[name[i+1:]]
}

// abcRules applies the rules above to one file.
func (fc *fileCheck) abcRules(ff *fileFacts) {
	for _, cl := range ff.Classes {
		for _, b := range cl.Bases {
			for _, n := range uniqueSorted(fc.resolvedNames(fc.rel, strings.TrimSpace(b))) {
				switch {
				case foreignABC(n):
					fc.add(cl.Line, cl.Col, RuleGlobalMutation,
						"class %s derives from %s, an abstract base class of another module: %s; derive from abc.ABC (or a plain class) and check the types you accept explicitly", cl.Name, n, abcWhy)
				case containsString(metaclassBases, n):
					fc.add(cl.Line, cl.Col, RuleDunderAccess,
						"class %s derives from %s, which derives from type: bundles may not define metaclasses; derive from a plain class or use metaclass=abc.ABCMeta", cl.Name, n)
				default:
					continue
				}
				break
			}
		}
	}
	for _, n := range ff.Names {
		if n.Ctx == "def" && n.Kind == "function" && (n.Name == "__subclasshook__" || n.Name == "__subclasses__") {
			fc.add(n.Line, n.Col, RuleGlobalMutation,
				"defining %s: %s (abc.ABC's answers included); check the types you accept explicitly", n.Name, abcWhy)
		}
	}
	for _, a := range ff.Attributes {
		if a.String || a.Dynamic || a.Format {
			continue
		}
		for i, name := range a.Attrs {
			if name == "register" {
				fc.registerRule(a.Base, strings.Join(a.Attrs[:i], "."), a.Receiver, a.RootCall, a.Line, a.Col)
			}
		}
	}
	for _, c := range ff.Calls {
		// getattr(C, "register") on a name the attribute facts do not chain
		if c.Func == "getattr" && c.NameLiteral && c.NameArg == "register" && c.Target != "" && fc.builtinAt("getattr", pos{c.Line, c.Col}) {
			base, prefix := splitRoot(c.Target)
			fc.registerRule(base, prefix, c.TargetReceiver, "", c.Line, c.Col)
		}
	}
}

// registerRule reports "register" read from base.prefix (base a bare name,
// or the result of calling rootCall; receiver the method whose receiver
// base is) when that may be an ABC: another module's, one of the
// bundle's, or, in a bundle that has an ABC of its own (without a
// register method of its own), anything not known to be something else
// (a name bound to a class, a parameter, an attribute, type(x)).
func (fc *fileCheck) registerRule(base, prefix string, receiver int, rootCall string, line, col int) {
	why := ""
	switch {
	case base != "" && rootCall == "":
		why = fc.registerOn(base, prefix, receiver)
	case rootCall == "type" && prefix == "" && fc.builtinAt("type", pos{line, col}):
		if name := fc.anyABCClass(); name != "" {
			why = "type(x) in a bundle whose class " + name + " is an ABC"
		}
	}
	if why != "" {
		fc.add(line, col, RuleGlobalMutation, "register read from %s registers a virtual subclass with it: %s", why, abcWhy)
	}
}

// registerOn says what ABC "register" read from base.prefix may be, or "".
func (fc *fileCheck) registerOn(base, prefix string, receiver int) string {
	chain := base
	if prefix != "" {
		chain += "." + prefix
	}
	if names := fc.resolvedNames(fc.rel, chain); names != nil {
		for _, n := range names {
			if (foreignABC(n) || ownABCBases[n] || n == "abc.ABCMeta") && fc.attrs.check(n+".register").ok {
				return n // (one the allow-list denies is reported there)
			}
		}
		return ""
	}
	if prefix == "" && receiver != 0 {
		if fc.methodKind(receiver) == kindInstance {
			return "" // an instance: register is not looked up on its metaclass
		}
		m := fc.ff.Methods[receiver-1]
		ref := classRef{fc.rel, m.Class - 1}
		if fc.abcClass(ref, 0) && !fc.definesMethod(ref, "register", 0) {
			return "cls of " + fc.ff.Classes[ref.idx].Name + ", an ABC"
		}
		return ""
	}
	refs, _ := fc.baseClasses(fc.rel, chain)
	for _, ref := range refs {
		if fc.abcClass(ref, 0) && !fc.definesMethod(ref, "register", 0) {
			return fc.facts[ref.file].Classes[ref.idx].Name + ", an ABC"
		}
	}
	if len(refs) > 0 || (prefix == "" && fc.instanceName(base, fc.ff)) {
		return "" // plain bundle classes, new instances
	}
	if name := fc.anyABCClass(); name != "" {
		return fmt.Sprintf("%q, which may hold an ABC (the bundle's class %s is one)", chain, name)
	}
	return ""
}

// abcClass reports whether a bundle class is an ABC: metaclass=abc.ABCMeta,
// a base that is abc.ABC, typing.Protocol or another module's ABC, or a
// base the scanner cannot resolve (conservatively), through bundle bases.
func (c *checker) abcClass(ref classRef, depth int) bool {
	ff := c.facts[ref.file]
	if ref.idx < 0 || ref.idx >= len(ff.Classes) || depth > 16 {
		return true
	}
	cl := ff.Classes[ref.idx]
	if cl.Keywords || cl.Metaclass != "" {
		return true
	}
	for _, base := range cl.Bases {
		if names := c.resolvedNames(ref.file, base); names != nil {
			for _, n := range names {
				if foreignABC(n) || ownABCBases[n] {
					return true
				}
			}
			continue
		}
		refs, _ := c.baseClasses(ref.file, base)
		if len(refs) == 0 {
			return true
		}
		for _, r := range refs {
			if c.abcClass(r, depth+1) {
				return true
			}
		}
	}
	return false
}

// definesMethod reports a method of the class, or of its bundle bases,
// named name.
func (c *checker) definesMethod(ref classRef, name string, depth int) bool {
	ff := c.facts[ref.file]
	if ref.idx < 0 || ref.idx >= len(ff.Classes) || depth > 16 {
		return false
	}
	for _, m := range ff.Methods {
		if m.Class == ref.idx+1 && m.Name == name {
			return true
		}
	}
	for _, base := range ff.Classes[ref.idx].Bases {
		refs, _ := c.baseClasses(ref.file, base)
		for _, r := range refs {
			if c.definesMethod(r, name, depth+1) {
				return true
			}
		}
	}
	return false
}

// anyABCClass names a class of the bundle that is an ABC without a
// register method of its own ("" when none).
func (c *checker) anyABCClass() string {
	files := make([]string, 0, len(c.facts))
	for rel := range c.facts {
		files = append(files, rel)
	}
	sort.Strings(files)
	for _, rel := range files {
		for i, cl := range c.facts[rel].Classes {
			ref := classRef{rel, i}
			if c.abcClass(ref, 0) && !c.definesMethod(ref, "register", 0) {
				return cl.Name
			}
		}
	}
	return ""
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// uniqueSorted returns the distinct strings of list in order.
func uniqueSorted(list []string) []string {
	out := append([]string(nil), list...)
	sort.Strings(out)
	k := 0
	for i, s := range out {
		if i == 0 || s != out[k-1] {
			out[k] = s
			k++
		}
	}
	return out[:k]
}
