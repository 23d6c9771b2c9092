package scan

import "strings"

// Introspection: the attributes that reach the interpreter's namespaces
// without naming a forbidden builtin. A generator's frame holds the
// builtins (g.gi_frame.f_builtins["eval"]), its caller's globals
// (f_back.f_globals) and its code object; a traceback holds frames; a class
// lists its subclasses (mro). The scanner cannot follow string subscripts
// of those mappings, so the attribute access itself is refused, on any
// object. Non-harmless dunders (__globals__, __class__, __dict__, ...) have
// their own rule, dunder-access.

// introspectionNames are the introspective attributes: those of
// generators, coroutines, async generators and code objects (Python 3.9 to
// 3.14; names are listed, not matched by prefix, so that a kernel's own
// ag_parts or co_dtype stays legal: a code object is reached only through
// names refused here or by dunder-access), frames, tracebacks, cells,
// method objects, Python 2 function aliases, mro.
var introspectionNames = map[string]bool{
	"gi_code": true, "gi_frame": true, "gi_running": true, "gi_suspended": true, "gi_yieldfrom": true,
	"cr_await": true, "cr_code": true, "cr_frame": true, "cr_origin": true, "cr_running": true, "cr_suspended": true,
	"ag_await": true, "ag_code": true, "ag_frame": true, "ag_running": true, "ag_suspended": true,
	"co_argcount": true, "co_branches": true, "co_cellvars": true, "co_code": true, "co_consts": true,
	"co_exceptiontable": true, "co_filename": true, "co_firstlineno": true, "co_flags": true,
	"co_freevars": true, "co_kwonlyargcount": true, "co_lines": true, "co_linetable": true, "co_lnotab": true,
	"co_name": true, "co_names": true, "co_nlocals": true, "co_positions": true, "co_posonlyargcount": true,
	"co_qualname": true, "co_stacksize": true, "co_varnames": true,
	"f_back": true, "f_builtins": true, "f_code": true, "f_globals": true, "f_locals": true,
	"f_trace": true, "f_trace_lines": true, "f_trace_opcodes": true, "f_lasti": true, "f_generator": true,
	"tb_frame": true, "tb_next": true, "tb_lasti": true,
	"cell_contents": true, "mro": true,
	"func_globals": true, "func_code": true, "func_closure": true, "func_defaults": true,
	"func_dict": true, "func_name": true, "func_doc": true,
	"im_func": true, "im_self": true, "im_class": true,
}

// exceptionReferents are the attributes of exceptions that hold the object
// the failing code was working on: AttributeError.obj (Python 3.10 on) is
// the object whose attribute was missing. A bundle that catches the error
// of reading a missing name of an allowed module gets the module itself
// as a value the scanner cannot type, and every attribute the module
// holds past the allow-list (rt50a: torch.nn.functional's torch, then its
// os, sys, builtins and inspect, a private dataclasses helper that
// compiles text). The name is refused on any object but self of a bundle
// method (introspection), as the frame and code attributes are.
var exceptionReferents = map[string]bool{"obj": true}

// dispatcherTables are the attributes of torch's operator objects that
// hold the Python dispatcher's kernels and mode handlers. Clearing or
// filling one changes what torch runs for the whole process, and an
// operator reached through a container (ops[0].py_kernels) escapes the
// module-attribute rules, so the names are refused on any object.
var dispatcherTables = map[string]bool{
	"py_kernels": true, "py_impl": true, "python_key_table": true, "python_key_mode_table": true,
	"functorch_table": true, "_dispatch_cache": true, "_uncache_dispatch": true,
}

// introspective reports whether an attribute name (not a dunder) is one
// of the introspection set or an exception's referent.
func introspective(name string) bool {
	return introspectionNames[name] || exceptionReferents[name]
}

// introspectionWhat says what an introspective name reaches.
func introspectionWhat(name string) string {
	if exceptionReferents[name] {
		return "the object an exception was raised about (a module the scanner cannot follow)"
	}
	return "frames, code or interpreter namespaces"
}

// introspection reports the first introspective name of an attribute
// chain, once per chain.
func (fc *fileCheck) introspection(a attrFact) {
	for i, name := range a.Attrs {
		if i == 0 && exceptionReferents[name] && fc.ownedReceiver(a.Receiver) {
			continue // self.obj: the bundle's own attribute (hs50c)
		}
		if isDunder(name) && !harmlessDunder(name) {
			return // dunder-access reports the chain
		}
		if dispatcherTables[name] {
			fc.add(a.Line, a.Col, RulePrivateAPI,
				"access to %s (in %q) reaches an operator's Python dispatcher tables, which are process-wide; remove it", name, showChain(a.Base, strings.Join(a.Attrs, ".")))
			return
		}
		if !introspective(name) {
			continue
		}
		if a.Format {
			fc.add(a.Line, a.Col, RuleIntrospection,
				"a format string's field reads %s, which reaches %s; format the values you need", name, introspectionWhat(name))
		} else {
			fc.add(a.Line, a.Col, RuleIntrospection,
				"access to %s (in %q) reaches %s; remove it", name, showChain(a.Base, strings.Join(a.Attrs, ".")), introspectionWhat(name))
		}
		return
	}
}

// finalizers refuses a def of __del__ (a method the interpreter runs
// when it collects an object, in any scope): when a
// kernel's objects are collected tells verify, which frees each case's
// prepared states when the case ends, from an engine, which keeps its
// layers' states for its life (rt43's moe_state_lifetime switched its
// cheat off in verify once one of its states was collected).
func (fc *fileCheck) finalizers(ff *fileFacts) {
	for _, n := range ff.Names {
		if n.Name == "__del__" && n.Ctx == "def" { // a store of it is dunder-access's
			fc.add(n.Line, n.Col, RuleIntrospection,
				"a finalizer (__del__) observes when the interpreter collects objects, which differs between verify and serving; remove it")
		}
	}
}
