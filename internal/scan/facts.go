package scan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// The types in this file mirror the JSON lines that
// python/cacheon_runtime/astfacts.py writes. That output is untrusted:
// parseFacts decodes it strictly and checks every bound the rules rely on.

// factsHeader is the first line of the script's output.
type factsHeader struct {
	Python string   `json:"python"`
	Stdlib []string `json:"stdlib"`
	// Importable lists every top-level module name the interpreter can
	// import (standard library, built-ins, sys.path and site directories).
	Importable []string `json:"importable"`
	// Submodules lists the real submodules (dotted) of the packages the
	// request named: the policy's allowed modules.
	Submodules []string `json:"submodules"`
}

// fileFacts is one output line per source, in input order.
type fileFacts struct {
	Path       string       `json:"path"`
	Error      *parseError  `json:"error"`
	Imports    []importFact `json:"imports"`
	Calls      []callFact   `json:"calls"`
	Attributes []attrFact   `json:"attributes"`
	Stores     []storeFact  `json:"stores"`
	Names      []nameFact   `json:"names"`
	Aliases    []aliasFact  `json:"aliases"`
	Flows      []flowFact   `json:"flows"`
	Classes    []classFact  `json:"classes"`
	Methods    []methodFact `json:"methods"`
	// The facts of python/cacheon_runtime/asttyping.py (typefacts.go).
	TypeNames    []typeNameFact     `json:"type_names"`
	TypeChecking []typeCheckingFact `json:"type_checking"`
	Annotations  [][]int            `json:"annotations"`
	// TypeCalls are the calls type(x) whose result is used for its
	// identity alone (typefacts.go).
	TypeCalls []typeNameFact `json:"type_calls"`
	// Free are the names the file reads that no statement of it binds
	// (astscope.free_names), the first read of each.
	Free []freeFact `json:"free"`
	Asm  []asmFact  `json:"asm"` // inline assembly (clock.go)
}

