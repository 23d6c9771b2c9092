package scan

import (
	"errors"
	"fmt"
)

// The facts of python/cacheon_runtime/astscope.py: classes, methods and
// receivers, which the ownership rules (owner.go) judge.

// classFact is a class statement: its bases (name chains; "" for a base
// that is not one), whether it has keywords (metaclass=...), the names of
// its own methods its body uses as plain names (refs), its metaclass, and whether it is
// directly in the module body (Top), and its decorators.
type classFact struct {
	Name     string   `json:"name"`
	Bases    []string `json:"bases"`
	Keywords bool     `json:"keywords"`
	// Metaclass is the name chain of a metaclass= keyword ("" when none;
	// a keyword that is not a name chain sets Keywords).
	Metaclass  string          `json:"metaclass"`
	Decorators []decoratorFact `json:"decorators"`
	Refs       []string        `json:"refs"`
	Top        bool            `json:"top"`
	Line       int             `json:"line"`
	Col        int             `json:"col"`
}

// methodFact is a function defined directly in a class body. Class is the
// 1-based index of its class in fileFacts.Classes. Receiver indexes in
// other facts are 1-based indexes into fileFacts.Methods: the bare name is
// the method's first positional parameter, seen through Python's scopes,
// and bound nowhere else in the method.
type methodFact struct {
	Class      int             `json:"class"`
	Name       string          `json:"name"`
	Decorators []decoratorFact `json:"decorators"`
	// Required is how many arguments a call must pass for the body to
	// run (positional and keyword-only parameters without a default,
	// self included).
	Required int `json:"required"`
	Line     int `json:"line"`
	Col      int `json:"col"`
}

// decoratorFact is one decorator: the name chain it is (or calls, when
// Call is set); Chain is "" for any other expression.
type decoratorFact struct {
	Chain string `json:"chain"`
	Call  bool   `json:"call"`
}

// valueFact is what an assignment binds a name to: "call" (of Callee, a
// name chain, "" when the callee is not one), "literal" (a display,
// comprehension, constant or lambda) or "other".
type valueFact struct {
	Kind   string `json:"kind"`
	Callee string `json:"callee"`
}

// checkClasses validates the class and method facts of a file.
func checkClasses(f *fileFacts) error {
	for _, c := range f.Classes {
		if err := firstErr(checkIdent(c.Name, false), checkPos(c.Line, c.Col), checkNames(c.Refs)); err != nil {
			return fmt.Errorf("class: %w", err)
		}
		for _, b := range c.Bases {
			if b == "" {
				continue
			}
			if err := checkChain(b); err != nil {
				return fmt.Errorf("class: %w", err)
			}
		}
		if err := checkDecorators(c.Decorators); err != nil {
			return fmt.Errorf("class: %w", err)
		}
	}
	for _, m := range f.Methods {
		if m.Class < 1 || m.Class > len(f.Classes) {
			return fmt.Errorf("method: class %d out of range", m.Class)
		}
		if err := firstErr(checkIdent(m.Name, false), checkPos(m.Line, m.Col), checkCount(m.Required)); err != nil {
			return fmt.Errorf("method: %w", err)
		}
		if err := checkDecorators(m.Decorators); err != nil {
			return fmt.Errorf("method: %w", err)
		}
	}
	return nil
}

// checkDecorators validates decorator facts.
func checkDecorators(ds []decoratorFact) error {
	for _, d := range ds {
		if d.Chain == "" {
			continue
		}
		if err := checkChain(d.Chain); err != nil {
			return fmt.Errorf("decorator: %w", err)
		}
	}
	return nil
}

// checkMethodRef validates a receiver reference: 0 or a method's index.
func checkMethodRef(f *fileFacts, idx int) error {
	if idx < 0 || idx > len(f.Methods) {
		return fmt.Errorf("method reference %d out of range", idx)
	}
	return nil
}

// checkLinks validates the links of a store target.
func checkLinks(links []string) error {
	for _, l := range links {
		if l == "[]" {
			continue
		}
		if err := checkIdent(l, false); err != nil {
			return err
		}
	}
	return nil
}

// checkNameKind validates a name fact's kind and value.
func checkNameKind(n nameFact) error {
	switch {
	case n.Ctx == "def" && n.Kind != "function" && n.Kind != "class" && n.Kind != "param" && n.Kind != "typeparam":
		return fmt.Errorf("unknown definition kind %q", n.Kind)
	case n.Ctx != "def" && n.Kind != "":
		return errors.New("kind on a name that is not a definition")
	case len(n.Decorators) > 0 && n.Kind != "function" && n.Kind != "class":
		return errors.New("decorators on a name that is not a def or class")
	}
	if err := checkDecorators(n.Decorators); err != nil {
		return err
	}
	switch {
	case n.Value == nil:
		return nil
	case n.Ctx != "store":
		return errors.New("value on a name that is not stored")
	}
	switch n.Value.Kind {
	case "call":
		if n.Value.Callee == "" {
			return nil
		}
		return checkChain(n.Value.Callee)
	case "literal", "other":
		if n.Value.Callee != "" {
			return errors.New("callee on a value that is not a call")
		}
		return nil
	}
	return fmt.Errorf("unknown value kind %q", n.Value.Kind)
}
