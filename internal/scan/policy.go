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
		"__future__",
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
		{RuleForbiddenBuiltin, "eval, exec, compile, __import__, open, input, breakpoint, globals, vars, locals, dir or __builtins__"},
		{RuleDynamicAttribute, "getattr/setattr/delattr/hasattr with a computed or dunder name, or attrgetter/methodcaller"},
		{RuleDunderAccess, "access to a dunder name outside the harmless list (__name__, __doc__, __init__, ...)"},
		{RuleSysModules, "use of the import system: sys.modules, sys.path, sys.meta_path, importlib, imp, pkgutil, runpy, zipimport"},
		{RuleUnsafeLoader, "deserializers and native loaders: torch.load, pickle, marshal, cpp_extension, load_library, torch.hub, model_zoo, triton.runtime.build"},
		{RuleNativeFFI, "foreign-function interfaces: ctypes, cffi"},
		{RuleConcurrency, "threads, processes and event loops: threading, multiprocessing, subprocess, asyncio, os.fork, DataLoader, torch.jit.fork"},
		{RuleGlobalMutation, "assignment to state of an imported module (also through an alias), or a call to a process-wide setter"},
		{RulePrivateAPI, "torch._C, triton._C and the private compiler configuration modules"},
		{RuleModuleShadowing, "a bundle module named like a standard-library, allowed or policed module"},
		{RuleModuleEscape, "a module outside the allow-list reached through an allowed one: torch.os, typing.sys, from torch import os, getattr(torch, \"os\")"},
		{RuleModuleAlias, "an imported module put where no name follows it: a container, an argument, a return value, a default, an attribute or item"},
		{RuleFileAccess, "files and shared memory without open(): torch.from_file, Storage.from_file, torch.save, tofile/fromfile, shared-memory storages, profiler exports"},
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
		"__license__", "__copyright__":
		return true
	}
	return false
}

