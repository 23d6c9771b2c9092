"""host: what a process that runs candidate code needs, shared by the verify
worker (``worker``, ``runcase``) and the arena engine (``engine.main``,
``engine.dispatch``).

- the protocol's private stdio (``private_stdio``) and the answer to every
  request when torch cannot be imported (``serve_without_torch``); the CUDA
  context created, and where Triton will be used its cache key computed,
  while torch imports (``cuda_preinit``, ``triton_key``);
- the Triton version a ``hello`` reports (``triton_version``);
- the candidate-module loader (``Loader``): imports a bundle's source under
  its module name, only from that bundle, and looks up its callables;
  ``module_paths`` and ``path_under`` say where an imported module lives;
- the verify output contract (``output_spec``, ``alloc_output``): an
  output's dtype, shape, stride and alignment, and a fresh allocation that
  honours them.

Standard library only at import time (a worker without torch still answers);
torch arrives as an ``identity.Ops`` argument.
"""

import importlib
import json
import os
import sys
import types

from . import rawmem, wire
from .wire import Failure, bad, field

# Lines are read in pieces of at most this many bytes while torch is missing
# (a longer line is answered piece by piece).
NO_TORCH_MAX_LINE = 16 << 20

MAX_ALIGNMENT = 1 << 20
MAX_OUTPUT_BYTES = 1 << 40


# ---------------------------------------------------------------------------
# The process


def private_stdio():
    """Keep private duplicates of fd 0 and fd 1 for the protocol; point fd 1
    and sys.stdout at stderr and fd 0 at an empty pipe."""
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass
    proto_out = os.dup(1)
    proto_in = os.dup(0)
    os.dup2(2, 1)
    r, w = os.pipe()
    os.dup2(r, 0)
    os.close(r)
    os.close(w)
    sys.stdout = sys.stderr
    # A process forked from here (multiprocessing, a DataLoader worker,
    # os.fork) must not be able to answer for the worker: close the
    # protocol descriptors in every child Python forks.
    if hasattr(os, "register_at_fork"):
        def _close_protocol():
            for fd in (proto_out, proto_in):
                try:
                    os.close(fd)
                except OSError:
                    pass
        os.register_at_fork(after_in_child=_close_protocol)
    return proto_out, os.fdopen(proto_in, "rb", buffering=1 << 16)


def cuda_preinit():
    """Start creating the CUDA device's primary context on a thread of its
    own while the caller imports torch, and return the function that waits
    for it (call it before the runtime guard is built, so that no thread of
    ours is left when candidate code runs).

    torch's first CUDA allocation would create the context only after the
    import (0.5 s on the H200, measured in session 14); the driver's calls
    release the GIL, so the import goes on meanwhile. torch then finds the
    context it would have made: the primary context of the device it uses
    (CACHEON_RANK, the device index every rank is given). Only where Go
    names the device cuda (CACHEON_DEVICE), in verify and in serving alike;
    any failure leaves the work to torch, which reports it as before.
    """
    if os.environ.get("CACHEON_DEVICE") != "cuda":
        return lambda: None
    try:
        index = int(os.environ.get("CACHEON_RANK", "0"))
    except ValueError:
        return lambda: None
    import threading

    def create():
        try:
            import ctypes
            lib = ctypes.CDLL("libcuda.so.1")
            dev, ctx = ctypes.c_int(), ctypes.c_void_p()
            if lib.cuInit(0) == 0 and lib.cuDeviceGet(ctypes.byref(dev), index) == 0:
                lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
        except Exception:  # noqa: BLE001 - torch initialises the device itself
            pass
        if os.environ.get("CACHEON_TRITON") == "1":
            triton_key()

    t = threading.Thread(target=create, name="cacheon-cuda-preinit", daemon=True)
    t.start()
    return t.join


def triton_key():
    """Compute Triton's cache key, so that the first Triton call does not:
    ``triton_key()`` hashes Triton's sources and its libtriton library
    (0.40 s of a kernel's first call on the H200, session 16), once a
    process. cuda_preinit's thread does it beside the torch import where
    Go says the process will use Triton (CACHEON_TRITON=1: the engine, a
    verify worker whose bundle names Triton): done in every worker it
    saved the Triton examples' verify 0.26–0.38 s on the H200 and cost the
    others about 0.25 s (session 19). Any failure leaves the work to
    Triton."""
    try:
        import importlib
        import importlib.util
        if importlib.util.find_spec("triton") is None:
            return
        for name in ("triton.runtime.cache", "triton.compiler.compiler"):
            try:
                f = getattr(importlib.import_module(name), "triton_key", None)
            except ImportError:
                continue
            if callable(f):
                f()
                return
    except Exception:  # noqa: BLE001 - Triton computes it at the first call
        pass


