"""guard: refuse a process in which candidate code changed how torch runs.

Built once per process before any candidate module is imported (the verify
worker's start, the engine's start), a Guard holds what torch looked like
then and says, when asked, what has changed since:

- an active torch function mode or torch dispatch mode (entered at import
  by a generator advanced once, or left active by a call), or the Python
  dispatch key switched on in the thread's dispatch state (how a dispatch
  mode is installed below the mode stack on torch 1.13);
- a tensor handed to the candidate whose type is no longer torch.Tensor
  (``t.__class__ = Subclass`` with a ``__torch_function__`` or
  ``__torch_dispatch__``);
- a replaced torch function or method the worker and its serializer rely
  on (``torch.Tensor.fill_``, ``copy_``, ``clone``, ``torch.empty``,
  ``torch.cuda.synchronize``, ``torch.Tensor.__torch_function__``, ...,
  and the standard-library functions the protocol and the dumps go
  through): identities of the objects in the owners' ``__dict__`` compared
  with references captured at start;
- a kernel registered over an ATen operator the worker uses
  (``torch.library``): the dispatch table of each of those operators
  compared with its table at start (``full`` checks only: about 25 us per
  operator);
- an operation the runtime's audit hook (``audithook``) refused;
- a class registered as a virtual subclass of an ABC, a candidate ABC
  (a subclass of ``numbers.Real``, ...) with a registry or a
  ``__subclasshook__`` of its own, an ABC's isinstance cache holding a
  class that is not a subclass, or typing's subscription caches holding
  an object whose ``__eq__``/``__hash__`` are candidate code
  (``abcstate``; ``full`` checks);
- the conditions of ``same_conditions`` (grad mode, inference mode,
  autocast, threads, default dtype, deterministic algorithms, matmul
  precision) changed, e.g. ``torch.enable_grad()`` or ``torch.autocast``
  left entered at import by a generator advanced once;
- any object of torch, Triton, the runtime or the allowed standard-library
  modules changed (``objects``, at load and after every case): an entry of
  a class ``__dict__`` added, or replaced or deleted where either value is
  behaviour (a function, a descriptor, a class; ``dataclasses.dataclass(
  torch.nn.Linear)`` rewrites ``__init__`` and ``__eq__``; ``copy``
  reconstructing a ``__reduce_ex__`` state sets attributes from a
  standard-library frame), a function's ``__code__``, ``__defaults__`` or
  ``__kwdefaults__`` replaced (``functools.update_wrapper(f, g,
  assigned=("__code__",))``) or an entry of its ``__kwdefaults__`` or
  ``__dict__`` added, deleted or replaced (``typing.final(F.silu)`` sets
  ``__final__``, ``functools.wraps(src)(f)`` copies ``src.__dict__``), or
  a class, function or module a module binds rebound. Whatever expression
  or library frame did the store, the state is compared, by identity (a
  replaced value's ``__eq__`` is never asked), not the route (about 10 ms
  on the CPU machine: at load and after a row's first and last case).

``quick`` is cheap enough to run around every candidate call (a few
microseconds); ``full`` adds the identities and the dispatch tables.
Neither changes anything: the caller reports what they say as the
candidate's failure (class ``tamper``).

``same_conditions`` applies the one rule of the conditions candidate code
runs under, the same in the verify worker and the engine (threads, grad).
"""

import builtins  # noqa: F401 - imported so that the watched names resolve
import ctypes  # noqa: F401
import io  # noqa: F401
import json  # noqa: F401
import operator
import os  # noqa: F401
import sys
from itertools import chain

from . import abcstate, conditions, importstate, lazydata, optables, rngstate

