"""worker: the verify worker, the hostile side of the Go validator.

Started by Go (see docs/worker-protocol.md) as::

    python3 -I -c "import sys; sys.path.insert(0, RUNTIME_PARENT); \
        from cacheon_runtime import worker; worker.main()"

It reads one JSON request per line from stdin and writes exactly one JSON
reply line per request to a private duplicate of the original stdout. File
descriptor 1 and ``sys.stdout`` point at stderr and fd 0 at an empty pipe,
so candidate code can neither forge a protocol line by printing nor steal a
request by reading stdin.

The worker runs candidate code and reports raw facts only: the outputs and
inputs after each call (safetensors files in the job directory), storage
identity facts before and after each call, and exception text. It never sees
a reference, a threshold or a verdict, and decides nothing.

Only the standard library and torch are imported, and nothing from the
candidate before a ``load`` request.
"""

import importlib
import json
import os
import sys

from . import runcase, wire
from .wire import Failure, bad, field

MAX_REQUEST_BYTES = 16 << 20


def _module_name(source):
    """kernels/silu.py -> kernels.silu; kernels/__init__.py -> kernels."""
    if not source.endswith(".py") or source.startswith("/") or "\\" in source:
        raise bad("source %r must be a relative .py path" % source)
    parts = source[:-3].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(p.isidentifier() for p in parts):
        raise bad("source %r does not name an importable module" % source)
    return ".".join(parts)


def _under(path, root):
    try:
        p = os.path.realpath(path)
    except (OSError, TypeError, ValueError):
        return False
    return p == root or p.startswith(root + os.sep)


def _module_paths(mod):
    try:
        f = getattr(mod, "__file__", None)
        if isinstance(f, str):
            return [f]
        return [p for p in list(getattr(mod, "__path__", []) or []) if isinstance(p, str)]
    except BaseException:  # noqa: B902 - module __getattr__ is candidate code
        return []


# ---------------------------------------------------------------------------
# The worker