// forbiddenCall lists the builtins a bundle may not call. dir() only lists
// names, but a kernel has no use for listing a module.
func forbiddenCall(name string) bool {
	switch name {
	case "eval", "exec", "compile", "__import__", "open", "input",
		"breakpoint", "globals", "vars", "locals", "dir":
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

// refRule maps a dotted-name prefix to the rule it breaks. A reference
// matches when it equals the prefix or continues it with a dot.
type refRule struct {
	prefix string
	rule   string
	why    string
	// moduleLevelOnly restricts the entry to uses in module-level code (a
	// setter that is harmless inside a function, e.g. as a context manager).
	moduleLevelOnly bool
}

// referenceRules returns the dotted names that break a rule wherever they
// appear (import, attribute chain or name bound by an import). Matching is
// done on the resolved name, so "import torch as t; t.load" is torch.load.
func referenceRules() []refRule {
	const (
		imp    = "bundles may not touch the import system; import what you need with a plain import"
		loader = "deserializers and native loaders run arbitrary code; compute with torch and triton instead"
		file   = "this reads or writes files (or shared memory) without open(); a kernel computes only on the tensors it is given"
		dist   = "the validator hands the candidate its process group; creating stores, groups or RPC agents opens sockets and files"
		native = "this compiles and loads native code; write the kernel in triton or a declared CUDA source"
		ffi    = "foreign-function interfaces bypass the sandbox; write the kernel in triton or a declared CUDA source"
		conc   = "the engine owns threads, processes and streams; keep the kernel synchronous"
		setter = "process-wide settings belong to the validator; remove the call"
		priv   = "private internals are not a stable or allowed surface; use the public API"
		dyn    = "reflective attribute access hides what is touched; use plain attribute access"
	)
	rules := []refRule{
		{prefix: "sys.modules", rule: RuleSysModules, why: imp},
		{prefix: "sys.path", rule: RuleSysModules, why: imp},
		{prefix: "sys.meta_path", rule: RuleSysModules, why: imp},
		{prefix: "sys.path_hooks", rule: RuleSysModules, why: imp},
		{prefix: "sys.path_importer_cache", rule: RuleSysModules, why: imp},
		{prefix: "importlib", rule: RuleSysModules, why: imp},
		{prefix: "imp", rule: RuleSysModules, why: imp},
		{prefix: "pkgutil", rule: RuleSysModules, why: imp},
		{prefix: "runpy", rule: RuleSysModules, why: imp},
		{prefix: "zipimport", rule: RuleSysModules, why: imp},

		{prefix: "torch.load", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch.jit.load", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch.serialization", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch.utils.cpp_extension", rule: RuleUnsafeLoader, why: "declared CUDA sources are built by the validator; do not build or load native code at import"},
		{prefix: "torch.ops.load_library", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch.classes.load_library", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch.hub", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch.package", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch.utils.model_zoo", rule: RuleUnsafeLoader, why: loader},
		{prefix: "torch._inductor.codecache", rule: RuleUnsafeLoader, why: native},
		{prefix: "torch._inductor.cpp_builder", rule: RuleUnsafeLoader, why: native},
		{prefix: "triton.runtime.build", rule: RuleUnsafeLoader, why: native},
		{prefix: "torch.export.load", rule: RuleUnsafeLoader, why: loader},
		{prefix: "pickle", rule: RuleUnsafeLoader, why: loader},
		{prefix: "_pickle", rule: RuleUnsafeLoader, why: loader},
		{prefix: "cPickle", rule: RuleUnsafeLoader, why: loader},
		{prefix: "marshal", rule: RuleUnsafeLoader, why: loader},
		{prefix: "shelve", rule: RuleUnsafeLoader, why: loader},
		{prefix: "dill", rule: RuleUnsafeLoader, why: loader},
		{prefix: "cloudpickle", rule: RuleUnsafeLoader, why: loader},
		{prefix: "joblib", rule: RuleUnsafeLoader, why: loader},

		{prefix: "torch.from_file", rule: RuleFileAccess, why: file},
		{prefix: "torch.save", rule: RuleFileAccess, why: file},
		{prefix: "torch.jit.save", rule: RuleFileAccess, why: file},
		{prefix: "torch.export.save", rule: RuleFileAccess, why: file},
		{prefix: "torch.onnx", rule: RuleFileAccess, why: file},
		{prefix: "torch.utils.tensorboard", rule: RuleFileAccess, why: file},
		{prefix: "torch.distributed.checkpoint", rule: RuleFileAccess, why: file},

		{prefix: "ctypes", rule: RuleNativeFFI, why: ffi},
		{prefix: "_ctypes", rule: RuleNativeFFI, why: ffi},
		{prefix: "cffi", rule: RuleNativeFFI, why: ffi},
		{prefix: "_cffi_backend", rule: RuleNativeFFI, why: ffi},

		{prefix: "threading", rule: RuleConcurrency, why: conc},
		{prefix: "_thread", rule: RuleConcurrency, why: conc},
		{prefix: "multiprocessing", rule: RuleConcurrency, why: conc},
		{prefix: "torch.multiprocessing", rule: RuleConcurrency, why: conc},
		{prefix: "torch.utils.data.DataLoader", rule: RuleConcurrency, why: "a DataLoader with workers starts processes; " + conc},
		{prefix: "torch.utils.data.dataloader", rule: RuleConcurrency, why: "a DataLoader with workers starts processes; " + conc},
		{prefix: "torch.jit.fork", rule: RuleConcurrency, why: conc},
		{prefix: "torch._inductor.async_compile", rule: RuleConcurrency, why: conc},
		{prefix: "torch._inductor.compile_worker", rule: RuleConcurrency, why: conc},
		{prefix: "concurrent", rule: RuleConcurrency, why: conc},
		{prefix: "subprocess", rule: RuleConcurrency, why: conc},
		{prefix: "_posixsubprocess", rule: RuleConcurrency, why: conc},
		{prefix: "asyncio", rule: RuleConcurrency, why: conc},
		{prefix: "os.fork", rule: RuleConcurrency, why: conc},
		{prefix: "os.forkpty", rule: RuleConcurrency, why: conc},
		{prefix: "os.posix_spawn", rule: RuleConcurrency, why: conc},
		{prefix: "os.posix_spawnp", rule: RuleConcurrency, why: conc},
		{prefix: "os.system", rule: RuleConcurrency, why: conc},
		{prefix: "os.popen", rule: RuleConcurrency, why: conc},

		{prefix: "torch.set_default_dtype", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_default_tensor_type", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_default_device", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.manual_seed", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.seed", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_rng_state", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.random.manual_seed", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.random.set_rng_state", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.cuda.manual_seed", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.cuda.manual_seed_all", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.cuda.set_rng_state", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.cuda.set_device", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.cuda.set_per_process_memory_fraction", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.cuda.set_sync_debug_mode", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_num_threads", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_num_interop_threads", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_flush_denormal", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.use_deterministic_algorithms", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_float32_matmul_precision", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.set_warn_always", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.autograd.set_detect_anomaly", rule: RuleGlobalMutation, why: setter},
		{prefix: "torch.library", rule: RuleGlobalMutation, why: "registering operators changes the process-wide dispatcher; expose a plain function"},
		{prefix: "torch.set_grad_enabled", rule: RuleGlobalMutation, why: "at module level this switches autograd off for the whole engine; use it inside the entry function or `with torch.no_grad():`", moduleLevelOnly: true},
		{prefix: "torch.autograd.set_grad_enabled", rule: RuleGlobalMutation, why: "at module level this switches autograd off for the whole engine; use it inside the entry function or `with torch.no_grad():`", moduleLevelOnly: true},

		{prefix: "torch._C", rule: RulePrivateAPI, why: priv},
		{prefix: "torch._dynamo.config", rule: RulePrivateAPI, why: priv},
		{prefix: "torch._inductor.config", rule: RulePrivateAPI, why: priv},
		{prefix: "torch._functorch.config", rule: RulePrivateAPI, why: priv},
		{prefix: "triton._C", rule: RulePrivateAPI, why: priv},

		{prefix: "operator.attrgetter", rule: RuleDynamicAttribute, why: dyn},
		{prefix: "operator.methodcaller", rule: RuleDynamicAttribute, why: dyn},

		{prefix: "torch.distributed.device_mesh", rule: RuleDistributedSetup, why: dist},
		{prefix: "torch.distributed.rendezvous", rule: RuleDistributedSetup, why: dist},
		{prefix: "torch.distributed.rpc", rule: RuleDistributedSetup, why: dist},
		{prefix: "torch.distributed.elastic", rule: RuleDistributedSetup, why: dist},
		{prefix: "torch.distributed.launch", rule: RuleDistributedSetup, why: dist},
		{prefix: "torch.distributed.launcher", rule: RuleDistributedSetup, why: dist},
		{prefix: "torch.distributed.run", rule: RuleDistributedSetup, why: dist},
		{prefix: "torch.distributed.Backend.register_backend", rule: RuleDistributedSetup, why: dist},
	}
	// The forbidden builtins by their module's name (typing.sys.modules is
	// sys.modules; dataclasses.builtins.open is open).
	for _, name := range []string{
		"eval", "exec", "compile", "__import__", "open", "input", "breakpoint",
		"globals", "vars", "locals", "dir",
	} {
		rules = append(rules, refRule{prefix: "builtins." + name, rule: RuleForbiddenBuiltin,
			why: "this is the " + name + "() builtin: bundles may not evaluate code, reach the file system or the interpreter's namespaces"})
	}
	// Stores and group constructors, as torch.distributed re-exports them
	// and where they are defined.
	for _, pkg := range []string{"torch.distributed", "torch.distributed.distributed_c10d"} {
		for _, name := range []string{
			"Store", "TCPStore", "FileStore", "HashStore", "PrefixStore",
			"init_process_group", "destroy_process_group", "new_group",
			"new_subgroups", "new_subgroups_by_enumeration", "split_group",
			"init_device_mesh",
		} {
			rules = append(rules, refRule{prefix: pkg + "." + name, rule: RuleDistributedSetup, why: dist})
		}
	}
	return rules
}

// attributeRules maps attribute names that break a rule on whatever object
// they are read from: a storage reached from any tensor
// (x.untyped_storage().from_file) or torch.ops reached through a private
// module (torch._ops.ops.load_library) needs no policed name to get there.
func attributeRules() map[string]refRule {
	const (
		file   = "this reads or writes files (or shared memory) without open(); a kernel computes only on the tensors it is given"
		loader = "this loads native code; write the kernel in triton or a declared CUDA source"
		imp    = "bundles may not touch the import system; import what you need with a plain import"
		setter = "process-wide settings belong to the validator; remove the call"
	)
	out := make(map[string]refRule)
	for _, name := range []string{
		"from_file", "fromfile", "tofile",
		"_new_shared", "_new_shared_filename_cpu", "_new_using_filename_cpu",
		"_share_filename_cpu_", "_new_shared_fd_cpu", "_new_using_fd_cpu",
		"_share_fd_cpu_", "share_memory_",
		"_dump_snapshot", "_save_segment_usage", "_save_memory_usage",
		"export_chrome_trace", "export_stacks", "export_memory_timeline",
	} {
		out[name] = refRule{prefix: name, rule: RuleFileAccess, why: file}
	}
	for _, name := range []string{"load_library", "CUDAPluggableAllocator"} {
		out[name] = refRule{prefix: name, rule: RuleUnsafeLoader, why: loader}
	}
	out["import_module"] = refRule{prefix: "import_module", rule: RuleSysModules, why: imp}
	out["change_current_allocator"] = refRule{prefix: "change_current_allocator", rule: RuleGlobalMutation, why: setter}
	return out
}

// escapeModules lists the modules a chain rooted at an allowed module may
// not pass through (torch.os, typing.sys, dataclasses.builtins, ...):
// allowed modules import them for their own use, so they are reachable as
// attributes without an import. The list names the standard-library (and
// common third-party) modules that reach files, processes, threads, the
// network, native code, the interpreter or the import system. Modules the
// policy allows are never an escape.
func escapeModules() map[string]bool {
	out := make(map[string]bool)
	for _, m := range []string{
		// The interpreter, its namespaces and its import system.
		"sys", "builtins", "__builtin__", "__main__", "importlib", "imp", "_imp",
		"pkgutil", "zipimport", "runpy", "_frozen_importlib",
		"_frozen_importlib_external", "site", "sysconfig", "gc", "inspect",
		"types", "code", "codeop", "pdb", "bdb", "traceback", "faulthandler",
		"atexit", "warnings", "logging",
		// Files and the operating system.
		"os", "posix", "nt", "posixpath", "ntpath", "genericpath", "io", "_io",
		"codecs", "pathlib", "shutil", "tempfile", "glob", "fileinput",
		"linecache", "filecmp", "tarfile", "zipfile", "gzip", "bz2", "lzma",
		"sqlite3", "dbm", "mmap", "resource", "fcntl", "termios", "tty", "pty",
		"pwd", "grp", "platform", "py_compile", "compileall", "_posixshmem",
		"msvcrt", "winreg", "_winapi",
		// Deserializers and native code.
		"pickle", "_pickle", "cPickle", "copyreg", "marshal", "shelve", "dill",
		"cloudpickle", "joblib", "ctypes", "_ctypes", "cffi", "_cffi_backend",
		// Processes, threads and signals.
		"subprocess", "_posixsubprocess", "multiprocessing", "_multiprocessing",
		"threading", "_thread", "concurrent", "asyncio", "signal", "_signal",
		// The network.
		"socket", "_socket", "ssl", "_ssl", "selectors", "socketserver", "http",
		"urllib", "urllib3", "requests", "ftplib", "smtplib", "poplib",
		"imaplib", "telnetlib", "xmlrpc", "webbrowser",
	} {
		out[m] = true
	}
	return out
}

// submoduleNotEscape lists the submodules of allowed packages whose names
// equal an escape module's but which are the package's own (torch.types is
// torch/types.py, not the types module; torch.multiprocessing is policed by
// concurrency). Their own attributes are checked like any other chain's
// (torch.types.os is an escape).
func submoduleNotEscape(name string) bool {
	switch name {
	case "torch.types", "torch.signal", "torch.fx.traceback",
		"torch.multiprocessing", "torch.distributed.elastic.multiprocessing",
		"torch.distributed.elastic.utils.logging":
		return true
	}
	return false
}

// knownModules lists submodules of the allowed packages that bundles
// commonly bind to a name, and shared configuration objects that behave
// like modules. Together with every module named by a plain import and
// the bundle's own modules, they are what module-alias treats as a module.
func knownModules() []string {
	return []string{
		"collections.abc",
		"torch.nn", "torch.nn.functional", "torch.nn.init", "torch.nn.modules",
		"torch.nn.parameter", "torch.nn.utils", "torch.nn.attention",
		"torch.cuda", "torch.cuda.amp", "torch.cuda.graphs", "torch.cuda.memory",
		"torch.cuda.nvtx", "torch.cuda.random", "torch.cuda.streams",
		"torch.backends", "torch.backends.cuda", "torch.backends.cuda.matmul",
		"torch.backends.cudnn", "torch.backends.cpu", "torch.backends.mps",
		"torch.backends.mkldnn", "torch.backends.opt_einsum",
		"torch.distributed", "torch.distributed.distributed_c10d",
		"torch.utils", "torch.utils.data", "torch.utils.checkpoint",
		"torch.autograd", "torch.autograd.function", "torch.amp",
		"torch.linalg", "torch.fft", "torch.special", "torch.sparse",
		"torch.ops", "torch.ops.aten", "torch.library", "torch.jit", "torch.fx",
		"torch.func", "torch.export", "torch.compiler", "torch.testing",
		"torch.profiler", "torch.random", "torch.hub", "torch.overrides",
		"torch.types", "torch.signal", "torch.storage", "torch.serialization",
		"torch.version", "torch.cpu", "torch.mps", "torch.xpu",
		"torch.multiprocessing", "torch.onnx", "torch.package", "torch.futures",
		"torch.distributions", "torch.masked", "torch.nested", "torch.quantization",
		"torch.ao", "torch.accelerator", "torch._C", "torch._dynamo",
		"torch._inductor", "torch._dynamo.config", "torch._inductor.config",
		"triton.language", "triton.language.core", "triton.language.math",
		"triton.language.extra", "triton.language.extra.cuda",
		"triton.language.extra.libdevice", "triton.language.random",
		"triton.language.standard", "triton.runtime", "triton.runtime.jit",
		"triton.runtime.autotuner", "triton.runtime.driver", "triton.compiler",
		"triton.testing", "triton.knobs", "triton.backends", "triton.tools",
		"triton._C",
	}
}

// fallbackStdlib names standard-library modules a bundle must not shadow even
// when the interpreter cannot list its standard library (Python 3.9 reports
// only the built-in modules), plus the modules the interpreter runs by
// itself.
func fallbackStdlib() []string {
	return []string{
		"abc", "argparse", "array", "ast", "asyncio", "base64", "bdb", "binascii",
		"builtins", "bz2", "calendar", "cmd", "code", "codecs", "codeop",
		"collections", "concurrent", "contextlib", "contextvars", "copy",
		"copyreg", "csv", "ctypes", "dataclasses", "datetime", "decimal",
		"difflib", "dis", "email", "encodings", "enum", "errno", "faulthandler",
		"fcntl", "filecmp", "fnmatch", "fractions", "functools", "gc",
		"getpass", "gettext", "glob", "gzip", "hashlib", "heapq", "hmac",
		"html", "http", "imp", "importlib", "inspect", "io", "ipaddress",
		"itertools", "json", "keyword", "linecache", "locale", "logging",
		"lzma", "marshal", "math", "mmap", "multiprocessing", "numbers",
		"opcode", "operator", "os", "pathlib", "pdb", "pickle", "pkgutil",
		"platform", "posix", "pprint", "profile", "pty", "queue", "random",
		"re", "resource", "runpy", "sched", "secrets", "select", "selectors",
		"shelve", "shlex", "shutil", "signal", "site", "socket", "sqlite3",
		"ssl", "stat", "statistics", "string", "struct", "subprocess", "sys",
		"sysconfig", "tarfile", "tempfile", "test", "textwrap", "threading",
		"time", "timeit", "token", "tokenize", "trace", "traceback",
		"tracemalloc", "types", "typing", "unittest", "urllib", "uuid",
		"warnings", "weakref", "zipfile", "zipimport", "zlib",
		// Not standard modules, but run by the interpreter itself.
		"sitecustomize", "usercustomize", "__main__",
	}
}

// reservedModules returns the top-level names a bundle module may not take:
// the interpreter's standard library, the fallback list, the allowed
// imports and every module a reference rule polices. A bundle module with
// such a name would make "import pickle" look bundle-local.
func reservedModules(pol Policy, interpreterStdlib []string) map[string]bool {
	out := make(map[string]bool)
	for _, list := range [][]string{interpreterStdlib, fallbackStdlib(), pol.AllowedImports} {
		for _, m := range list {
			out[topLevel(m)] = true
		}
	}
	for _, r := range referenceRules() {
		out[topLevel(r.prefix)] = true
	}
	return out
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
