package scan

import "strings"

// Classes built from a namespace: type(name, bases, namespace), a
// metaclass called the same way and enum's functional API turn the keys
// of a dict into class attributes. A key computed at run time ("_"*2 +
// "match_args" + "_"*2) escapes every rule on dunder names that the scanner
// applies to written names and string constants, and a class with a
// computed __match_args__ and a metaclass whose __instancecheck__ accepts
// anything makes a match statement read any attribute of any object
// (silu.__globals__, and from there the builtins). So every way of calling
// a class constructor with a namespace is refused: type with other than
// one argument (also when type is aliased, passed around or used as a base
// class: rule names), the result of type(x) called with a constructor's
// arguments, a name bound to such a result, the metaclasses of the allowed
// modules (abc.ABCMeta, enum.EnumMeta/EnumType) called or derived from,
// and enum's functional API. Class statements stay: the scanner reads
// their bodies.

// metaclasses are the allowed modules' metaclasses.
var metaclasses = []string{"abc.ABCMeta", "enum.EnumMeta", "enum.EnumType"}

// enumClasses are enum's classes whose call with a name and members
// builds a new enum class (the functional API).
var enumClasses = []string{"enum.Enum", "enum.IntEnum", "enum.Flag", "enum.IntFlag", "enum.StrEnum", "enum.ReprEnum"}

const namespaceWhy = "a class built from a namespace takes its attribute names from a dict, whose keys may be computed at run time (any interpreter hook); write a class statement"

// resolvesToAny returns the first of wants that chain may be bound to.
func (fc *fileCheck) resolvesToAny(chain string, wants []string) string {
	for _, w := range wants {
		if fc.resolvesTo(chain, w) {
			return w
		}
	}
	return ""
}

// boundToTypeResult reports a name the file assigns the result of a call
// of type (type(type) is type itself, type(C) is C's metaclass).
func (fc *fileCheck) boundToTypeResult(name string) bool {
	for _, n := range fc.ff.Names {
		if n.Name == name && n.Ctx == "store" && n.Value != nil && n.Value.Kind == "call" &&
			n.Value.Callee == "type" && fc.builtinAt("type", pos{n.Line, n.Col}) {
			return true
		}
	}
	return false
}

// classBuildingCall applies the namespace rules to a call of a bare name,
// or of the result of calling one (c.OfResult).
func (fc *fileCheck) classBuildingCall(c callFact, builtin bool) {
	ctorArgs := c.NArgs >= 2 || c.Starred || c.NKeywords > 0
	switch {
	case c.OfResult:
		if c.Func == "type" && builtin && ctorArgs {
			fc.add(c.Line, c.Col, RuleDunderAccess, "type(x)(...) with a class constructor's arguments builds a class: %s", namespaceWhy)
		}
	case fc.resolvesToAny(c.Func, metaclasses) != "":
		fc.add(c.Line, c.Col, RuleDunderAccess, "call to %s, a metaclass: %s", fc.resolvesToAny(c.Func, metaclasses), namespaceWhy)
	case ctorArgs && fc.boundToTypeResult(c.Func):
		fc.add(c.Line, c.Col, RuleDunderAccess, "%q holds the result of type(x) and is called with a class constructor's arguments: %s", c.Func, namespaceWhy)
	case ctorArgs && fc.resolvesToAny(c.Func, enumClasses) != "":
		fc.add(c.Line, c.Col, RuleDunderAccess, "%s's functional API (a name and members) builds an enum class: %s", fc.resolvesToAny(c.Func, enumClasses), namespaceWhy)
	}
}

// classBuildingAttr applies the namespace rules to an attribute chain
// (abc.ABCMeta(...), enum.Enum("E", {...})).
func (fc *fileCheck) classBuildingAttr(a attrFact, chain string) {
	if a.Base == "" || !a.Called {
		return
	}
	full := a.Base + "." + chain
	if m := fc.resolvesToAny(full, metaclasses); m != "" {
		fc.add(a.Line, a.Col, RuleDunderAccess, "call to %s, a metaclass: %s", m, namespaceWhy)
		return
	}
	if e := fc.resolvesToAny(full, enumClasses); e != "" && (a.NArgs >= 2 || a.Starred || a.NKeywords > 0) {
		fc.add(a.Line, a.Col, RuleDunderAccess, "%s's functional API (a name and members) builds an enum class: %s", e, namespaceWhy)
	}
}

// classBases refuses a class statement deriving from a metaclass: a
// bundle may not define one (its __instancecheck__ or __call__ runs for
// every class it makes, and calling it builds classes from namespaces).
func (fc *fileCheck) classBases(ff *fileFacts) {
	for _, cl := range ff.Classes {
		for _, b := range cl.Bases {
			if m := fc.resolvesToAny(strings.TrimSpace(b), metaclasses); m != "" {
				fc.add(cl.Line, cl.Col, RuleDunderAccess,
					"class %s derives from %s: bundles may not define metaclasses; derive from a plain class or use metaclass=abc.ABCMeta", cl.Name, m)
			}
		}
	}
}