def serve_without_torch(proto_out, proto_in, exc, max_line=NO_TORCH_MAX_LINE):
    """torch could not be imported: answer every request with that fact."""
    err = wire.exc_error("internal", exc, "import torch failed: ")
    while True:
        line = proto_in.readline(max_line + 1)
        if not line:
            return 3
        if not line.strip():
            continue
        rid = ""
        op = None
        try:
            req = json.loads(line)
            if isinstance(req, dict):
                rid = req.get("id", "") if isinstance(req.get("id", ""), str) else ""
                op = req.get("op")
        except ValueError:
            pass
        reply = {"id": rid, "ok": True} if op == "shutdown" else {"id": rid, "ok": False, "error": err}
        os.write(proto_out, (json.dumps(reply, separators=(",", ":")) + "\n").encode("utf-8", "replace"))
        if op == "shutdown":
            return 0


def init_group(torch, backend, init_method, rank, world, device, local_rank):
    """Join the default process group (gloo or NCCL) and return it; any
    failure is the group_error Failure."""
    try:
        import torch.distributed as dist
        if not dist.is_available():
            raise RuntimeError("torch.distributed is not available in this build")
        if device.startswith("cuda"):
            torch.cuda.set_device(local_rank)
        dist.init_process_group(backend=backend, init_method=init_method,
                                rank=rank, world_size=world)
        return dist.group.WORLD
    except BaseException as e:  # noqa: B902
        raise Failure(wire.exc_error("group_error", e))


def make_subgroups(parts, rank):
    """Create every subgroup of the partition parts (torch.distributed's
    new_group, in order: every rank must create every subgroup, those it
    is not in too) and return the one rank is in; any failure is the
    group_error Failure."""
    try:
        import torch.distributed as dist
        mine = None
        for ranks in parts:
            g = dist.new_group(ranks=list(ranks))
            if rank in ranks:
                mine = g
        if mine is None:
            raise RuntimeError("rank %d is in none of the subgroups" % rank)
        return mine
    except BaseException as e:  # noqa: B902
        raise Failure(wire.exc_error("group_error", e))


def triton_version():
    """The version of the importable triton package, "unknown" when it has
    none, None when there is no triton."""
    mod = sys.modules.get("triton")
    if mod is not None:
        v = getattr(mod, "__version__", None)
        return str(v) if v is not None else "unknown"
    try:
        import importlib.util
        if importlib.util.find_spec("triton") is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        from importlib import metadata
        return metadata.version("triton")
    except Exception:  # noqa: BLE001
        return "unknown"


# ---------------------------------------------------------------------------
# Candidate modules


def module_name(source):
    """kernels/silu.py -> kernels.silu; kernels/__init__.py -> kernels."""
    if not source.endswith(".py") or source.startswith("/") or "\\" in source:
        raise bad("source %r must be a relative .py path" % source)
    parts = source[:-3].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(p.isidentifier() for p in parts):
        raise bad("source %r does not name an importable module" % source)
    return ".".join(parts)


def path_under(path, root):
    """True when path, resolved, is root (a realpath) or lies below it."""
    try:
        p = os.path.realpath(path)
    except (OSError, TypeError, ValueError):
        return False
    return p == root or p.startswith(root + os.sep)


def module_paths(mod):
    """The file of a module, or the directories of a package ([] when
    neither can be read)."""
    try:
        f = getattr(mod, "__file__", None)
        if isinstance(f, str):
            return [f]
        return [p for p in list(getattr(mod, "__path__", []) or []) if isinstance(p, str)]
    except BaseException:  # noqa: B902 - module __getattr__ is candidate code
        return []


