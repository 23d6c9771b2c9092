package scan

import "strings"

// Policy is the arena's configurable part of the static policy. Everything
// else (the forbidden builtins, dunder names, loaders, concurrency and
// global-state APIs listed in this file) is fixed validator code.
type Policy struct {
	// AllowedImports lists the top-level module names a bundle may import
	// besides its own modules. "torch" allows "torch.nn.functional" too.
	AllowedImports []string
}

// DefaultPolicy returns the policy of the default arena: torch, triton and
// a few pure-Python standard modules that cannot reach the file system,
// processes or the import system.
func DefaultPolicy() Policy {
	return Policy{AllowedImports: []string{
		"torch", "triton", "math", "typing", "functools", "dataclasses",
		"itertools", "operator", "enum", "collections", "abc", "numbers",
		"contextlib", "__future__",
	}}
}

// Rule identifiers. They are stable: tooling and miners may match on them.
const (
	// Source rules, from the Python syntax tree.
	RuleSyntaxError      = "syntax-error"
	RuleImportNotAllowed = "import-not-allowed"
	RuleStarImport       = "star-import"
	RuleForbiddenBuiltin = "forbidden-builtin"
	RuleDynamicAttribute = "dynamic-attribute"
	RuleDunderAccess     = "dunder-access"
	RuleSysModules       = "sys-modules"
	RuleUnsafeLoader     = "unsafe-loader"
	RuleNativeFFI        = "native-ffi"
	RuleConcurrency      = "concurrency"
	RuleGlobalMutation   = "global-mutation"
	RulePrivateAPI       = "private-api"
	RuleModuleShadowing  = "module-shadowing"
	RuleModuleEscape     = "module-escape"
	RuleModuleAlias      = "module-alias"
	RuleFileAccess       = "file-access"
	RuleDistributedSetup = "distributed-setup"
	RuleScanLimit        = "scan-limit"
	RuleSymlink          = "symlink"
	RuleSpecialFile      = "special-file"
	RuleBadFilename      = "bad-filename"
	RuleHiddenDir        = "hidden-dir"
	RuleBinaryFile       = "binary-file"
	RuleNativeSource     = "native-source"
	RuleUndeclaredCUDA   = "undeclared-cuda"
	RuleUndeclaredFile   = "undeclared-file"
	RuleMissingSource    = "missing-source"
	// The allow-list of what a bundle uses, introspection and ownership.
	RuleModuleAttribute = "module-attribute-not-allowed"
	RuleIntrospection   = "introspection"
	RuleForeignStore    = "foreign-store"
	RuleUnboundMethod   = "unbound-method"
	RuleTensorInternals = "tensor-internals"
	RuleUnboundName     = "unbound-name"
	RuleClock           = "clock"
)

// RuleInfo describes one rule for help output.
type RuleInfo struct {
	ID      string `json:"id"`
	Summary string `json:"summary"`
}