// freeFact is a name read and bound nowhere in its file.
type freeFact struct {
	Name string `json:"name"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

// parseError is a source that ast.parse rejected.
type parseError struct {
	Line int    `json:"line"`
	Col  int    `json:"col"`
	Msg  string `json:"msg"`
}

// importFact is one "import m [as a]" alias or one "from m import ..."
// statement. Module is "" for "from . import x"; Level counts the dots.
// Top is set for a statement directly in the module body (not nested in a
// def, class, if, try, loop or with), which runs before any later line.
type importFact struct {
	Module string       `json:"module"`
	Level  int          `json:"level"`
	From   bool         `json:"from"`
	AsName string       `json:"asname"`
	Names  []importName `json:"names"`
	Top    bool         `json:"top"`
	Line   int          `json:"line"`
	Col    int          `json:"col"`
}

// importName is one alias of a from-import; Name may be "*".
type importName struct {
	Name   string `json:"name"`
	AsName string `json:"asname"`
}

// callFact is a call whose callee is a bare name, f(...). Target is the
// dotted chain of the first argument when it is a name chain (a
// getattr(obj, "name") link counts as obj.name); otherwise TargetRoots are
// the names the first argument's object may come from. NameArg is the
// second argument when it is a string literal (NameLiteral).
type callFact struct {
	Func        string   `json:"func"`
	NArgs       int      `json:"nargs"`
	NKeywords   int      `json:"nkeywords"`
	Starred     bool     `json:"starred"`
	Target      string   `json:"target"`
	TargetRoots []string `json:"target_roots"`
	NameLiteral bool     `json:"name_literal"`
	NameArg     string   `json:"name_arg"`
	// TargetReceiver is the method (1-based index into Methods) whose
	// receiver the first argument is, when it is a bare name; else 0.
	TargetReceiver int  `json:"target_receiver"`
	Local          bool `json:"local"`
	// Decorator: the call is a whole decorator expression of a def or
	// class statement (@wraps(f)).
	Decorator bool `json:"decorator"`
	// OfResult: what is called is the result of calling Func
	// (type(x)(name, bases, namespace)); NArgs and the rest are the outer
	// call's.
	OfResult    bool `json:"of_result"`
	ModuleLevel bool `json:"module_level"`
	Line        int  `json:"line"`
	Col         int  `json:"col"`
}

// attrFact is a maximal attribute chain: Base is the root name ("" when the
// chain starts at a call, subscript or literal) and Attrs the attribute
// names in source order. A getattr(obj, "name") link counts as obj.name.
// Receiver is the method whose receiver Base is (see methodFact); RootCall
// names the bare-name function when the chain starts at a call of one
// (type(x).m, super().m), and RootArg the method whose receiver that call
// is bound to (super() in a method: the method; super(C, x) and type(x):
// x's). Called says the chain is called directly, Arg0 the method whose
// receiver the call's first argument is. Format marks the attribute names
// a literal format string's replacement field reads ("{0.__class__}").
type attrFact struct {
	Base        string   `json:"base"`
	Attrs       []string `json:"attrs"`
	Ctx         string   `json:"ctx"`
	ModuleLevel bool     `json:"module_level"`
	Receiver    int      `json:"receiver"`
	RootCall    string   `json:"root_call"`
	RootArg     int      `json:"root_arg"`
	Called      bool     `json:"called"`
	NArgs       int      `json:"nargs"`
	NKeywords   int      `json:"nkeywords"`
	Arg0        int      `json:"arg0"`
	// Starred: the call passes *args or **kwargs.
	Starred bool `json:"starred"`
	// Decorator: the chain, or its call when Called, is a whole
	// decorator expression of a def or class statement (@typing.final,
	// @functools.wraps(f)).
	Decorator bool `json:"decorator"`
	// Target is the dotted chain of the call's first positional argument
	// when Called and it is a name chain (typing.final(f): "f").
	Target string `json:"target"`
	Format bool   `json:"format"`
	// String marks a string constant or a keyword argument's name that is
	// exactly a dunder name (Attrs holds it): data that a class built from
	// a dict, a match pattern's __match_args__ or a getattr turns into an
	// attribute access.
	String bool `json:"string"`
	// Slots: the string is one a class body's __slots__ assignment lists
	// (its value the string or a tuple, list or set literal of strings).
	Slots bool `json:"slots"`
	// Dynamic marks a .format/.format_map call on something other than a
	// string literal: its fields cannot be read.
	Dynamic bool `json:"dynamic"`
	// Local: Base is a builtin's name an enclosing function binds.
	Local bool `json:"local"`
	Line  int  `json:"line"`
	Col   int  `json:"col"`
}

// storeFact is an attribute or subscript that is assigned, augmented or
// deleted; Root is the name the target chain starts at ("" if none), and
// when there is none, Roots are the names the chain's starting object may
// come from (a call's callee, a container literal's elements, ...).
// Links are the attribute names and subscripts ("[]") from the root to the
// stored place, root side first; Receiver is the method whose receiver
// Root is (see methodFact).
type storeFact struct {
	Root     string   `json:"root"`
	Target   string   `json:"target"`
	Roots    []string `json:"roots"`
	Links    []string `json:"links"`
	Receiver int      `json:"receiver"`
	Ctx      string   `json:"ctx"`
	Line     int      `json:"line"`
	Col      int      `json:"col"`
}

// nameFact is a bare name that is neither a callee nor the root of an
// attribute chain (those are reported by callFact and attrFact). Ctx "def"
// marks a name bound by a def, class, parameter or type parameter, "del"
// also one unbound at the end of an except handler. Kind says what a "def"
// binds ("function", "class", "param", "typeparam"). Value is what an
// assignment binds a "store" name to, when it is a call or a literal,
// reported only for names used as objects (roots of attribute chains and
// stores, getattr/setattr/delattr targets). Decorators are those of a
// decorated def or class.
type nameFact struct {
	Name       string          `json:"name"`
	Ctx        string          `json:"ctx"`
	Kind       string          `json:"kind"`
	Decorators []decoratorFact `json:"decorators"`
	Value      *valueFact      `json:"value"`
	// Local: a load of a builtin's name that an enclosing function binds
	// (a parameter or a local), so it is not the builtin.
	Local bool `json:"local"`
	// Decorator: a load that is a whole decorator expression of a def or
	// class statement (@final).
	Decorator bool `json:"decorator"`
	Line      int  `json:"line"`
	Col       int  `json:"col"`
}

// aliasFact is a name bound, by an assignment, an assignment expression, a
// for target or a match capture, to what one of Chains holds (dotted name
// chains, their first component a bare name). Aliases are file-wide: the
// scanner does not follow scopes or control flow.
type aliasFact struct {
	Name   string   `json:"name"`
	Chains []string `json:"chains"`
	Line   int      `json:"line"`
	Col    int      `json:"col"`
}

// flowFact is a dotted name chain whose object goes where no name follows
// it; Where says how (see flowPlaces). Callee names the bare-name function
// the chain is the first positional argument of, if any.
type flowFact struct {
	Chain  string `json:"chain"`
	Where  string `json:"where"`
	Callee string `json:"callee"`
	Line   int    `json:"line"`
	Col    int    `json:"col"`
}

// flowPlaces describes each place a flow fact may name, for messages.
var flowPlaces = map[string]string{
	"container": "is put in a container literal or used as an index",
	"argument":  "is passed as an argument",
	"return":    "is returned",
	"default":   "is a parameter default",
	"stored":    "is stored in an attribute or item",
	"match":     "is a match subject",
	// stray places (astflow._stray_flows: any place but a call, a
	// subscript, a test of truth or identity, a statement, an exception
	// class, or one of the above)
	"operand":    "is an operand of an operator or a comparison other than is",
	"annotation": "is an annotation",
	"slice":      "is a slice bound",
	"message":    "is an assert message or a raised exception",
	"format":     "is formatted into a string",
	"pattern":    "is a match value or class pattern",
	"base":       "has an attribute read past a conditional, a boolean operator or an assignment expression",
	"expression": "is used where the scanner does not follow it",
}

// Bounds on what the script may claim.
const (
	maxPosition   = 1 << 30 // lines and columns
	maxLevel      = 1 << 10 // relative-import dots
	maxIdentifier = 4096    // bytes in one name or module
	maxChain      = 1 << 16 // bytes in one dotted chain of an alias or flow
	maxMessage    = 4096    // bytes in one parser message
	// maxHeaderNames bounds each module list of the header.
	maxHeaderNames = 1 << 16
)

// factsBatch is the decoded output of one interpreter run.
type factsBatch struct {
	header factsHeader
	files  []fileFacts
}

// parseFacts decodes the script's output for a run over sources named
// paths. Only complete lines count; a trailing fragment without a newline
// is an error (callers cut a crashed run's output at the last newline).
// Fewer file lines than paths is not an error: the caller knows whether
// the run finished. Every file line must name the path sent at its index.
func parseFacts(out []byte, paths []string) (*factsBatch, error) {
	if len(out) > 0 && out[len(out)-1] != '\n' {
		return nil, errors.New("parse facts: output does not end in a newline")
	}
	lines := bytes.Split(out, []byte{'\n'})
	lines = lines[:len(lines)-1] // the empty piece after the last newline
	if len(lines) == 0 {
		return nil, errors.New("parse facts: no header line")
	}
	b := &factsBatch{}
	if err := decodeStrict(lines[0], &b.header); err != nil {
		return nil, fmt.Errorf("parse facts: header: %w", err)
	}
	if err := checkHeader(&b.header); err != nil {
		return nil, fmt.Errorf("parse facts: header: %w", err)
	}
	if len(lines)-1 > len(paths) {
		return nil, fmt.Errorf("parse facts: %d file lines for %d sources", len(lines)-1, len(paths))
	}
	for i, line := range lines[1:] {
		var f fileFacts
		if err := decodeStrict(line, &f); err != nil {
			return nil, fmt.Errorf("parse facts: file %d: %w", i, err)
		}
		if f.Path != paths[i] {
			return nil, fmt.Errorf("parse facts: file %d is %q, want %q", i, f.Path, paths[i])
		}
		if err := checkFile(&f); err != nil {
			return nil, fmt.Errorf("parse facts: %q: %w", f.Path, err)
		}
		b.files = append(b.files, f)
	}
	return b, nil
}

// decodeStrict decodes exactly one JSON value with no unknown fields.
func decodeStrict(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return errors.New("decode: trailing data after the JSON value")
	}
	return nil
}

func checkHeader(h *factsHeader) error {
	if h.Python == "" || len(h.Python) > 64 {
		return errors.New("missing or oversized interpreter version")
	}
	for _, list := range []struct {
		what   string
		names  []string
		dotted bool
	}{{"stdlib", h.Stdlib, false}, {"importable", h.Importable, false}, {"submodule", h.Submodules, true}} {
		if len(list.names) > maxHeaderNames {
			return fmt.Errorf("%d %s names (at most %d)", len(list.names), list.what, maxHeaderNames)
		}
		for _, m := range list.names {
			if err := checkIdent(m, list.dotted); err != nil {
				return fmt.Errorf("%s name: %w", list.what, err)
			}
		}
	}
	return nil
}

// checkFile validates one file line: positions in range, contexts known,
// names non-empty and bounded, no facts next to a parse error.
func checkFile(f *fileFacts) error {
	if f.Error != nil {
		if len(f.Imports)+len(f.Calls)+len(f.Attributes)+len(f.Stores)+len(f.Names)+len(f.Aliases)+len(f.Flows)+len(f.Classes)+len(f.Methods)+
			len(f.TypeNames)+len(f.TypeChecking)+len(f.Annotations)+len(f.TypeCalls)+len(f.Asm) != 0 {
			return errors.New("facts next to a parse error")
		}
		if len(f.Error.Msg) > maxMessage {
			return errors.New("parse error message too long")
		}
		return checkPos(f.Error.Line, f.Error.Col)
	}
	for _, im := range f.Imports {
		if err := checkImport(im); err != nil {
			return err
		}
	}
	if err := checkAsms(f.Asm); err != nil {
		return err
	}
	for _, c := range f.Calls {
		if err := firstErr(checkIdent(c.Func, false), checkPos(c.Line, c.Col), checkCount(c.NArgs), checkCount(c.NKeywords)); err != nil {
			return fmt.Errorf("call: %w", err)
		}
		if len(c.Target) > maxChain || len(c.NameArg) > maxIdentifier {
			return errors.New("call: argument too long")
		}
		if c.Target != "" {
			if err := checkChain(c.Target); err != nil {
				return fmt.Errorf("call: %w", err)
			}
		}
		if err := firstErr(checkNames(c.TargetRoots), checkMethodRef(f, c.TargetReceiver)); err != nil {
			return fmt.Errorf("call: %w", err)
		}
	}
	for _, a := range f.Attributes {
		if len(a.Attrs) == 0 {
			return errors.New("attribute: empty chain")
		}
		if err := firstErr(checkCtx(a.Ctx), checkPos(a.Line, a.Col)); err != nil {
			return fmt.Errorf("attribute: %w", err)
		}
		if a.Base != "" {
			if err := checkIdent(a.Base, false); err != nil {
				return fmt.Errorf("attribute: %w", err)
			}
		}
		for _, name := range a.Attrs {
			if err := checkIdent(name, false); err != nil {
				return fmt.Errorf("attribute: %w", err)
			}
		}
		if err := firstErr(checkMethodRef(f, a.Receiver), checkMethodRef(f, a.RootArg), checkMethodRef(f, a.Arg0)); err != nil {
			return fmt.Errorf("attribute: %w", err)
		}
		if a.RootCall != "" {
			if err := checkIdent(a.RootCall, false); err != nil {
				return fmt.Errorf("attribute: %w", err)
			}
		}
		if a.Target != "" {
			if err := checkChain(a.Target); err != nil {
				return fmt.Errorf("attribute: %w", err)
			}
		}
	}
	for _, s := range f.Stores {
		if s.Ctx == "load" || len(s.Target) > 1<<20 {
			return errors.New("store: bad context or target")
		}
		if err := firstErr(checkCtx(s.Ctx), checkPos(s.Line, s.Col)); err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if s.Root != "" {
			if err := checkIdent(s.Root, false); err != nil {
				return fmt.Errorf("store: %w", err)
			}
		}
		if err := firstErr(checkNames(s.Roots), checkLinks(s.Links), checkMethodRef(f, s.Receiver)); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	for _, n := range f.Free {
		if err := firstErr(checkIdent(n.Name, false), checkPos(n.Line, n.Col)); err != nil {
			return fmt.Errorf("free name: %w", err)
		}
	}
	for _, n := range f.Names {
		ctx := checkCtx(n.Ctx)
		if n.Ctx == "def" {
			ctx = nil
		}
		if err := firstErr(checkIdent(n.Name, false), ctx, checkPos(n.Line, n.Col), checkNameKind(n)); err != nil {
			return fmt.Errorf("name: %w", err)
		}
	}
	for _, a := range f.Aliases {
		if len(a.Chains) == 0 {
			return errors.New("alias: no chains")
		}
		if err := firstErr(checkIdent(a.Name, false), checkPos(a.Line, a.Col)); err != nil {
			return fmt.Errorf("alias: %w", err)
		}
		for _, ch := range a.Chains {
			if err := checkChain(ch); err != nil {
				return fmt.Errorf("alias: %w", err)
			}
		}
	}
	for _, fl := range f.Flows {
		if _, ok := flowPlaces[fl.Where]; !ok {
			return fmt.Errorf("flow: unknown place %q", fl.Where)
		}
		if err := firstErr(checkChain(fl.Chain), checkPos(fl.Line, fl.Col)); err != nil {
			return fmt.Errorf("flow: %w", err)
		}
		if fl.Callee != "" {
			if err := checkIdent(fl.Callee, false); err != nil {
				return fmt.Errorf("flow: %w", err)
			}
		}
	}
	if err := checkTypeFacts(f); err != nil {
		return err
	}
	return checkClasses(f)
}

// checkNames validates a list of bare names.
func checkNames(names []string) error {
	for _, n := range names {
		if err := checkIdent(n, false); err != nil {
			return err
		}
	}
	return nil
}

// checkChain validates a dotted name chain: like a dotted module name, but
// it may be longer (an attribute chain can repeat itself, F.torch.nn...).
func checkChain(s string) error {
	if len(s) > maxChain {
		return fmt.Errorf("chain of %d bytes", len(s))
	}
	if len(s) <= maxIdentifier {
		return checkIdent(s, true)
	}
	for _, part := range strings.Split(s, ".") {
		if err := checkIdent(part, false); err != nil {
			return err
		}
	}
	return nil
}

func checkImport(im importFact) error {
	if im.Level < 0 || im.Level > maxLevel {
		return errors.New("import: level out of range")
	}
	if err := checkPos(im.Line, im.Col); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	if !im.From {
		if im.Level != 0 || len(im.Names) != 0 {
			return errors.New("import: plain import with level or names")
		}
		if err := checkIdent(im.Module, true); err != nil {
			return fmt.Errorf("import: %w", err)
		}
		if im.AsName != "" {
			return checkIdent(im.AsName, false)
		}
		return nil
	}
	if im.AsName != "" || len(im.Names) == 0 || (im.Module == "" && im.Level == 0) {
		return errors.New("import: malformed from-import")
	}
	if im.Module != "" {
		if err := checkIdent(im.Module, true); err != nil {
			return fmt.Errorf("import: %w", err)
		}
	}
	for _, n := range im.Names {
		if n.Name == "*" && n.AsName == "" {
			continue
		}
		if err := checkIdent(n.Name, false); err != nil {
			return fmt.Errorf("import: %w", err)
		}
		if n.AsName != "" {
			if err := checkIdent(n.AsName, false); err != nil {
				return fmt.Errorf("import: %w", err)
			}
		}
	}
	return nil
}

// checkIdent accepts a non-empty bounded name without dots, spaces or
// control characters (dots allowed when dotted is set, but not empty
// components). It does not re-implement Python's identifier grammar; it
// guarantees what the rules and messages rely on.
func checkIdent(s string, dotted bool) error {
	if s == "" || len(s) > maxIdentifier {
		return fmt.Errorf("bad name length %d", len(s))
	}
	prevDot := true
	for _, r := range s {
		switch {
		case r == '.' && dotted && !prevDot:
			prevDot = true
			continue
		case r == '.', !unicode.IsPrint(r), r == ' ', r == 0xfffd, r == '[', r == ']', r == '*':
			return fmt.Errorf("bad character %q in name %q", r, s)
		}
		prevDot = false
	}
	if prevDot {
		return fmt.Errorf("bad dotted name %q", s)
	}
	return nil
}

func checkPos(line, col int) error {
	if line < 0 || col < 0 || line > maxPosition || col > maxPosition {
		return fmt.Errorf("position %d:%d out of range", line, col)
	}
	return nil
}

func checkCount(n int) error {
	if n < 0 || n > maxPosition {
		return fmt.Errorf("count %d out of range", n)
	}
	return nil
}

func checkCtx(ctx string) error {
	switch ctx {
	case "load", "store", "del":
		return nil
	}
	return fmt.Errorf("unknown context %q", ctx)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
