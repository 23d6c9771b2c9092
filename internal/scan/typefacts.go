package scan

import (
	"errors"
	"fmt"
	"strings"
)

// Typing idioms: the facts of python/cacheon_runtime/asttyping.py and the rules that
// let honest typing code through without opening what they guard.
//
//   - The builtin type as a value builds classes from a namespace (see
//     classbuild.go), so a bare "type" is refused. Two places only hand
//     over its identity: an annotation, and the class argument of the
//     builtin isinstance/issubclass (alone or inside tuple displays). An
//     annotation is never called: under "from __future__ import
//     annotations" it is never even evaluated, and otherwise its value is
//     stored in __annotations__, which only dunder access,
//     typing.get_type_hints or inspect read (all refused). "type" is
//     allowed there when it is reached through nothing but list and tuple
//     displays and subscripts of typing's or collections.abc's generics
//     or of the builtin generics (Callable[[type], type], Dict[str,
//     type]): a subscript of anything else (a bundle object's
//     __getitem__ or __class_getitem__), a call or an operator would hand
//     type to code that can call it. A class body's annotated assignment
//     counts only under the future import: without it,
//     dataclasses.fields(C)[i].type returns the annotation's value. A call
//     of type keeps its own rules wherever it stands, annotations
//     included.
//   - Imports under "if TYPE_CHECKING:" never run: typing.TYPE_CHECKING
//     is False at run time, and no bundle code can store into typing or
//     into an imported module (global-mutation). So an import the policy
//     refuses (import-not-allowed) is let through in the body of an if
//     directly in the module body, with no else branch, whose body holds
//     only imports (and pass or strings), whose test is the name
//     TYPE_CHECKING that only "from typing import TYPE_CHECKING" binds
//     (directly in the module body, before the if; nothing in the file
//     assigns, deletes or defines the name) or R.TYPE_CHECKING with R
//     bound only to the typing module the same way, when no bundle
//     module is called like that name (importing pkg.TYPE_CHECKING binds
//     pkg's TYPE_CHECKING to a module) and no name the if imports is used
//     in the file outside annotations (strings included). Every other
//     rule still applies to those imports.
//   - type(x) of a class x is its metaclass, type itself for most, so a
//     one-argument call of the builtin type is allowed only where its
//     result is used for its identity (TypeCalls): an operand of is/is
//     not, read for __name__, __qualname__ or __module__, or the class
//     argument of the builtin isinstance/issubclass. Anywhere else (a
//     tuple, a return, an argument, an attribute, =='s other operand,
//     called) it would hand type to code that calls it with a namespace
//     (check.go; session 21's type_result_laundered).

// typeNameFact is a bare name type (a load) standing where only its
// identity counts, or a call type(x) whose result does (TypeCalls, whose
// Where may also be "identity": with is/is not or for its name): Where "annotation", in an annotation of Place
// ("param", "return", or the scope of an annotated assignment: "module",
// "class", "function"), inside the slices of the subscripts named by
// Generics (outermost first); or Where "classinfo", the class argument of
// a two-argument call of the bare name Callee (isinstance, issubclass) at
// CallLine:CallCol.
type typeNameFact struct {
	Line     int      `json:"line"`
	Col      int      `json:"col"`
	Where    string   `json:"where"`
	Place    string   `json:"place"`
	Generics []string `json:"generics"`
	Callee   string   `json:"callee"`
	CallLine int      `json:"call_line"`
	CallCol  int      `json:"call_col"`
}

// typeCheckingFact is an if statement directly in the module body with no
// else branch whose test is the name chain Test and whose body holds only
// imports (at Imports: line, col), pass and strings.
type typeCheckingFact struct {
	Test    string  `json:"test"`
	Line    int     `json:"line"`
	Col     int     `json:"col"`
	Imports [][]int `json:"imports"`
}

