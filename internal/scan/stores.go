package scan

import (
	"fmt"
	"strings"
)

// The store rules: global-mutation (a store through an imported module),
// foreign-store (an attribute store into an object the bundle did not
// create) and unbound-method (a method reached so that its receiver may be
// any object). owner.go says what the bundle owns.

func (fc *fileCheck) stores(stores []storeFact) {
	for _, s := range stores {
		verb := "assignment to"
		if s.Ctx == "del" {
			verb = "deletion of"
		}
		roots := s.Roots
		if s.Root != "" {
			roots = []string{s.Root}
		}
		imported := false
		for _, r := range roots {
			b, ok := fc.first(r)
			if !ok {
				continue
			}
			fc.add(s.Line, s.Col, RuleGlobalMutation,
				"%s %q changes imported %q, which the engine shares; keep state in your own objects", verb, s.Target, displayModule(b.name))
			imported = true
			break
		}
		if imported || len(s.Links) == 0 || s.Links[len(s.Links)-1] == "[]" {
			continue // item stores: the contract writes the validator's tensors
		}
		owned := s.Root != "" && len(s.Links) == 1 && (fc.ownedReceiver(s.Receiver) || fc.ownedName(s.Root, fc.ff))
		if !owned {
			fc.foreignStore(s.Line, s.Col, fmt.Sprintf("%s %q", verb, s.Target))
		}
	}
}

// foreignStore reports an attribute store into an object the bundle does
// not own.
func (fc *fileCheck) foreignStore(line, col int, what string) {
	fc.add(line, col, RuleForeignStore,
		"%s changes an object the bundle did not create, which may be shared with the engine (a parameter, a call result, an item, "+
			"an attribute of another object); only self, the bundle's own classes and functions and the instances it constructs may be changed", what)
}

// unboundAttr applies unbound-method to an attribute chain: a mutator
// (a bundle method that stores into its instance) may be read only from
// what is known to be an instance: self in an instance method, a name the
// file binds only to new instances, a new instance itself (P().m), super()
// bound to an instance. Read from anything else (the class, cls, type(x),
// a parameter, an item, an attribute, a call result) it may be the plain
// function, callable with any object as self. C.m(self, ...) with the
// instance's own receiver is allowed.
func (fc *fileCheck) unboundAttr(a attrFact) {
	for i, name := range a.Attrs {
		if !fc.owners.mutators[name] || (i == 0 && fc.knownInstance(a)) {
			continue
		}
		if i == len(a.Attrs)-1 && a.Called && fc.methodKind(a.Arg0) == kindInstance {
			continue
		}
		if i == len(a.Attrs)-1 && a.Called && !a.Starred && a.NArgs+a.NKeywords < fc.owners.mutatorArgs[name] {
			// too few arguments for any such method to run with another
			// object as self (hs53: q.to(dtype) beside a bundle class's
			// to(self, device), out.copy_(v) beside copy_(self, v))
			continue
		}
		shown := showChain(a.Base, strings.Join(a.Attrs[:i+1], "."))
		if a.RootCall != "" {
			shown = a.RootCall + "(...)." + strings.Join(a.Attrs[:i+1], ".")
		}
		fc.unboundMethod(a.Line, a.Col, shown)
		return
	}
}

// knownInstance reports whether the object an attribute chain starts at
// is known to be an instance (not a class) of the bundle's.
func (fc *fileCheck) knownInstance(a attrFact) bool {
	p := pos{a.Line, a.Col}
	switch {
	case a.Base != "":
		return fc.methodKind(a.Receiver) == kindInstance || fc.instanceName(a.Base, fc.ff)
	case a.RootCall == "super" && fc.builtinAt("super", p):
		return fc.methodKind(a.RootArg) == kindInstance
	case a.RootCall != "" && a.RootCall != "type":
		return fc.fresh(a.RootCall, fc.ff, 0)
	}
	return false
}

func (fc *fileCheck) unboundMethod(line, col int, shown string) {
	fc.add(line, col, RuleUnboundMethod,
		"%q may be the plain function of a method that stores into self or reads its private attributes (read from a class, cls, type(x), a parameter, an item, "+
			"an attribute or a call result), callable with any object as self, which it would patch or read; call such methods on self, "+
			"on a name bound to a new instance, or on a new instance", shown)
}

// classRefs reports a class body that uses one of its own instance
// methods as a plain function (m(torch.Tensor), staticmethod(m), a
// decorator): its receiver could then be anything.
func (fc *fileCheck) classRefs(ff *fileFacts) {
	for ci, cl := range ff.Classes {
		for _, r := range cl.Refs {
			for mi, m := range ff.Methods {
				if m.Class == ci+1 && m.Name == r && fc.methodKind(mi+1) == kindInstance && fc.owners.mutators[r] {
					fc.add(cl.Line, cl.Col, RuleUnboundMethod,
						"class %s uses its method %s as a plain function in its body, where it can be called with any object as self; call it on an instance", cl.Name, r)
					break
				}
			}
		}
	}
}