class Loader:
    """Candidate modules imported from bundles, by module id (the verify
    worker's ``load`` request; the engine's stack rows).

    With the process's runtime guard (``hook``: the audithook handle,
    ``guard``: a guard.Guard, both built before any candidate import), the
    loader registers each bundle root with the audit hook and arms it
    right before importing candidate code, and after each import asks the
    guard whether the import changed torch (a mode left entered, a method
    replaced, a kernel registered, an operation the hook refused): then
    the load fails with class ``tamper``."""

    def __init__(self, hook=None, guard=None):
        self.modules = {}   # module id -> (module, bundle, source)
        self.own_names = {}  # bundle root -> its top-level module names (rebound)
        self.hook = hook
        self.guard = guard

    def load(self, mid, bundle, source, entry, prepare=""):
        """Import source from the bundle directory as module id mid (once;
        the id must name the same bundle and source again) and check that
        entry and, when named, prepare are callables of it. Returns the
        module; import_error or missing_entry failures otherwise."""
        if not mid or not entry:
            raise bad("module and entry must be non-empty")
        if not os.path.isabs(bundle):
            raise bad("bundle %r must be an absolute path" % bundle)
        modname = module_name(source)
        root = os.path.realpath(bundle)
        if mid in self.modules:
            _m, b, s = self.modules[mid]
            if (b, s) != (bundle, source):
                raise bad("module id %r already names %s in %s" % (mid, s, b))
        else:
            mod = self._import(bundle, root, source, modname)
            self.modules[mid] = (mod, bundle, source)
        mod = self.modules[mid][0]
        self.lookup(mod, entry, "entry")
        if prepare:
            self.lookup(mod, prepare, "prepare")
        return mod

    def _import(self, bundle, root, source, modname):
        # Every package on the module's path must come from this bundle; a
        # name already taken by another module (stdlib, torch, another
        # bundle) cannot be imported under its path name.
        parts = modname.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            existing = sys.modules.get(name)
            if existing is not None and not any(path_under(p, root) for p in module_paths(existing)):
                raise Failure(wire.plain_error(
                    "import_error", "ImportError",
                    "module name %r of %s is already taken by a module outside the bundle"
                    % (name, source)))
        if root not in self.own_names:
            try:
                own = {e[:-3] if e.endswith(".py") else e for e in os.listdir(root)}
            except OSError:
                own = set()
            self.own_names[root] = {n for n in own if n not in sys.modules
                                    or any(path_under(p, root) for p in module_paths(sys.modules[n]))}
        while bundle in sys.path:
            sys.path.remove(bundle)
        sys.path.insert(0, bundle)
        importlib.invalidate_caches()
        if self.hook is not None:
            self.hook.add_bundle(root)
            self.hook.arm()
        try:
            mod = importlib.import_module(modname)
        except BaseException as e:  # noqa: B902 - includes SystemExit from the module body
            problem = self.guard.full() if self.guard is not None else ""
            if problem:
                raise Failure(tamper_error(problem, "importing %s: " % source))
            raise Failure(wire.exc_error("import_error", e))
        problem = (self.guard.full() or self.guard.objects()) if self.guard is not None else ""
        if problem:
            raise Failure(tamper_error(problem, "importing %s: " % source))
        problem = foreign_modules(mod, root)
        if problem:
            raise Failure(tamper_error(problem, "importing %s: " % source))
        want = os.path.realpath(os.path.join(bundle, source))
        got = module_paths(mod)
        if not got or os.path.realpath(got[0]) != want:
            raise Failure(wire.plain_error(
                "import_error", "ImportError",
                "%s imported as %r from %r, not from the bundle" % (source, modname, got[:1])))
        return mod

    def rebound(self):
        """A reason when an entry of sys.modules named like a module of a
        loaded bundle (its top-level name one of the bundle's files or
        packages) is not a module of that bundle: a candidate that stores
        ``sys.modules["helper"] = os`` before its entry's ``import helper``
        binds os there (rt50a's a6). The names are the bundle's files and
        packages that no module outside it held when it was first loaded
        (one that shadows a module the process holds is refused at load,
        foreign_modules). Checked when verify checks the objects (after a
        row's first and last case); '' when none."""
        for name, m in list(sys.modules.items()):
            if not isinstance(name, str):
                return "sys.modules holds a key that is not a string (%s)" % type(name).__name__
            top = name.split(".")[0]
            for root, own in self.own_names.items():
                if top in own and not any(path_under(p, root) for p in module_paths(m)):
                    return "sys.modules[%r] is %s, not a module of the bundle that names it" % (
                        name, _describe(m))
        return ""

    def lookup(self, mod, name, what):
        """The callable `name` of mod, or a missing_entry failure."""
        try:
            fn = getattr(mod, name, None)
            ok = callable(fn)
        except BaseException as e:  # noqa: B902 - module __getattr__
            raise Failure(wire.exc_error("missing_entry", e, "looking up %s %r: " % (what, name)))
        if not ok:
            raise Failure(wire.plain_error(
                "missing_entry", "AttributeError",
                "%s %r is %s in %s" % (what, name,
                                       "missing" if fn is None else "not callable",
                                       getattr(mod, "__name__", "?"))))
        return fn