// checkTypeFacts validates the facts of asttyping.py.
func checkTypeFacts(f *fileFacts) error {
	for _, t := range f.TypeNames {
		if t.Where == "identity" {
			return errors.New("type name: an identity use (a type call's form)")
		}
		if err := checkTypeName(t); err != nil {
			return fmt.Errorf("type name: %w", err)
		}
	}
	for _, t := range f.TypeCalls {
		if t.Where == "annotation" {
			return errors.New("type call: in an annotation")
		}
		if err := checkTypeName(t); err != nil {
			return fmt.Errorf("type call: %w", err)
		}
	}
	for _, tc := range f.TypeChecking {
		if err := firstErr(checkChain(tc.Test), checkPos(tc.Line, tc.Col)); err != nil {
			return fmt.Errorf("type checking: %w", err)
		}
		for _, p := range tc.Imports {
			if len(p) != 2 {
				return errors.New("type checking: an import position is not line, col")
			}
			if err := checkPos(p[0], p[1]); err != nil {
				return fmt.Errorf("type checking: %w", err)
			}
		}
	}
	for _, s := range f.Annotations {
		if len(s) != 4 {
			return errors.New("annotation: a span is not line, col, end line, end col")
		}
		if err := firstErr(checkPos(s[0], s[1]), checkPos(s[2], s[3])); err != nil {
			return fmt.Errorf("annotation: %w", err)
		}
		if (pos{s[2], s[3]}).before(pos{s[0], s[1]}) {
			return errors.New("annotation: a span ends before it starts")
		}
	}
	return nil
}

// checkTypeName validates one type name fact, or a type call's (whose
// Where may also be "identity": no call, no annotation fields).
func checkTypeName(t typeNameFact) error {
	if err := checkPos(t.Line, t.Col); err != nil {
		return err
	}
	switch t.Where {
	case "annotation":
		switch t.Place {
		case "param", "return", "module", "class", "function":
		default:
			return fmt.Errorf("unknown place %q", t.Place)
		}
		if t.Callee != "" || t.CallLine != 0 || t.CallCol != 0 {
			return errors.New("an annotation with a call")
		}
		for _, g := range t.Generics {
			if err := checkChain(g); err != nil {
				return err
			}
		}
	case "identity":
		if t.Place != "" || len(t.Generics) != 0 || t.Callee != "" || t.CallLine != 0 || t.CallCol != 0 {
			return errors.New("an identity use with other fields")
		}
	case "classinfo":
		if t.Callee != "isinstance" && t.Callee != "issubclass" {
			return fmt.Errorf("unknown callee %q", t.Callee)
		}
		if t.Place != "" || len(t.Generics) != 0 {
			return errors.New("a class argument with an annotation's fields")
		}
		if err := checkPos(t.CallLine, t.CallCol); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown place %q", t.Where)
	}
	return nil
}

// builtinGenerics are the builtin classes an annotation subscripts with
// types (list[type]); their __class_getitem__ only records its argument.
var builtinGenerics = map[string]bool{
	"type": true, "list": true, "tuple": true, "dict": true, "set": true, "frozenset": true,
}

// typeIdentity reports whether a load of the builtin type at p stands
// where only its identity counts (see the top of this file).
func (fc *fileCheck) typeIdentity(p pos) bool {
	for _, t := range fc.ff.TypeNames {
		if t.Line != p.line || t.Col != p.col {
			continue
		}
		switch t.Where {
		case "classinfo":
			return fc.classinfoCall(t)
		case "annotation":
			if t.Place == "class" && !fc.futureAnnotations() {
				return false
			}
			for _, g := range t.Generics {
				if !fc.typingGeneric(g) {
					return false
				}
			}
			return true
		}
	}
	return false
}

// classinfoCall reports whether the call a classinfo type name stands in
// is the builtin isinstance or issubclass with two plain arguments.
func (fc *fileCheck) classinfoCall(t typeNameFact) bool {
	if !fc.surelyBuiltin(t.Callee) || fc.submoduleNamed(t.Callee) {
		return false
	}
	for _, c := range fc.ff.Calls {
		if c.Func == t.Callee && !c.OfResult && c.Line == t.CallLine && c.Col == t.CallCol {
			return !c.Local && c.NArgs == 2 && c.NKeywords == 0 && !c.Starred
		}
	}
	return false
}