// Rules returns every rule the scanner can report, in a fixed order.
func Rules() []RuleInfo {
	return []RuleInfo{
		{RuleSyntaxError, "a Python file does not parse (or crashes the parser)"},
		{RuleImportNotAllowed, "an import outside the arena's allow-list and the bundle's own modules"},
		{RuleStarImport, "from M import * hides which names a module binds"},
		{RuleForbiddenBuiltin, "eval, exec, compile, __import__, open, input, breakpoint, help, license, credits, copyright, globals, vars, locals, dir or __builtins__"},
		{RuleDynamicAttribute, "getattr/setattr/delattr/hasattr with a computed or dunder name, or attrgetter/methodcaller"},
		{RuleModuleAttribute, "a name of an allowed module that is not on its attribute allow-list (torch.utils, torch.jit.load, torch.compile, typing.get_type_hints, torch.distributed beyond the collectives, private names, ...)"},
		{RuleDunderAccess, "access to a dunder name outside the harmless list (__name__, __doc__, __init__, ...)"},
		{RuleIntrospection, "frame, generator, coroutine, code, traceback and cell attributes (gi_frame, f_globals, f_back, co_code, tb_frame, mro, ...) on any object, also through getattr or a format string; a finalizer (__del__)"},
		{RuleClock, "a clock or where a block runs: elapsed_time, the autotuner's configs_timings and bench_time, Triton's globaltimer and smid, extern_elementwise and the IR builder's inline assembly, inline assembly whose text the scanner cannot read (not a literal, a choice between literals or a module constant) or that names a clock, counter or placement register (%clock, %globaltimer, %pm0-7, %gridid, %smid, ...) or uses LLVM's $( $| $) syntax; verify's and served calls come at different moments"},
		{RuleSysModules, "use of the import system: sys.modules, sys.path, sys.meta_path, importlib, imp, pkgutil, runpy, zipimport"},
		{RuleUnsafeLoader, "deserializers and native loaders: torch.load, pickle, marshal, cpp_extension, load_library, torch.hub, model_zoo, triton.runtime.build"},
		{RuleNativeFFI, "foreign-function interfaces: ctypes, cffi"},
		{RuleConcurrency, "threads, processes and event loops: threading, multiprocessing, subprocess, asyncio, os.fork, DataLoader, torch.jit.fork"},
		{RuleGlobalMutation, "assignment to state of an imported module (also through an alias), or a call to a process-wide setter"},
		{RuleForeignStore, "an attribute store (=, +=, del, setattr) into an object the bundle did not create: only self, the bundle's own classes and functions and instances it constructs may be changed; also a library callable that stores into what it is applied to (typing.final, no_type_check, runtime_checkable, overload, abc.abstractmethod, functools.total_ordering, functools.wraps(f), dataclasses.dataclass, ...) other than on the bundle's own def or class"},
		{RuleUnboundMethod, "a bundle method that stores into self, read from something not known to be an instance (its class, cls, type(x), a parameter, an item, an attribute, a call result) or used as a plain function in its class body, so that self could be any object"},
		{RulePrivateAPI, "torch._C, triton._C, the private compiler configuration modules, an operator's Python dispatcher tables (py_kernels, py_impl, ...) on any object, and a private attribute (_x) of an object the bundle did not define"},
		{RuleUnboundName, "a name the file reads but binds nowhere (no import, assignment, def, parameter or builtin): the interpreter would find it where the scanner cannot look"},
		{RuleTensorInternals, "a tensor's storage object, version counter and C handle (storage(), untyped_storage(), _version, _cdata, ...) on any object: raw file-descriptor I/O, and facts about how the validator allocated and wrote its inputs"},
		{RuleModuleShadowing, "a bundle module (file or package) named like any module the interpreter can import (standard library, installed packages), an allowed or a policed module"},
		{RuleModuleEscape, "a module outside the allow-list reached through an allowed one: torch.os, typing.sys, from torch import os, getattr(torch, \"os\")"},
		{RuleModuleAlias, "an imported module put where no name follows it: a container, an argument, a return value, a default, an attribute or item"},
		{RuleFileAccess, "files and shared memory without open(): torch.from_file, Storage.from_file, a storage's _write_file/_set_from_file, torch.save, tofile/fromfile, shared-memory storages, profiler exports"},
		{RuleDistributedSetup, "process groups, stores and RPC: TCPStore, FileStore, init_process_group, new_group, torch.distributed.rpc"},
		{RuleScanLimit, "a file or the bundle is too large for the scanner, or its names too tangled to follow"},
		{RuleSymlink, "a symbolic link anywhere in the bundle"},
		{RuleSpecialFile, "a device, pipe, socket or other non-regular file"},
		{RuleBadFilename, "a path that is not valid UTF-8 or contains control characters"},
		{RuleHiddenDir, "a dot-directory such as .git"},
		{RuleBinaryFile, "a binary or compiled artifact, or a __pycache__ directory"},
		{RuleNativeSource, "C/C++ sources, which bundles may not carry"},
		{RuleUndeclaredCUDA, "a CUDA source not declared in the manifest"},
		{RuleUndeclaredFile, "a file neither declared, imported by a declared source, nor documentation/metadata"},
		{RuleMissingSource, "a source declared in the manifest that is not a regular file in the bundle"},
	}
}

// isDunder reports whether name has the __x__ form.
func isDunder(name string) bool {
	return len(name) > 4 && strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__")
}

// harmlessDunder lists the only dunder names a bundle may use, as an
// attribute (x.__name__) or as a bare name (__name__). Every other dunder is
// reported by dunder-access; the ones that matter most are the escape
// hatches __globals__, __builtins__, __subclasses__, __dict__, __class__,
// __code__, __bases__, __mro__, __getattribute__, __closure__, __func__,
// __self__, __module__, __loader__, __spec__, __reduce__, __reduce_ex__,
// __setattr__, __delattr__, __import__ and __file__ (a path leak).
// Defining dunder methods (def __init__, def __repr__) is not an access and
// is always fine.
func harmlessDunder(name string) bool {
	switch name {
	case "__name__", "__qualname__", "__doc__", "__init__", "__call__",
		"__all__", "__slots__", "__version__", "__debug__", "__author__",
		"__license__", "__copyright__",
		// a dataclass's hook, chained with super().__post_init__(); read
		// from a class it is a method like any other (unbound-method)
		"__post_init__":
		return true
	}
	return false
}

