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

// unboundAttr applies unbound-method to an attribute chain whose first
// attribute is an instance method of a bundle class, read from something
// that may be the class rather than an instance.
func (fc *fileCheck) unboundAttr(a attrFact) {
	if len(a.Attrs) == 0 || !fc.owners.instanceMethods[a.Attrs[0]] {
		return
	}
	p := pos{a.Line, a.Col}
	classLike := false
	switch {
	case a.Base != "":
		classLike = fc.anyBundleClass(a.Base, fc.ff) || fc.methodKind(a.Receiver) == kindClass
	case a.RootCall == "type" && fc.builtinAt("type", p):
		classLike = true
	case a.RootCall == "super" && fc.builtinAt("super", p):
		classLike = fc.methodKind(a.RootArg) != kindInstance
	}
	if !classLike || (a.Called && len(a.Attrs) == 1 && fc.methodKind(a.Arg0) == kindInstance) {
		return
	}
	shown := showChain(a.Base, strings.Join(a.Attrs, "."))
	if a.RootCall != "" {
		shown = a.RootCall + "(...)." + strings.Join(a.Attrs, ".")
	}
	fc.unboundMethod(a.Line, a.Col, shown)
}

func (fc *fileCheck) unboundMethod(line, col int, shown string) {
	fc.add(line, col, RuleUnboundMethod,
		"%q reaches a method through its class, where it can be called with any object as self (and its stores into self would patch that object); "+
			"call methods on instances (C.m(self, ...) with the instance's own self is fine)", shown)
}

// classRefs reports a class body that uses one of its own instance
// methods as a plain function (m(torch.Tensor), staticmethod(m), a
// decorator): its receiver could then be anything.
func (fc *fileCheck) classRefs(ff *fileFacts) {
	for ci, cl := range ff.Classes {
		for _, r := range cl.Refs {
			for mi, m := range ff.Methods {
				if m.Class == ci+1 && m.Name == r && fc.methodKind(mi+1) == kindInstance {
					fc.add(cl.Line, cl.Col, RuleUnboundMethod,
						"class %s uses its method %s as a plain function in its body, where it can be called with any object as self; call it on an instance", cl.Name, r)
					break
				}
			}
		}
	}
}