# Owners and names whose identities are captured. Types are walked along
# their MRO (the object found in the first class __dict__ that has it).
_WATCHED = (
    ("torch.Tensor", ("fill_", "copy_", "clone", "detach", "contiguous", "to", "cpu", "data_ptr",
                      "storage", "untyped_storage", "storage_offset", "size", "stride", "as_strided",
                      "element_size", "numel", "is_contiguous", "ne", "dtype", "device", "is_cuda",
                      "set_", "index_select", "__torch_function__", "__torch_dispatch__")),
    ("torch", ("Tensor", "empty", "empty_strided", "empty_like", "zeros", "as_strided", "iinfo",
               "device", "no_grad", "is_grad_enabled", "set_grad_enabled", "get_num_threads",
               "set_num_threads", "is_inference_mode_enabled")),
    ("torch.cuda", ("synchronize", "current_stream", "Stream", "CUDAGraph", "graph", "stream",
                    "device", "is_available", "set_device")),
    ("torch._C", ("_len_torch_function_stack", "_len_torch_dispatch_stack",
                  "_is_torch_function_mode_enabled", "_dispatch_tls_local_include_set",
                  "_dispatch_tls_local_exclude_set", "_dispatch_dump_table", "DisableTorchFunction",
                  "_cuda_synchronize", "_set_torch_function_mode", "_set_torch_dispatch_mode")),
    ("builtins", ("open", "__import__")),
    ("io", ("open", "FileIO")),
    ("os", ("write", "open", "fdopen", "replace", "fsync")),
    ("json", ("dumps", "loads")),
    ("ctypes", ("memmove", "string_at", "create_string_buffer", "addressof")),
)

# ATen operators the worker and the engine's dispatch run themselves on
# validator-owned tensors (allocation and views; the raw path needs none
# of the others, which are watched so that a registration over them is
# seen at all).
_OPS = ("aten::empty.memory_format", "aten::empty_strided", "aten::as_strided", "aten::detach",
        "aten::fill_.Scalar", "aten::copy_", "aten::clone", "aten::_to_copy")


def _resolve(path):
    parts = path.split(".")
    obj = sys.modules.get(parts[0])
    for p in parts[1:]:
        if obj is None:
            return None
        obj = getattr(obj, p, None)
    return obj


def _lookup(owner, name):
    """The raw object bound to name on owner (a type: along its MRO)."""
    if isinstance(owner, type):
        for k in owner.__mro__:
            d = k.__dict__
            if name in d:
                return d[name]
        return None
    d = getattr(owner, "__dict__", None)
    return d.get(name) if d is not None else None


# Top-level modules whose classes and functions the objects check covers
# (with every submodule loaded at start).
_OBJECT_ROOTS = ("torch", "triton", "cacheon_runtime", "functools", "typing", "dataclasses",
                 "enum", "collections", "abc", "operator", "numbers", "copy", "copyreg",
                 "builtins", "json", "os", "posixpath", "io", "_io", "contextlib", "weakref",
                 "math", "itertools", "types", "inspect", "warnings", "threading", "pickle", "numpy")


# Class attributes Python itself adds on first use (reading a class's
# __annotations__, copyreg's slot-name cache).
_LAZY_CLASS_ATTRS = frozenset(("__annotations__", "__slotnames__"))


def _code_like(x):
    """True for what a class attribute holds as behaviour (a function, a
    descriptor, a class), not data torch itself updates (group.WORLD is
    set when the process group starts)."""
    return callable(x) or hasattr(type(x), "__get__")


# Class attributes whose data values decide behaviour: replacing one is a
# change (typing.runtime_checkable on a library protocol flips
# _is_runtime_protocol; typing.final's, abc.abstractmethod's markers).
_BEHAVIOUR_DATA = frozenset(("_is_runtime_protocol", "_is_protocol", "__final__", "__no_type_check__",
                             "__isabstractmethod__", "__abstractmethods__", "__override__",
                             "__dataclass_transform__"))

_is = operator.is_
_values = operator.methodcaller("values")  # a class's mappingproxy: its dict's own values()
_DICT = (dict.__len__, dict.keys, dict.values)  # a function's dicts: dict's own methods


def _entries(dicts, size=len, keys=iter, values=_values):
    """(sizes, keys, values) of dicts, in order: what _same_entries compares."""
    dicts = list(dicts)
    return [list(map(size, dicts))] + [list(chain.from_iterable(map(f, dicts))) for f in (keys, values)]


