package scan

// The rules over attribute chains (fileCheck.attributes): dunder and
// _x_ names, strings that name them, the names refused on any object
// (attributeRules) and the dotted-name rules each chain is resolved by.

import (
	"strings"
)

// classNameRead reports whether a's attribute i is __class__ followed only
// by __name__ or __qualname__, read: what type(x).__name__ gives, which
// the scan admits, and nothing else of the class is reached.
func classNameRead(a attrFact, i int) bool {
	if a.Attrs[i] != "__class__" || i != len(a.Attrs)-2 || a.Ctx != "load" || a.Called {
		return false
	}
	next := a.Attrs[i+1]
	return next == "__name__" || next == "__qualname__"
}

// slotsEntry reports whether a is the string "__weakref__" or "__dict__"
// listed in a class body's __slots__: it only gives the class's instances
// a weak-reference slot or a dict; no getattr, namespace or match pattern
// turns it into an access (reading __slots__ back is itself a dunder
// access), and hs24 found honest classes that list it.
func slotsEntry(a attrFact) bool {
	return a.Slots && len(a.Attrs) == 1 && (a.Attrs[0] == "__weakref__" || a.Attrs[0] == "__dict__")
}

func (fc *fileCheck) attributes(attrs []attrFact) {
	for _, a := range attrs {
		if a.String {
			if name := a.Attrs[0]; !harmlessDunder(name) && name != "__main__" && !slotsEntry(a) {
				fc.add(a.Line, a.Col, RuleDunderAccess,
					"the string or keyword %s names interpreter internals: a class built from a dict, a match pattern's __match_args__ or a getattr turns it into an attribute access; remove it", name)
			}
			continue
		}
		if a.Dynamic {
			fc.add(a.Line, a.Col, RuleDynamicAttribute,
				"%s() on a format string that is not a literal: its fields may read any attribute (\"{0.__glo\" + \"bals__}\"); use a literal format string or an f-string", a.Attrs[0])
			continue
		}
		chain := strings.Join(a.Attrs, ".")
		for i, name := range a.Attrs {
			if i == 0 && (operatorDunder(name) || (name == "__init_subclass__" && fc.superCall(a))) {
				// a special method read from the object itself (not from
				// its class or its dict): what an operator does already;
				// super().__init_subclass__(**kw) chains a class's hook
				continue
			}
			if classNameRead(a, i) {
				break // x.__class__.__name__: the class's name, a string
			}
			if isDunder(name) && !harmlessDunder(name) {
				if a.Format {
					fc.add(a.Line, a.Col, RuleDunderAccess,
						"a format string's field reads %s, which reaches interpreter internals; format the values you need", name)
				} else {
					fc.add(a.Line, a.Col, RuleDunderAccess,
						"access to %s (in %q) reaches interpreter internals; use the public API instead", name, showChain(a.Base, chain))
				}
				break
			}
		}
		fc.introspection(a)
		fc.clockAttr(a)
		fc.unboundAttr(a)
		if a.Base != "" && (!a.Called || a.NArgs != 1 || a.NKeywords != 0 || a.Starred || !a.Decorator) && fc.resolvesTo(a.Base+"."+chain, "functools.wraps") {
			fc.wrapsArgs(a.Line, a.Col)
		}
		fc.classBuildingAttr(a, chain)
		mark := len(fc.findings)
		if a.Base != "" {
			switch {
			case forbiddenReference(a.Base) && !a.Local && fc.builtinAt(a.Base, pos{a.Line, a.Col}):
				fc.add(a.Line, a.Col, RuleForbiddenBuiltin,
					"use of %s is forbidden: bundles may not evaluate code or reach the interpreter's namespaces", a.Base)
			case isDunder(a.Base) && !harmlessDunder(a.Base):
				fc.add(a.Line, a.Col, RuleDunderAccess, "use of %s reaches interpreter internals; remove it", a.Base)
			}
			fc.chain(a.Base+"."+chain, a.Line, a.Col, a.ModuleLevel)
		}
		for i, name := range a.Attrs {
			if i == 0 && tensorPrivate[name] && fc.plainReceiver(a.Receiver) {
				continue // self._storage of a plain class of the bundle's
			}
			fc.attributeRule(name, mark, a.Line, a.Col, "use of %q", showChain(a.Base, chain))
		}
		fc.foreignPrivate(a, chain, mark)
		fc.rootedAgain(a)
	}
}

// superCall reports an attribute chain read from the builtin super()'s
// result (super().__init_subclass__).
func (fc *fileCheck) superCall(a attrFact) bool {
	return a.Base == "" && a.RootCall == "super" && fc.builtinAt("super", pos{a.Line, a.Col})
}

// attributeRule applies attributeRules to one attribute name read at a
// place, unless a finding of the same rule was made there since mark.
func (fc *fileCheck) attributeRule(name string, mark, line, col int, what, shown string) {
	r, ok := fc.attrRules[name]
	if !ok && isSunder(name) && name != "_value_" && name != "_name_" {
		// enum's machinery (_convert_ writes into any module named by a
		// string, _create_ builds a class from a namespace: rt25b), and
		// whatever other _x_ hooks a library keeps. A bundle class's own
		// _x_ attribute is refused too: a name check cannot tell it from
		// the one its base class inherits.
		r, ok = refRule{prefix: name, rule: RuleIntrospection,
			why: "a _x_ attribute is a library's internal hook (enum's _convert_ stores into any module, _create_ builds a class from a namespace); only an enum member's _value_ and _name_ may be read (an attribute of your own by such a name needs another name)"}, true
	}
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

// isSunder reports a name of the form _x_ (one underscore each side).
func isSunder(name string) bool {
	return len(name) > 2 && name[0] == '_' && name[1] != '_' && name[len(name)-1] == '_' && name[len(name)-2] != '_'
}