# Top-level modules a module object in a candidate's namespace may be
# without a file of its own (besides sys.builtin_module_names).
_FILELESS_OK = frozenset(("math", "itertools", "_operator", "_functools", "_collections", "_abc"))


def _describe(m):
    """A short description of what a sys.modules entry holds."""
    name = getattr(m, "__name__", None) if isinstance(m, types.ModuleType) else None
    if isinstance(name, str):
        paths = module_paths(m)
        return "module %r (%s)" % (name, paths[0] if paths else "no file")
    return "a %s" % type(m).__name__


def _attr_path(name):
    """The object a dotted name reaches from its top-level module by plain
    attribute reads (torch.ops.aten), or None."""
    parts = name.split(".")
    obj = sys.modules.get(parts[0])
    try:
        for p in parts[1:]:
            if obj is None:
                return None
            obj = getattr(obj, p, None)
    except Exception:  # noqa: BLE001
        return None
    return obj


def foreign_modules(mod, root):
    """A reason when a module bound in the namespace of a candidate module
    (mod and every module loaded from the bundle root) is neither a file of
    the bundle nor a module with a file of its own (an installed package or
    the standard library; the scan's allow-list decides which), or is named
    like a module of the bundle but lives elsewhere: a bundle module named
    like one the process already holds (``__main__``, ``cython_runtime``, an
    installed package the scanning interpreter lacked) binds that one at
    run time instead."""
    try:
        own = {e[:-3] if e.endswith(".py") else e for e in os.listdir(root)}
    except OSError:
        own = set()
    cands = [m for m in list(sys.modules.values())
             if isinstance(m, types.ModuleType) and any(path_under(p, root) for p in module_paths(m))]
    if mod not in cands:
        cands.append(mod)
    for m in cands:
        try:
            items = list(vars(m).items())
        except Exception:  # noqa: BLE001
            continue
        for k, v in items:
            if not isinstance(v, types.ModuleType):
                continue
            paths = module_paths(v)
            name = getattr(v, "__name__", "?")
            if not isinstance(name, str):
                name = "?"
            if paths and all(isinstance(p, str) and os.path.isabs(p) for p in paths):
                if name.split(".")[0] in own and not any(path_under(p, root) for p in paths):
                    return "module %r (bound to %s in %s) is named like a module of the bundle but is %s" % (
                        name, k, getattr(m, "__name__", "?"), paths[0])
                continue
            if (name in sys.builtin_module_names or name.split(".")[0] in _FILELESS_OK) and sys.modules.get(name) is v:
                continue  # built into the interpreter: no bundle file can stand for it
            if name.split(".")[0] in ("torch", "triton") and (sys.modules.get(name) is v or _attr_path(name) is v):
                continue  # torch.ops, torch.ops.aten: module objects torch builds
            return "module %r (bound to %s in %s) has no file: it is not the bundle's module nor an installed one" % (
                name, k, getattr(m, "__name__", "?"))
    return ""


def tamper_error(problem, prefix=""):
    """The protocol error object of a guard finding (class tamper): the
    candidate changed how the runtime's torch behaves."""
    return wire.plain_error("tamper", "TamperError", "runtime guard: " + prefix + problem)


# ---------------------------------------------------------------------------
# The verify output contract


class OutSpec:
    __slots__ = ("name", "dtype", "shape", "stride", "align", "elsize", "storage")

    def __init__(self, name, dtype, shape, stride, align, elsize, storage):
        self.name, self.dtype, self.shape, self.stride = name, dtype, shape, stride
        self.align, self.elsize, self.storage = align, elsize, storage


class Output:
    """One validator-allocated output: the allocation (base), the contract
    view the worker dumps (contract) and the tensor object handed to the
    candidate (visible), plus its poison value, that value's element bytes
    (pattern, what rawmem.RawMem.fill writes over base) and the
    allocation's address and size in bytes (addr, nbytes)."""
    __slots__ = ("base", "contract", "visible", "poison", "pattern", "addr", "nbytes")

    def __init__(self, base, contract, visible, poison, pattern=None, addr=0, nbytes=0):
        self.base, self.contract, self.visible, self.poison = base, contract, visible, poison
        self.pattern, self.addr, self.nbytes = pattern, addr, nbytes


