package scan

import "strings"

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
// every module the interpreter can import (its standard library and the
// packages installed on its path, from the parse script's header), the
// fallback list, the allowed imports, the validator's own runtime package
// and every module a reference rule polices. A bundle module with such a
// name would make "import pickle" look bundle-local to the scan while, at
// run time, the import may bind the interpreter's module (one already
// imported, or found earlier on the path).
func reservedModules(pol Policy, env *factsHeader) map[string]bool {
	if env == nil {
		env = &factsHeader{}
	}
	// Besides the runtime package: modules a Python process holds without
	// a file on the path (__main__ is the worker's own -c module, through
	// which "import __main__" reaches its sys; Cython's runtime module
	// appears once torch or numpy is imported). reservedName adds every
	// dunder and _cython_ name.
	out := map[string]bool{"cacheon_runtime": true, "__main__": true, "__mp_main__": true, "cython_runtime": true}
	for _, list := range [][]string{env.Stdlib, env.Importable, fallbackStdlib(), pol.AllowedImports} {
		for _, m := range list {
			out[topLevel(m)] = true
		}
	}
	for _, r := range referenceRules() {
		out[topLevel(r.prefix)] = true
	}
	return out
}

// reservedName reports whether a bundle's top-level module name is
// reserved: listed, or of a kind the interpreter and extension modules put
// into sys.modules without a file (dunder names, Cython's _cython_*).
func reservedName(reserved map[string]bool, top string) bool {
	return reserved[top] || strings.HasPrefix(top, "__") || strings.HasPrefix(top, "_cython_")
}