def _same_entries(dicts, saved, size=len, keys=iter, values=_values):
    """Whether dicts hold saved's keys and values in order: values by identity
    (a candidate's __eq__ could say yes), keys so too but a class's, always
    exact strings (keys=iter: compared by ==, cheaper); a function's dicts
    through dict's own methods (_DICT), never a subclass's."""
    dicts = list(dicts)
    sizes, ks, vs = saved
    if list(map(size, dicts)) != sizes:
        return False
    same = (list(chain.from_iterable(dicts)) == ks if keys is iter
            else all(map(_is, chain.from_iterable(map(keys, dicts)), ks)))
    return same and all(map(_is, chain.from_iterable(map(values, dicts)), vs))


def _dict_diff(now, was, missing=object()):
    """The first entry of a function's __dict__ (or __kwdefaults__) added,
    deleted or replaced since was, by identity; '' when none."""
    for k, v in was.items():
        cur = dict.get(now, k, missing)
        if cur is not v:
            return "%s %s" % (k, "deleted" if cur is missing else "replaced")
    for k in dict.keys(now):
        if k not in was:
            return "%s added" % (k,)
    return ""


class _Objects:
    """Identities of the classes, functions and bindings of the watched
    modules (_OBJECT_ROOTS), taken once before any candidate import."""

    def __init__(self):
        import types
        self.classes = []    # (class, {name: value})
        self.functions = []  # (f, code, defaults, kwdefaults, {kwdefaults}, {__dict__}, (module, qualname))
        self.bindings = []   # (module name, module, {name: class/function/module})
        seen = set()
        fn_type, mod_type = types.FunctionType, types.ModuleType

        def function(f):
            if id(f) not in seen:
                seen.add(id(f))
                kw = f.__kwdefaults__
                self.functions.append((f, f.__code__, f.__defaults__, kw, dict(kw or {}), dict(f.__dict__),
                                       (getattr(f, "__module__", "?"), getattr(f, "__qualname__", "?"))))

        for mname, m in list(sys.modules.items()):
            if not isinstance(m, mod_type) or mname.split(".")[0] not in _OBJECT_ROOTS:
                continue
            try:
                d = dict(vars(m))
            except Exception:  # noqa: BLE001
                continue
            keep = {}
            for k, v in d.items():
                if k.startswith("__") or not isinstance(v, (type, fn_type, mod_type)):
                    continue
                keep[k] = v
                if isinstance(v, fn_type):
                    function(v)
                elif isinstance(v, type) and id(v) not in seen:
                    seen.add(id(v))
                    try:
                        cd = dict(v.__dict__)
                    except Exception:  # noqa: BLE001
                        continue
                    self.classes.append((v, cd))
                    for x in cd.values():
                        if isinstance(x, (staticmethod, classmethod)):
                            x = x.__func__
                        elif isinstance(x, property):
                            for a in (x.fget, x.fset, x.fdel):
                                if isinstance(a, fn_type):
                                    function(a)
                            continue
                        if isinstance(x, fn_type):
                            function(x)
            self.bindings.append((mname, m, keep))
        self._index()

    def _index(self):
        """The fast paths' flat views of the snapshot."""
        self._getd = operator.attrgetter("__dict__")
        self._cls = [c for c, _d in self.classes]
        self._cls_entries = _entries(d for _c, d in self.classes)
        fs = self.functions
        self._fns = [f[0] for f in fs]
        self._fn_state = [(operator.attrgetter(a), [f[i] for f in fs])
                          for i, a in ((1, "__code__"), (2, "__defaults__"), (3, "__kwdefaults__"))]
        self._kw = [f[0] for f in fs if f[3] is not None]
        self._kw_entries = _entries((f[4] for f in fs if f[3] is not None), *_DICT)
        self._bare = [f[0] for f in fs if not f[5]]  # most: an empty __dict__ stays so
        self._attrd = [f[0] for f in fs if f[5]]
        self._attrd_entries = _entries((f[5] for f in fs if f[5]), *_DICT)
        bind = [(vars(m), k, v) for _n, m, keep in self.bindings for k, v in keep.items()]
        self._bind = [[b[i] for b in bind] for i in range(3)]

    def _functions_same(self):
        """The fast path: every function's code, defaults, kwdefaults and __dict__."""
        getd, fns = self._getd, self._fns
        return (all(all(map(_is, map(get, fns), was)) for get, was in self._fn_state)
                and not any(map(dict.__len__, map(getd, self._bare)))
                and _same_entries(map(operator.attrgetter("__kwdefaults__"), self._kw), self._kw_entries, *_DICT)
                and _same_entries(map(getd, self._attrd), self._attrd_entries, *_DICT))

    def changed(self):
        """'' when every watched object is as at start, else a reason.

        The fast paths compare flat lists in C by identity (never by ==: a
        replaced value's __eq__ could be candidate code that says yes); only
        where one differs does the exact check run, which names the change,
        applies the classes' exemptions and takes them as the new state."""
        try:
            same = _same_entries(map(self._getd, self._cls), self._cls_entries)
        except Exception:  # noqa: BLE001
            same = False
        if not same:
            for i, (c, d) in enumerate(self.classes):
                why = self._class_changed(c, d)
                if why:
                    return why
                if why is not None:  # only data torch updates changed
                    self.classes[i] = (c, dict(c.__dict__))
            self._cls_entries = _entries(d for _c, d in self.classes)
        try:
            same = self._functions_same()
        except Exception:  # noqa: BLE001
            same = False
        if not same:
            for f, code, defaults, kw, kwd, attrs, name in self.functions:
                where = "%s.%s" % name  # as at start: functools.wraps copies another's
                try:
                    now_kw = f.__kwdefaults__
                    if (f.__code__ is not code or f.__defaults__ is not defaults or now_kw is not kw
                            or (kw is not None and _dict_diff(now_kw, kwd))):
                        return "the code or defaults of %s were replaced" % where
                    why = _dict_diff(f.__dict__, attrs)
                except Exception:  # noqa: BLE001
                    return "the function %s cannot be read" % where
                if why:
                    return "the attributes of %s changed (%s: typing.final, functools.wraps and the like " \
                           "store into what they are applied to)" % (where, why)
        dicts, keys, vals = self._bind
        if not all(map(_is, map(dict.get, dicts, keys), vals)):
            for mname, m, keep in self.bindings:
                try:
                    md = vars(m)
                    for k, v in keep.items():
                        if md.get(k, keep) is not v:
                            return "%s.%s was rebound or deleted" % (mname, k)
                except Exception:  # noqa: BLE001
                    return "the module %s cannot be read" % mname
        return ""

    @staticmethod
    def _class_changed(c, d):
        """The exact check of one class: None when its __dict__ holds d's
        entries (by identity), '' when it differs only where torch updates
        data, else the change."""
        try:
            cd = c.__dict__
            if len(cd) == len(d) and all(map(_is, cd.values(), d.values())) and list(cd) == list(d):
                return None
            for k, v in d.items():
                cur = cd.get(k, d)
                if cur is not v and (_code_like(v) or _code_like(cur) or k in _BEHAVIOUR_DATA):
                    return "%s.%s.%s was replaced or deleted" % (
                        getattr(c, "__module__", "?"), getattr(c, "__qualname__", "?"), k)
            for k in list(cd.keys()):
                if k not in d and k not in _LAZY_CLASS_ATTRS and not lazydata.first_use_data(c, cd[k]):
                    return "%s.%s.%s was added" % (
                        getattr(c, "__module__", "?"), getattr(c, "__qualname__", "?"), k)
        except Exception:  # noqa: BLE001
            return "the class %r cannot be read" % (c,)
        return ""


