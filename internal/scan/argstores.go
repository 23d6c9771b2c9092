package scan

import (
	"sort"
	"strings"
)

// Library callables that store into what they are applied to.
//
// typing.final(f) sets f.__final__, abc.abstractmethod(f) sets
// f.__isabstractmethod__, dataclasses.dataclass(C) and
// functools.total_ordering(C) set methods on C, typing.overload(f) records
// f in typing's registry under f's module and name. Applied to a torch
// function or class (typing.final(torch.nn.functional.silu)) they change an
// object the engine shares, from a library frame the store rules do not
// see. So each is allowed only where what it is applied to is the
// bundle's own:
//
//   - as a decorator of a def or class statement (@typing.final,
//     @dataclasses.dataclass(frozen=True)), when every decorator below it
//     returns the statement's own object or a new one of its own
//     (keepsObject: not a bundle decorator, which may return anything, nor
//     typing.overload, which returns typing's shared _overload_dummy) and,
//     for a class, no metaclass other than abc.ABCMeta builds it;
//   - called with one positional argument that the file owns: a name it
//     binds only by def or class statements, to literals or to new
//     objects (ownedName), or the receiver of one of its methods.
//
// Any other use is foreign-store: the callable handed on (an alias, a
// list, functools.partial, map), called on a parameter, an attribute, an
// item or a call result, or, for the decorator factories, its result
// applied by a call (dataclasses.dataclass(frozen=True)(torch.nn.Linear)).
// Also refused: typing.no_type_check on a class (it marks the functions
// the class body binds too; before Python 3.11 whatever they are) and
// typing.overload above functools.wraps (the registry's key would be the
// wrapped object's module and name). functools.wraps keeps its own rules
// (check.go: a decorator called with the wrapped function alone) and the
// decorator check here. A builtin container class's mutator called on a
// module's attribute (list.clear(torch.nn.functional.X)) is the container
// rule's (unboundContainerMutators).
//
// Checked and not listed, since they store into nothing they are given:
// enum.unique (reads the members), functools.lru_cache, cache,
// cached_property and partial, property, staticmethod, classmethod,
// abc.abstractproperty (each builds a new object; cached_property's
// __set_name__ names itself once and refuses a second name), torch.no_grad,
// inference_mode and enable_grad (a new wrapper; torch 1.13 and 2.x),
// triton.jit, autotune and heuristics (a new JITFunction or Autotuner).

// argMutators maps each such callable to what it does to its argument.
var argMutators = map[string]string{
	"typing.final":             "sets __final__ on",
	"typing.override":          "sets __override__ on",
	"typing.no_type_check":     "sets __no_type_check__ on",
	"typing.runtime_checkable": "sets _is_runtime_protocol on",
	"typing.overload":          "records, in typing's process-wide overload registry under its module and name,",
	"functools.total_ordering": "sets the missing comparison methods on",
	"dataclasses.dataclass":    "sets __init__, __eq__, __dataclass_fields__ and other methods on",
	"abc.abstractmethod":       "sets __isabstractmethod__ on",
	"abc.abstractclassmethod":  "sets __isabstractmethod__ on",
	"abc.abstractstaticmethod": "sets __isabstractmethod__ on",
	// Decorator factories: their result stores into what it is applied to.
	"typing.dataclass_transform": "returns a decorator that sets __dataclass_transform__ on",
	"functools.wraps":            "returns a decorator that copies names, the wrapped object's __dict__ and __wrapped__ onto",
}

// mutatorFactory reports a callable whose call returns the decorator
// (dataclasses.dataclass with no positional argument is one too).
func mutatorFactory(name string) bool {
	return name == "typing.dataclass_transform" || name == "functools.wraps"
}

// returnsArgument reports a call of an argument-mutating callable that
// returns the object it is given or a new one of its own (typing.final(f)
// is f; not typing.overload, which returns typing's _overload_dummy, nor
// a factory, which returns a decorator).
func (fc *fileCheck) returnsArgument(callee string) bool {
	m := fc.mutatorOf(callee)
	return m != "" && m != "typing.overload" && !mutatorFactory(m)
}