// typingGeneric reports whether a subscripted name chain of an annotation
// is one of typing's or collections.abc's names, imported by this file
// itself (a bundle module that re-exports one may rebind it by a def or
// class statement), or a builtin generic nothing in the file rebinds; and
// no bundle module takes its root's name (see submoduleNamed: a package's
// submodule "typing" would replace the module).
func (fc *fileCheck) typingGeneric(chain string) bool {
	root, rest := splitRoot(chain)
	if fc.submoduleNamed(root) {
		return false
	}
	if len(fc.binds[root]) == 0 {
		return rest == "" && builtinGenerics[root] && fc.surelyBuiltin(root)
	}
	targets := fc.checker.imports[fc.rel][root]
	if fc.rebound[root] || len(fc.checker.aliases[fc.rel][root]) > 0 || len(targets) == 0 {
		return false
	}
	for _, abs := range targets {
		name := joinName(abs, rest)
		if fc.ix.isLocal(abs) || name == "typing" || name == "collections.abc" ||
			!(hasDottedPrefix(name, "typing") || hasDottedPrefix(name, "collections.abc")) {
			return false
		}
	}
	return true
}

// futureAnnotations reports "from __future__ import annotations" in the
// module body (a future import anywhere else does not compile).
func (fc *fileCheck) futureAnnotations() bool {
	for _, im := range fc.ff.Imports {
		if !im.From || im.Level != 0 || im.Module != "__future__" || !im.Top {
			continue
		}
		for _, n := range im.Names {
			if n.Name == "annotations" {
				return true
			}
		}
	}
	return false
}

// typeCheckingImports returns the positions of the imports that never run
// because they sit under "if TYPE_CHECKING:" (see the top of this file).
func (fc *fileCheck) typeCheckingImports() map[pos]bool {
	out := make(map[pos]bool)
	for _, tc := range fc.ff.TypeChecking {
		at := pos{tc.Line, tc.Col}
		if !fc.readsTypeChecking(tc.Test, at) {
			continue
		}
		block := make(map[pos]bool)
		for _, p := range tc.Imports {
			block[pos{p[0], p[1]}] = true
		}
		ok := true
		var names []string
		for _, im := range fc.ff.Imports {
			if !block[pos{im.Line, im.Col}] {
				continue
			}
			if im.Top || !at.before(pos{im.Line, im.Col}) {
				ok = false // not the if's body
			}
			names = append(names, importedLocals(im)...)
		}
		for _, n := range names {
			if n == "*" || fc.usedOutsideAnnotations(n) {
				ok = false
			}
		}
		if ok {
			for p := range block {
				out[p] = true
			}
		}
	}
	return out
}

// importedLocals returns the names an import fact binds.
func importedLocals(im importFact) []string {
	if !im.From {
		if im.AsName != "" {
			return []string{im.AsName}
		}
		root, _ := splitRoot(im.Module)
		return []string{root}
	}
	var out []string
	for _, n := range im.Names {
		if n.AsName != "" {
			out = append(out, n.AsName)
		} else {
			out = append(out, n.Name)
		}
	}
	return out
}

// readsTypeChecking reports whether an if's test at p, a name chain,
// reads typing.TYPE_CHECKING and nothing else.
func (fc *fileCheck) readsTypeChecking(test string, p pos) bool {
	if fc.ix.isLocal("typing") {
		return false
	}
	root, rest := splitRoot(test)
	want := "typing"
	switch {
	case test == "TYPE_CHECKING":
		want = "typing.TYPE_CHECKING"
	case rest != "TYPE_CHECKING":
		return false
	}
	if fc.rebound[root] || len(fc.binds[root]) == 0 || fc.submoduleNamed(root) {
		return false
	}
	for _, b := range fc.binds[root] {
		if b != (binding{name: want}) {
			return false
		}
	}
	early := false
	for _, im := range fc.ff.Imports {
		binds := false
		for _, n := range importedLocals(im) {
			binds = binds || n == root
		}
		if !binds {
			continue
		}
		if test == "TYPE_CHECKING" {
			if !im.From || im.Level != 0 || im.Module != "typing" || !fromImportsAs(im, "TYPE_CHECKING", root) {
				return false
			}
		} else if im.From || im.Module != "typing" {
			return false
		}
		if im.Top && (pos{im.Line, im.Col}).before(p) {
			early = true
		}
	}
	return early
}