// operatorDunder lists the special methods a bundle may also use by name,
// as a bare name (__radd__ = __add__, __hash__ = None in a class body) or
// as an attribute of any object (self.__eq__(o), super().__repr__(),
// a.__mul__(b)): each does what an operator, a builtin or a statement the
// bundle could write does already (a + b, repr(a), a == b, a[k], iter(a)),
// and reads nothing else. Not here, and so refused as before: whatever
// stores (__setitem__, __setattr__, the in-place operators, __set__,
// __set_name__), enters a mode (__enter__, __exit__), creates or
// introspects (__new__, __getattribute__, __get__, __class__, ...), and
// the copy protocol. A bare name cannot reach a builtin or module dunder
// through them: no builtin or module global has one of these names.
func operatorDunder(name string) bool {
	switch strings.TrimSuffix(strings.TrimPrefix(name, "__"), "__") {
	case "repr", "str", "format", "bytes", "hash", "bool", "len", "length_hint", "iter", "next",
		"reversed", "contains", "getitem", "missing", "index", "int", "float", "complex",
		"round", "trunc", "floor", "ceil", "abs", "neg", "pos", "invert",
		"eq", "ne", "lt", "le", "gt", "ge":
		return true
	case "add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow",
		"lshift", "rshift", "and", "xor", "or":
		return true
	case "radd", "rsub", "rmul", "rmatmul", "rtruediv", "rfloordiv", "rmod", "rdivmod", "rpow",
		"rlshift", "rrshift", "rand", "rxor", "ror":
		return true
	}
	return false
}

// copyProtocol lists the methods through which copy.deepcopy (reached from
// dataclasses.asdict/astuple) and pickle take instructions from an object:
// __reduce_ex__ may return any callable and a state that copy then sets as
// attributes (setattr on torch.no_grad, from a standard-library frame).
func copyProtocol(name string) bool {
	switch name {
	case "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__", "__copy__",
		"__deepcopy__", "__getnewargs__", "__getnewargs_ex__":
		return true
	}
	return false
}

// forbiddenCall lists the builtins a bundle may not call. dir() only lists
// names, but a kernel has no use for listing a module; help("name")
// imports the module it is given; license(), credits() and copyright()
// read files and wait for input.
func forbiddenCall(name string) bool {
	switch name {
	case "eval", "exec", "compile", "__import__", "open", "input",
		"breakpoint", "help", "license", "credits", "copyright", "globals",
		"vars", "locals", "dir":
		return true
	}
	return false
}

// forbiddenReference lists the names a bundle may not even mention without
// calling them (passing eval around is as bad as calling it). dir is not
// one: it is harmless uncalled and a common variable name.
func forbiddenReference(name string) bool {
	return name == "__builtins__" || (forbiddenCall(name) && name != "dir")
}

// inspectingBuiltin lists the builtins that only look at their first
// argument: a module passed to them is not handed over (module-alias).
// getattr, setattr and delattr have rules of their own.
func inspectingBuiltin(name string) bool {
	switch name {
	case "getattr", "hasattr", "setattr", "delattr", "vars", "dir",
		"isinstance", "issubclass", "type", "id", "callable", "repr", "str":
		return true
	}
	return false
}

// attrBuiltin reports the reflective attribute builtins.
func attrBuiltin(name string) bool {
	switch name {
	case "getattr", "setattr", "delattr", "hasattr":
		return true
	}
	return false
}

// topLevel returns the first dotted component of a module name.
func topLevel(module string) string {
	if i := strings.IndexByte(module, '.'); i >= 0 {
		return module[:i]
	}
	return module
}

// hasDottedPrefix reports whether name equals prefix or continues it with a
// dot ("torch.load" matches "torch.load" and "torch.load.x", not
// "torch.loads").
func hasDottedPrefix(name, prefix string) bool {
	return name == prefix || (strings.HasPrefix(name, prefix) && name[len(prefix)] == '.')
}