// mutatorNames lists argMutators' keys in a fixed order.
var mutatorNames = func() []string {
	var out []string
	for n := range argMutators {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}()

// mutatorOf returns the argument-mutating callable a name chain may be
// bound to, "" when none.
func (fc *fileCheck) mutatorOf(chain string) string {
	if chain == "" {
		return ""
	}
	return fc.resolvesToAny(chain, mutatorNames)
}

// argMutatorUses applies the rule to every use of such a callable in the
// file (attribute chains, bare-name calls, bare names) and to every def
// and class statement it decorates.
func (fc *fileCheck) argMutatorUses(ff *fileFacts) {
	for _, a := range ff.Attributes {
		if a.Base == "" || a.String || a.Format || a.Dynamic || a.Ctx != "load" {
			continue // (a store into the module is global-mutation's)
		}
		m := fc.mutatorOf(a.Base + "." + strings.Join(a.Attrs, "."))
		if m == "" {
			continue
		}
		shown := showChain(a.Base, strings.Join(a.Attrs, "."))
		fc.mutatorUse(m, shown, a.Called, a.Decorator, a.NArgs, a.Starred, a.Target, a.Arg0, a.Line, a.Col)
	}
	for _, c := range ff.Calls {
		if c.OfResult {
			continue
		}
		if m := fc.mutatorOf(c.Func); m != "" {
			fc.mutatorUse(m, c.Func, true, c.Decorator, c.NArgs, c.Starred, c.Target, c.TargetReceiver, c.Line, c.Col)
		}
	}
	for _, n := range ff.Names {
		if n.Ctx != "load" {
			continue
		}
		if m := fc.mutatorOf(n.Name); m != "" {
			fc.mutatorUse(m, n.Name, false, n.Decorator, 0, false, "", 0, n.Line, n.Col)
		}
	}
	for _, n := range ff.Names {
		if n.Ctx == "def" && (n.Kind == "function" || n.Kind == "class") {
			fc.decoratedStatement(n, ff)
		}
	}
}

// mutatorUse judges one use of argument-mutating callable m, written as
// shown: called (with nargs positional arguments, the first the chain
// target, or the receiver of method recv), or not; decorator says the
// name or the call is a whole decorator expression.
func (fc *fileCheck) mutatorUse(m, shown string, called, decorator bool, nargs int, starred bool, target string, recv, line, col int) {
	factory := mutatorFactory(m) || (m == "dataclasses.dataclass" && called && nargs == 0)
	switch {
	case m == "functools.wraps":
		return // check.go: wrapsArgs
	case !called && decorator && !factory:
		return // @typing.final: decoratedStatement judges what it is applied to
	case !called:
		fc.mutatorRefused(line, col, m, shown, "it is used as a value (aliased, handed on, put in a container) and may be applied to anything: use it as a decorator directly above your own def or class")
	case factory && (!decorator || starred):
		fc.mutatorRefused(line, col, m, shown, "its result is applied other than as a decorator: write it, called, directly above your own def or class")
	case factory:
		return // @dataclasses.dataclass(frozen=True): decoratedStatement
	case nargs != 1 || starred:
		fc.mutatorRefused(line, col, m, shown, "it is called with other than one positional argument")
	case !fc.ownedTarget(target, recv):
		what := "an expression"
		if target != "" {
			what = "\"" + target + "\""
		}
		fc.mutatorRefused(line, col, m, shown, "it is applied to "+what+", which the bundle did not create: "+
			"apply it to your own def or class (as a decorator, or called on a name the file binds by def or class)")
	case m == "typing.no_type_check" && fc.boundAsClass(target):
		fc.mutatorRefused(line, col, m, shown, noTypeCheckClass)
	}
}

// noTypeCheckClass is why typing.no_type_check may not take a class.
const noTypeCheckClass = "on a class it also marks the functions and classes the class body binds (on Python before 3.11 a torch function among them): apply it to the functions"

// ownedTarget reports a call's first argument the bundle owns: a bare name
// the file binds only by def or class statements, literals and new
// objects, or the receiver of one of its methods.
func (fc *fileCheck) ownedTarget(target string, recv int) bool {
	if target == "" || strings.Contains(target, ".") {
		return false
	}
	return fc.ownedReceiver(recv) || fc.ownedName(target, fc.ff)
}

// boundAsClass reports a name some class statement of the file binds.
func (fc *fileCheck) boundAsClass(name string) bool {
	for _, n := range fc.ff.Names {
		if n.Name == name && n.Ctx == "def" && n.Kind == "class" {
			return true
		}
	}
	return false
}

// decoratedStatement judges the argument-mutating decorators of one def
// or class statement: each must be applied to the statement's own object
// (every decorator below it keeps it), a class must be built by its
// statement, and typing.overload may not sit above functools.wraps (the
// registry's key would be the wrapped object's module and name).
func (fc *fileCheck) decoratedStatement(n nameFact, ff *fileFacts) {
	ds := n.Decorators
	for i, d := range ds {
		m := fc.mutatorOf(d.Chain)
		if m == "" || (d.Call && !mutatorFactory(m) && m != "dataclasses.dataclass") ||
			(!d.Call && mutatorFactory(m)) {
			continue // a direct call in a decorator is judged as a call
		}
		shown := "@" + d.Chain
		if d.Call {
			shown += "(...)"
		}
		below := ds[i+1:]
		switch {
		case !fc.keepsObject(below):
			fc.mutatorRefused(n.Line, n.Col, m, shown+" above "+n.Name,
				"a decorator below it may return an object the bundle did not create: put it directly above the def or class, "+
					"or below only decorators that return the function itself or a new wrapper (functools.lru_cache, property, triton.jit, ...)")
			return
		case n.Kind == "class" && !fc.classStatementBuilds(n, ff):
			fc.mutatorRefused(n.Line, n.Col, m, shown+" above class "+n.Name,
				"the class's metaclass or bases may make the statement return an object the bundle did not create: "+
					"write a plain class statement (metaclass=abc.ABCMeta is fine)")
			return
		case n.Kind == "class" && m == "typing.no_type_check":
			fc.mutatorRefused(n.Line, n.Col, m, shown+" above class "+n.Name, noTypeCheckClass)
			return
		case m == "typing.overload" && fc.decoratedWith(below, "functools.wraps"):
			fc.mutatorRefused(n.Line, n.Col, m, shown+" above "+n.Name,
				"functools.wraps below it copies another object's module and name, under which typing's registry would record the function")
			return
		}
	}
}

// keepsObject reports decorators each of which returns the object it is
// given or a new object of its own (the safe decorators but
// typing.overload, and the builtin staticmethod and classmethod).
func (fc *fileCheck) keepsObject(ds []decoratorFact) bool {
	for _, d := range ds {
		names := fc.resolvedNames(fc.rel, d.Chain)
		if len(names) == 0 {
			return false
		}
		for _, name := range names {
			switch {
			case name == "typing.overload":
				return false
			case (name == "staticmethod" || name == "classmethod") && !d.Call:
			case !safeDecorators[name]:
				return false
			}
		}
	}
	return true
}

// decoratedWith reports a decorator among ds that may be want.
func (fc *fileCheck) decoratedWith(ds []decoratorFact, want string) bool {
	for _, d := range ds {
		if d.Chain != "" && fc.resolvesTo(d.Chain, want) {
			return true
		}
	}
	return false
}

// classStatementBuilds reports whether the class statement a def name
// fact stands for returns the class it builds: no keywords (a metaclass
// that is not a name chain), no metaclass but abc.ABCMeta, and bases that
// are foreign classes or bundle class statements (not an expression whose
// type would act as the metaclass).
func (fc *fileCheck) classStatementBuilds(n nameFact, ff *fileFacts) bool {
	for _, cl := range ff.Classes {
		if cl.Name != n.Name || cl.Line != n.Line || cl.Col != n.Col {
			continue
		}
		if cl.Keywords {
			return false
		}
		if cl.Metaclass != "" {
			if names := fc.resolvedNames(fc.rel, cl.Metaclass); len(names) != 1 || names[0] != "abc.ABCMeta" {
				return false
			}
		}
		for _, base := range cl.Bases {
			if refs, foreign := fc.baseClasses(fc.rel, base); !foreign && len(refs) == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// mutatorRefused reports one refused use of argument-mutating callable m.
func (fc *fileCheck) mutatorRefused(line, col int, m, shown, why string) {
	fc.add(line, col, RuleForeignStore,
		"%s: %s %s what it is applied to, which on an object the bundle did not create (a torch function or class) "+
			"changes it for the whole process; here %s", shown, m, argMutators[m], why)
}

// unboundContainerMutators reports a container mutator read from a
// builtin container class and called on a module's attribute:
// list.clear(torch.nn.functional.GRID_SAMPLE_PADDING_MODES) is the
// container rule's x.clear() (attrs.go) written so that no chain shows it.
// (collections' classes are caught by that rule already:
// collections.deque.clear has three components.)
func (fc *fileCheck) unboundContainerMutators(ff *fileFacts) {
	for _, a := range ff.Attributes {
		if !a.Called || a.Target == "" || len(a.Attrs) != 1 || a.Local {
			continue
		}
		name := a.Attrs[0]
		switch a.Base {
		case "list", "dict", "set", "bytearray":
		default:
			continue
		}
		if !fc.surelyBuiltin(a.Base) || (!containerMutator(name) && name != "sort" && name != "reverse" && name != "add") {
			continue
		}
		root, rest := splitRoot(a.Target)
		if rest == "" {
			continue // a name of the file's own (an import's module is module-alias's)
		}
		for _, b := range fc.binds[root] {
			if r := fc.extend(b, rest); len(r) > 0 && !r[0].local {
				fc.add(a.Line, a.Col, RuleModuleAttribute, "use of %q on %q: %s", a.Base+"."+name, r[0].name, whyContainer)
				break
			}
		}
	}
}