// submoduleNamed reports a bundle module, or an import of a bundle module
// (a file or not: an empty directory is a namespace package), with a
// component called name. Importing a submodule binds its name in its
// package's namespace, over what an import bound there
// ("import pkg.TYPE_CHECKING" sets pkg's TYPE_CHECKING to a module,
// which is true).
func (fc *fileCheck) submoduleNamed(name string) bool {
	for m := range fc.ix.modules {
		for _, part := range strings.Split(m, ".") {
			if part == name {
				return true
			}
		}
	}
	for rel, ff := range fc.facts {
		pkg, _ := packageOf(rel)
		for _, im := range ff.Imports {
			abs, climbs := resolve(pkg, im)
			if climbs || (im.Level == 0 && !fc.ix.isLocal(abs)) {
				continue
			}
			for _, part := range strings.Split(abs, ".") {
				if part == name {
					return true
				}
			}
			for _, n := range im.Names {
				if im.From && n.Name == name {
					return true
				}
			}
		}
	}
	return false
}

// fromImportsAs reports whether a from-import binds local, and only to
// its name name.
func fromImportsAs(im importFact, name, local string) bool {
	found := false
	for _, n := range im.Names {
		l := n.AsName
		if l == "" {
			l = n.Name
		}
		if l == local {
			if n.Name != name {
				return false
			}
			found = true
		}
	}
	return found
}

// usedOutsideAnnotations reports a bare name occurring in the file (read,
// called, the root of an attribute chain or a store, assigned, defined)
// anywhere but inside an annotation.
func (fc *fileCheck) usedOutsideAnnotations(name string) bool {
	outside := func(line, col int) bool {
		p := pos{line, col}
		for _, s := range fc.ff.Annotations {
			if !p.before(pos{s[0], s[1]}) && p.before(pos{s[2], s[3]}) {
				return false
			}
		}
		return true
	}
	for _, n := range fc.ff.Names {
		if n.Name == name && outside(n.Line, n.Col) {
			return true
		}
	}
	for _, c := range fc.ff.Calls {
		if c.Func == name && outside(c.Line, c.Col) {
			return true
		}
	}
	for _, a := range fc.ff.Attributes {
		if a.Base == name && outside(a.Line, a.Col) {
			return true
		}
	}
	for _, s := range fc.ff.Stores {
		if s.Root == name && outside(s.Line, s.Col) {
			return true
		}
	}
	for _, a := range fc.ff.Aliases {
		if a.Name == name {
			return true
		}
		for _, ch := range a.Chains {
			if r, _ := splitRoot(ch); r == name {
				return true
			}
		}
	}
	for _, fl := range fc.ff.Flows {
		if r, _ := splitRoot(fl.Chain); r == name && outside(fl.Line, fl.Col) {
			return true
		}
	}
	return false
}

// typeCallIdentity reports whether the call type(x) at p has its result
// used for its identity alone (asttyping.py's type_calls): with is/is not
// or for its name, or as the class argument of the builtin isinstance or
// issubclass (a bundle's own isinstance would receive it).
func (fc *fileCheck) typeCallIdentity(p pos) bool {
	for _, t := range fc.ff.TypeCalls {
		if t.Line != p.line || t.Col != p.col {
			continue
		}
		switch t.Where {
		case "identity":
			return true
		case "classinfo":
			return fc.classinfoCall(t)
		}
	}
	return false
}