class Worker:
    def __init__(self, proto_out, proto_in, torch):
        from . import identity, stio
        self.out_fd = proto_out
        self.inp = proto_in
        self.torch = torch
        self.stio = stio
        self.ops = identity.Ops(torch)
        self.modules = {}   # module id -> (module, bundle, source)
        self.group = None
        self.group_key = None

    # -- transport ---------------------------------------------------------

    def send(self, obj):
        wire.send_line(self.out_fd, obj)

    def serve(self):
        handlers = {"hello": self.op_hello, "load": self.op_load,
                    "group": self.op_group, "run": self.op_run}

        def on_error(rid, e):  # the worker itself failed
            return {"id": rid, "ok": False, "error": wire.exc_error("internal", e)}, None
        return wire.serve(self.inp, self.send, handlers, MAX_REQUEST_BYTES, on_error)

    # -- hello -------------------------------------------------------------

    def op_hello(self, req):
        torch = self.torch
        cuda = bool(torch.cuda.is_available())
        return {"python": "%d.%d.%d" % tuple(sys.version_info[:3]),
                "torch": str(torch.__version__),
                "cuda": cuda,
                "device_count": int(torch.cuda.device_count()) if cuda else 0,
                "triton": _triton_version(),
                "pid": os.getpid()}

    # -- load --------------------------------------------------------------

    def op_load(self, req):
        mid = field(req, "module", str)
        bundle = field(req, "bundle", str)
        source = field(req, "source", str)
        entry = field(req, "entry", str)
        prepare = field(req, "prepare", str, "", required=False)
        if not mid or not entry:
            raise bad("module and entry must be non-empty")
        if not os.path.isabs(bundle):
            raise bad("bundle %r must be an absolute path" % bundle)
        modname = _module_name(source)
        root = os.path.realpath(bundle)
        if mid in self.modules:
            _m, b, s = self.modules[mid]
            if (b, s) != (bundle, source):
                raise bad("module id %r already names %s in %s" % (mid, s, b))
        else:
            mod = self._import(bundle, root, source, modname)
            self.modules[mid] = (mod, bundle, source)
        mod = self.modules[mid][0]
        self._callable(mod, entry, "entry", "missing_entry")
        if prepare:
            self._callable(mod, prepare, "prepare", "missing_entry")
        return {}

    def _import(self, bundle, root, source, modname):
        # Every package on the module's path must come from this bundle; a
        # name already taken by another module (stdlib, torch, another
        # bundle) cannot be imported under its path name.
        parts = modname.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            existing = sys.modules.get(name)
            if existing is not None and not any(_under(p, root) for p in _module_paths(existing)):
                raise Failure(wire.plain_error(
                    "import_error", "ImportError",
                    "module name %r of %s is already taken by a module outside the bundle"
                    % (name, source)))
        while bundle in sys.path:
            sys.path.remove(bundle)
        sys.path.insert(0, bundle)
        importlib.invalidate_caches()
        try:
            mod = importlib.import_module(modname)
        except BaseException as e:  # noqa: B902 - includes SystemExit from the module body
            raise Failure(wire.exc_error("import_error", e))
        want = os.path.realpath(os.path.join(bundle, source))
        got = _module_paths(mod)
        if not got or os.path.realpath(got[0]) != want:
            raise Failure(wire.plain_error(
                "import_error", "ImportError",
                "%s imported as %r from %r, not from the bundle" % (source, modname, got[:1])))
        return mod

    def _callable(self, mod, name, what, cls):
        try:
            fn = getattr(mod, name, None)
            ok = callable(fn)
        except BaseException as e:  # noqa: B902 - module __getattr__
            raise Failure(wire.exc_error(cls, e, "looking up %s %r: " % (what, name)))
        if not ok:
            raise Failure(wire.plain_error(
                cls, "AttributeError",
                "%s %r is %s in %s" % (what, name,
                                       "missing" if fn is None else "not callable",
                                       getattr(mod, "__name__", "?"))))
        return fn

    # -- group -------------------------------------------------------------

    def op_group(self, req):
        backend = field(req, "backend", str)
        init_method = field(req, "init_method", str)
        rank = field(req, "rank", int)
        world = field(req, "world_size", int)
        device = field(req, "device", str, "cpu", required=False)
        local_rank = field(req, "local_rank", int, rank, required=False)
        if world < 1 or not 0 <= rank < world or local_rank < 0:
            raise bad("bad rank %d / world_size %d / local_rank %d" % (rank, world, local_rank))
        key = (backend, init_method, rank, world, device, local_rank)
        if self.group_key is not None:
            if key == self.group_key:
                return {}
            raise Failure(wire.plain_error(
                "group_error", "RuntimeError", "a different process group is already initialized"))
        torch = self.torch
        try:
            import torch.distributed as dist
            if not dist.is_available():
                raise RuntimeError("torch.distributed is not available in this build")
            if device.startswith("cuda"):
                torch.cuda.set_device(local_rank)
            dist.init_process_group(backend=backend, init_method=init_method,
                                    rank=rank, world_size=world)
            self.group = dist.group.WORLD
        except BaseException as e:  # noqa: B902
            raise Failure(wire.exc_error("group_error", e))
        self.group_key = key
        return {}

    # -- run ---------------------------------------------------------------

    def op_run(self, req):
        return runcase.run(self, req)

    def lookup(self, mod, name, what):
        """The callable `name` of mod, or a missing_entry failure."""
        return self._callable(mod, name, what, "missing_entry")


def _triton_version():
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


def _private_stdio():
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


def _serve_without_torch(proto_out, proto_in, exc):
    """torch could not be imported: answer every request with that fact."""
    err = wire.exc_error("internal", exc, "import torch failed: ")
    while True:
        line = proto_in.readline(MAX_REQUEST_BYTES + 1)
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


def main():
    proto_out, proto_in = _private_stdio()
    try:
        import torch
        w = Worker(proto_out, proto_in, torch)
    except Exception as e:  # noqa: BLE001 - e.g. no torch: say so on every request
        code = _serve_without_torch(proto_out, proto_in, e)
    else:
        code = w.serve()
    try:
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    os._exit(code)