def placed_like(ops, t, device, rng):
    """Fresh memory for a tensor shaped like t (rng: a random.Random):
    an allocation of its own (offset 0, the allocator's alignment, as the
    engine's caches and weights are), or a contiguous view at a random
    16-byte-aligned offset, up to the tensor's own size, inside a larger
    allocation (as the engine's slices of a packed batch are). Verify's inputs and the
    engine's per-call copies are both made this way, each tensor drawn on
    its own, so that no pattern of storage sizes, offsets or alignments
    across a call's inputs is one that serving shows and verify does not."""
    size, dtype = list(ops.size(t)), ops.dtype_of(t)
    # Three layouts at equal odds: an allocation of its own, a few 16-byte
    # units into a larger one (a slice near the start of its batch), or
    # anywhere up to the tensor's own size into it (a later sequence of a
    # packed prefill).
    mode = rng.randrange(3)
    if mode == 0:
        return ops.empty(size, dtype=dtype, device=device)
    unit = max(1, 16 // ops.element_size(t))
    n = 1
    for d in size:
        n *= d
    if mode == 1:
        lo = rng.randrange(17) * unit
    else:
        lo = rng.randrange(n // unit + 1) * unit
    hi = rng.randrange(17) * unit
    base = ops.empty((lo + n + hi,), dtype=dtype, device=device)
    stride, acc = [0] * len(size), 1
    for i in range(len(size) - 1, -1, -1):
        stride[i] = acc
        acc *= max(size[i], 1)
    return ops.as_strided(base, size, stride, lo)


def renew_visible(ops, o):
    """A fresh tensor object over output o's memory with the contract's
    layout, made as alloc_output makes the first one: each call of a
    candidate gets its own objects (the engine allocates every call's
    outputs anew), so object identity does not tell a replay from a new
    call."""
    o.visible = ops.as_strided(o.base, ops.size(o.contract), ops.stride(o.contract), ops.storage_offset(o.contract))
    return o.visible


def output_spec(ops, o):
    """The OutSpec of an output spec object {"name", "dtype", "shape",
    "stride"?, "alignment"?} (ops: identity.Ops); bad_request when it is
    malformed. Without a stride the output is contiguous; alignment 0 means
    the element size."""
    if not isinstance(o, dict):
        raise bad("output spec must be an object")
    name = field(o, "name", str)
    dtname = field(o, "dtype", str)
    if not name:
        raise bad("empty output name")
    dt = ops.dtypes.get(dtname)
    if dt is None:
        raise bad("output %r: unsupported dtype %r" % (name, dtname))
    shape = wire.int_list(field(o, "shape", list), "output %r shape" % name)
    elsize = ops.element_size(ops.empty((), dtype=dt))
    if o.get("stride") is not None:
        stride = wire.int_list(o["stride"], "output %r stride" % name)
        if len(stride) != len(shape):
            raise bad("output %r: %d strides for %d dims" % (name, len(stride), len(shape)))
    else:
        stride, acc = [0] * len(shape), 1
        for i in range(len(shape) - 1, -1, -1):
            stride[i] = acc
            acc *= max(shape[i], 1)
    align = field(o, "alignment", int, 0, required=False)
    if align == 0:
        align = elsize
    if align < elsize or align & (align - 1) or align > MAX_ALIGNMENT:
        raise bad("output %r: bad alignment %d" % (name, align))
    if any(d == 0 for d in shape):
        storage = 0
    else:
        storage = 1 + sum((d - 1) * s for d, s in zip(shape, stride))
    if storage * elsize > MAX_OUTPUT_BYTES:
        raise bad("output %r is too large" % name)
    return OutSpec(name, dt, shape, stride, align, elsize, storage)


def alloc_output(ops, s, device):
    """Fresh allocation of storage + alignment bytes for OutSpec s on
    device, viewed with as_strided so that data_ptr() % alignment == 0.
    The poison is NaN for floats, False for bool and the integer dtype's
    minimum otherwise."""
    count = s.storage + s.align // s.elsize
    base = ops.empty((count,), dtype=s.dtype, device=device)
    addr = ops.data_ptr(base)
    pad = (-addr) % s.align
    if pad % s.elsize:
        raise RuntimeError("allocator returned a pointer not aligned to the element size")
    off = pad // s.elsize
    contract = ops.as_strided(base, s.shape, s.stride, off)
    visible = ops.as_strided(base, s.shape, s.stride, off)
    if s.dtype in ops.floats:
        poison = float("nan")
    elif s.dtype is ops.torch.bool:
        poison = False
    else:
        poison = ops.iinfo(s.dtype).min
    return Output(base, contract, visible, poison, rawmem.pattern(ops.torch, s.dtype, poison),
                  addr, count * s.elsize)
