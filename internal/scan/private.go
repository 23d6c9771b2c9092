package scan

import "strings"

// Private attributes of objects the scanner cannot type (session 50).
//
// The attribute allow-list judges the private components of chains rooted
// at allowed modules ("torch._C" is refused unless an entry names it), and
// tensor-internals refuses a tensor's known private handles on any
// object. An object the scanner cannot type (a call's result, an item, a
// parameter) has private attributes the scanner knows nothing of: a
// tensor's pickling body handed back its storage (rt50b's
// x._reduce_ex_internal), and library objects keep modules, raw operators
// and caches behind such names. So a private attribute (_x: one leading
// underscore, not a dunder or an enum's _x_) read from such an object is
// refused unless the bundle binds an attribute or a name of that name
// itself — its own classes' and modules' privates — or it is namedtuple's
// public API.

// namedTupleAPI is the part of a namedtuple's API that starts with an
// underscore (so that it cannot clash with field names).
var namedTupleAPI = map[string]bool{
	"_replace": true, "_asdict": true, "_fields": true, "_field_defaults": true, "_make": true,
}

// isPrivate reports a name of the form _x that is not a dunder (__x__) or
// an enum-style _x_ (attributeRule's).
func isPrivate(name string) bool {
	return len(name) > 1 && name[0] == '_' && !isDunder(name) && !isSunder(name) && !strings.HasPrefix(name, "__")
}

// ownPrivateNames is every private name the bundle binds, in any file: the
// last link of an attribute store (self._cache = ...), a def, class,
// parameter or assigned name (a method _helper, a module's _table).
func ownPrivateNames(facts map[string]*fileFacts) map[string]bool {
	own := make(map[string]bool)
	for _, ff := range facts {
		for _, s := range ff.Stores {
			if n := len(s.Links); n > 0 && isPrivate(s.Links[n-1]) {
				own[s.Links[n-1]] = true
			}
		}
		for _, n := range ff.Names {
			if n.Ctx != "load" && isPrivate(n.Name) {
				own[n.Name] = true
			}
		}
	}
	return own
}

// foreignPrivate refuses the first private attribute of chain a that the
// bundle does not bind itself, where a's root is not a module (the
// allow-list judges chains rooted at modules) and no finding was made at
// its place since mark.
func (fc *fileCheck) foreignPrivate(a attrFact, chain string, mark int) {
	if a.Base != "" {
		for _, b := range fc.binds[a.Base] {
			if fc.isModule(b) {
				return
			}
		}
	}
	for i, name := range a.Attrs {
		if isDunder(name) {
			return // dunder-access judges the chain from here
		}
		if !isPrivate(name) || fc.ownPrivate[name] || namedTupleAPI[name] || (i == 0 && fc.ownedReceiver(a.Receiver)) {
			continue // (self._x: the bundle's own object, or what its class inherits: hs50c's self._parameters)
		}
		for _, f := range fc.findings[mark:] {
			if f.Line == a.Line && f.Col == a.Col {
				return
			}
		}
		fc.add(a.Line, a.Col, RulePrivateAPI,
			"use of %q reads %s, a private attribute of an object the bundle did not define (a library's internals: tensors' pickling and storage, operators' raw handles, modules kept in caches); use the public API, or give an attribute of your own another name",
			showChain(a.Base, chain), name)
		return
	}
}

// plainReceiver reports a receiver (self or cls) of a method of a bundle
// class whose bases are only object, torch.nn.Module or such classes of
// the bundle's own: its self is no tensor.
func (fc *fileCheck) plainReceiver(idx int) bool {
	if !fc.ownedReceiver(idx) {
		return false
	}
	methods := fc.ff.Methods
	if idx < 1 || idx > len(methods) {
		return false
	}
	return fc.noTensorBases(classRef{fc.rel, methods[idx-1].Class - 1}, 0)
}

// noTensorBases reports whether class ref derives only from object,
// torch.nn.Module and bundle classes that do.
func (fc *fileCheck) noTensorBases(ref classRef, depth int) bool {
	ff := fc.facts[ref.file]
	if ff == nil || ref.idx < 0 || ref.idx >= len(ff.Classes) || depth > 16 {
		return false
	}
	for _, base := range ff.Classes[ref.idx].Bases {
		refs, foreign := fc.baseClasses(ref.file, base)
		if foreign {
			names := fc.resolvedNames(ref.file, base)
			if base == "object" || (len(names) == 1 && names[0] == "torch.nn.Module") {
				continue
			}
			return false
		}
		if len(refs) == 0 {
			return false
		}
		for _, r := range refs {
			if !fc.noTensorBases(r, depth+1) {
				return false
			}
		}
	}
	return true
}

// rootedAgain judges the rest of a chain on a base the scanner cannot type
// from its first component named torch or triton as the chain rooted
// there (rt50d's second line: however a module came to be an attribute
// of the bundle's own class or of a parameter, C.torch.load is judged as
// torch.load and C.torch.os as a module escape). An attribute of the
// bundle's own by one of those names needs another name.
func (fc *fileCheck) rootedAgain(a attrFact) {
	if a.Base != "" {
		for _, b := range fc.binds[a.Base] {
			if fc.isModule(b) {
				return
			}
		}
	}
	for i, name := range a.Attrs {
		if name != "torch" && name != "triton" {
			continue
		}
		rest := strings.Join(a.Attrs[i:], ".")
		mark := len(fc.findings)
		fc.reference(binding{name: rest, written: true}, a.Line, a.Col, "use of", false, a.ModuleLevel)
		fc.stdlibEscape(rest, a.Line, a.Col, "use of")
		if len(fc.findings) > mark {
			return
		}
	}
}