class Guard:
    """What torch looked like before any candidate code ran."""

    def __init__(self, torch, hook=None):
        """torch: the module; hook: the audithook handle (or None)."""
        self.torch = torch
        self.hook = hook
        self.tensor_type = torch.Tensor
        C = torch._C
        self._fn_len = getattr(C, "_len_torch_function_stack", None)
        self._fn_enabled = getattr(C, "_is_torch_function_mode_enabled", None)
        self._disp_len = getattr(C, "_len_torch_dispatch_stack", None)
        self._tls_in = getattr(C, "_dispatch_tls_local_include_set", None)
        self._tls_ex = getattr(C, "_dispatch_tls_local_exclude_set", None)
        self._dump_table = getattr(C, "_dispatch_dump_table", None)
        self._str = str
        self._type = type
        self.refs = []
        for path, names in _WATCHED:
            owner = _resolve(path)
            if owner is None:
                continue
            for n in names:
                obj = _lookup(owner, n)
                if obj is not None:
                    self.refs.append((path, owner, n, obj))
        self.tls = self._tls()
        # The thread-local dispatch keys a dispatch mode or an interposer
        # switches on (checked with DispatchKeySet.has in quick; the whole
        # include/exclude sets are compared in full).
        dk = getattr(C, "DispatchKey", None)
        keys = tuple(getattr(dk, k) for k in ("Python", "PythonTLSSnapshot", "PythonDispatcher",
                                              "Functionalize", "FuncTorchDynamicLayerFrontMode")
                     if dk is not None and hasattr(dk, k))
        try:
            at_start = self._tls_in() if self._tls_in is not None else None
            # (only keys that were off at start: one on then is not news)
            self._python_keys = tuple(k for k in keys if at_start is not None and not at_start.has(k))
        except Exception:  # noqa: BLE001
            self._python_keys = ()
        self.tables = {}
        if self._dump_table is not None:
            for op in _OPS:
                try:
                    self.tables[op] = self._dump_table(op)
                except Exception:  # noqa: BLE001 - an operator this torch lacks
                    pass
        self.seen_violations = 0
        self.abc_state = abcstate.AbcState()
        self.conditions = conditions.read(torch)
        self.rng = rngstate.RngState(torch)
        self.objects_at_start, self.op_tables_at_start = _Objects(), optables.OpTables(torch)
        self.imports_at_start = importstate.ImportState()

    def _tls(self):
        try:
            inc = self._str(self._tls_in()) if self._tls_in is not None else ""
            exc = self._str(self._tls_ex()) if self._tls_ex is not None else ""
        except Exception:  # noqa: BLE001
            return ("?", "?")
        return (inc, exc)

    # -- checks ----------------------------------------------------------------

    def modes(self, whole_tls=False):
        """A reason when a torch function or dispatch mode is active (with
        whole_tls: also any other change of the thread's dispatch keys)."""
        try:
            if self._fn_len is not None and self._fn_len() > 0:
                return "a torch function mode is active (TorchFunctionMode left entered)"
            if self._fn_enabled is not None and self._fn_enabled():
                return "a torch function mode is active"
            if self._disp_len is not None and self._disp_len() > 0:
                return "a torch dispatch mode is active (TorchDispatchMode left entered)"
            if self._tls_in is not None and self._python_keys:
                inc = self._tls_in()
                for k in self._python_keys:
                    if inc.has(k):
                        return "a torch dispatch mode is active (dispatch key %s is on)" % k
        except Exception as e:  # noqa: BLE001
            return "torch's mode state cannot be read (%s)" % type(e).__name__
        if whole_tls:
            tls = self._tls()
            if tls != self.tls:
                return ("the thread's dispatch key state changed (include %s, exclude %s; at start %s, %s): "
                        "a dispatch mode or a dispatch-key guard is active" % (tls[0], tls[1], self.tls[0], self.tls[1]))
        return ""

    def tensors(self, groups):
        """A reason when a tensor object handed to the candidate is no
        longer a plain torch.Tensor."""
        for g in groups:
            for name, t in g.items():
                if self._type(t) is not self.tensor_type:
                    try:
                        tn = self._type(t).__qualname__
                    except Exception:  # noqa: BLE001
                        tn = "?"
                    return "tensor %s is now a %s, not a torch.Tensor (a subclass overriding " \
                           "__torch_function__/__torch_dispatch__)" % (name, tn)
        return ""

    def violations(self):
        """A reason when the audit hook refused something since the last
        call (every refusal is reported once)."""
        if self.hook is None:
            return ""
        n, first = self.hook.refusals(self.seen_violations)
        if n > self.seen_violations:
            k = n - self.seen_violations
            self.seen_violations = n
            return "the runtime's audit hook refused %d operation%s: %s" % (
                k, "" if k == 1 else "s", first or "(not recorded: too many)")
        return ""

    def identities(self):
        """A reason when a watched function or method was replaced."""
        for path, owner, name, obj in self.refs:
            try:
                now = _lookup(owner, name)
            except Exception:  # noqa: BLE001
                now = None
            if now is not obj:
                return "%s.%s was replaced" % (path, name)
        return ""

    def dispatch_tables(self):
        """A reason when a kernel was registered over a watched operator."""
        for op, table in self.tables.items():
            try:
                now = self._dump_table(op)
            except Exception:  # noqa: BLE001
                now = None
            if now != table:
                return "the dispatch table of %s changed (a kernel registered over it, torch.library)" % op
        return ""

    def abc_registrations(self):
        """A reason when candidate code changed what an ABC answers or
        what typing's caches hold (abcstate.AbcState: a class registered
        with a standard-library or torch ABC, or with a candidate ABC below
        one; a candidate ABC's own __subclasshook__; a cache entry that is
        no longer a subclass; a typing cache key whose equality is the
        candidate's): numbers.Real.register(torch.Tensor) changes
        isinstance for the whole process."""
        try:
            return self.abc_state.changed()
        except Exception as e:  # noqa: BLE001
            return "the ABCs' state cannot be read (%s)" % type(e).__name__

    def quick(self, *groups):
        """Modes, tensor types, audit-hook refusals: '' when all is as at start."""
        return self.modes() or self.tensors(groups) or self.violations()

    def full(self, *groups):
        """quick, plus dispatch keys, conditions, random generators, identities, tables."""
        # (identities and tables first: the conditions are read through
        # torch's own calls, which a replaced function or a registered
        # kernel would answer)
        return (self.quick(*groups) or self.modes(True) or self.identities() or self.dispatch_tables()
                or self.changed_conditions() or self.rng.changed() or self.abc_registrations())

    def changed_conditions(self):
        """A reason when a process-wide condition differs from the start."""
        now = conditions.read(self.torch)
        for (name, was), (_n, cur) in zip(self.conditions, now):
            if cur != was:
                return "%s is %r, not %r as at start (a mode or setting left changed)" % (name, cur, was)
        return ""

    def objects(self):
        """A reason when a class, function or module binding of torch, Triton,
        the runtime or the allowed standard library, an operator's Python kernel
        tables or the import machinery (importstate) changed since start (about
        10 ms on the CPU machine: at load and when verify asks, not per call)."""
        return (self.objects_at_start.changed() or self.op_tables_at_start.changed()
                or self.imports_at_start.changed())


class Safety:
    """A process's runtime guard in one object: the audit hook handle (or
    None), the Guard and the raw memory access, all built before any
    candidate import (the engine's main builds one and hands it to every
    load)."""

    def __init__(self, torch, hook=None):
        from . import rawmem
        self.hook = hook
        self.guard = Guard(torch, hook)
        self.raw = rawmem.RawMem(torch)


def no_grad(torch):
    """The context every candidate call runs in, in verify and in serving:
    gradients off (torch.no_grad; not inference_mode, whose inference
    tensors the engine's own buffers must not become) and the same stack
    headroom (_Headroom)."""
    return _Headroom(torch.no_grad())


# Frames a candidate call may nest, counted from the frame that calls it.
HEADROOM = 1000


class _Headroom:
    """Sets the recursion limit to the depth of the frame that entered it
    plus HEADROOM for the duration (restored after): the verify worker and
    the engine call candidates at different stack depths, and a kernel
    that recursed until RecursionError could tell the two apart by the
    frames it had left."""

    def __init__(self, inner):
        self.inner, self.old = inner, None

    def __enter__(self):
        depth, f = 0, sys._getframe(1)
        while f is not None:
            depth, f = depth + 1, f.f_back
        self.old = sys.getrecursionlimit()
        sys.setrecursionlimit(depth + HEADROOM)
        return self.inner.__enter__()

    def __exit__(self, *exc):
        try:
            return self.inner.__exit__(*exc)
        finally:
            sys.setrecursionlimit(self.old)


THREADS = 1


def same_conditions(torch):
    """The conditions every candidate runs under, applied at process start
    before any candidate import, identically in the verify worker and the
    engine: one intra-op thread on every device (the engine's rule on CUDA,
    see docs/performance.md, now also the CPU's and verify's), gradients
    off process-wide (and each call under no_grad)."""
    torch.set_num_threads(THREADS)
    torch.set_grad_enabled(False)


__all__ = ["Guard", "Safety", "no_grad", "same_conditions", "THREADS"]
