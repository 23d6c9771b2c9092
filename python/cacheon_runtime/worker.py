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
import traceback

MAX_REQUEST_BYTES = 16 << 20
MAX_TEXT_BYTES = 4096

_PHASE_EAGER = "eager"
_PHASE_REPLAY = "replay"
_PHASE_GRAPH = "graph_replay"

_ARG_KINDS = ("input", "output", "scalar", "prepared", "group")


class Failure(Exception):
    """A request failed; carries the protocol error object."""

    def __init__(self, error):
        Exception.__init__(self, error.get("message", ""))
        self.error = error


def _clip(text, limit=MAX_TEXT_BYTES, tail=False):
    """Return text as valid UTF-8 of at most limit bytes (head or tail)."""
    if not isinstance(text, str):
        try:
            text = str(text)
        except BaseException:  # noqa: B902 - hostile __str__
            text = "<unprintable>"
    b = text.encode("utf-8", "replace")
    if len(b) > limit:
        b = b[-limit:] if tail else b[:limit]
    return b.decode("utf-8", "ignore")


def _exc_error(cls, exc, prefix=""):
    """Protocol error object for an exception raised by candidate code."""
    try:
        name = type(exc).__name__
    except BaseException:  # noqa: B902
        name = "BaseException"
    try:
        msg = str(exc)
    except BaseException:  # noqa: B902
        msg = "<unprintable exception>"
    try:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except BaseException:  # noqa: B902
        tb = ""
    return {"class": cls, "type": _clip(name, 256), "message": _clip(prefix + msg),
            "traceback": _clip(tb, tail=True)}


def _plain_error(cls, typ, message):
    return {"class": cls, "type": typ, "message": _clip(message), "traceback": ""}


def _bad(message):
    return Failure(_plain_error("bad_request", "BadRequest", message))


# ---------------------------------------------------------------------------
# Request field validation (Go's requests; a failure here is a Go bug)


def _get(req, key, kind, default=None, required=True):
    if key not in req:
        if required:
            raise _bad("missing field %r" % key)
        return default
    v = req[key]
    if kind is int:
        ok = isinstance(v, int) and not isinstance(v, bool)
    elif kind is float:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    else:
        ok = isinstance(v, kind)
    if not ok:
        raise _bad("field %r must be %s" % (key, getattr(kind, "__name__", kind)))
    return v


def _str_list(req, key, required=False):
    v = _get(req, key, list, [], required)
    if not all(isinstance(x, str) for x in v):
        raise _bad("field %r must be a list of strings" % key)
    return v


def _int_list(v, what):
    if not isinstance(v, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
        raise _bad("%s must be a list of non-negative integers" % what)
    return v


def _module_name(source):
    """kernels/silu.py -> kernels.silu; kernels/__init__.py -> kernels."""
    if not source.endswith(".py") or source.startswith("/") or "\\" in source:
        raise _bad("source %r must be a relative .py path" % source)
    parts = source[:-3].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(p.isidentifier() for p in parts):
        raise _bad("source %r does not name an importable module" % source)
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
        self.out_fd = proto_out
        self.inp = proto_in
        self.torch = torch
        from . import stio
        self.stio = stio
        self.modules = {}   # module id -> (module, bundle, source)
        self.group = None
        self.group_key = None
        T = torch.Tensor
        # Bound before any candidate code runs, so later monkeypatching of
        # torch.Tensor does not change what the worker measures or writes.
        self._data_ptr = T.data_ptr
        self._storage_offset = T.storage_offset
        self._size = T.size
        self._stride = T.stride
        self._fill = T.fill_
        self._copy = T.copy_
        self._as_strided = T.as_strided
        self._detach = T.detach
        self._contiguous = T.contiguous
        self._to = T.to
        self._dtype_get = T.dtype.__get__
        self._device_get = T.device.__get__
        us = getattr(T, "untyped_storage", None)
        self._storage = us if us is not None else T.storage
        self._empty = torch.empty
        self._iinfo = torch.iinfo
        self._dtypes = {
            "bool": torch.bool, "uint8": torch.uint8, "int32": torch.int32,
            "int64": torch.int64, "float16": torch.float16,
            "bfloat16": torch.bfloat16, "float32": torch.float32,
            "float64": torch.float64,
        }
        self._floats = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

    # -- transport ---------------------------------------------------------

    def send(self, obj):
        line = json.dumps(obj, ensure_ascii=False, allow_nan=False,
                          separators=(",", ":")).encode("utf-8", "replace") + b"\n"
        view = memoryview(line)
        while view:
            n = os.write(self.out_fd, view)
            view = view[n:]

    def serve(self):
        handlers = {"hello": self.op_hello, "load": self.op_load,
                    "group": self.op_group, "run": self.op_run}
        while True:
            line = self.inp.readline(MAX_REQUEST_BYTES + 1)
            if not line:
                return 0
            if len(line) > MAX_REQUEST_BYTES and not line.endswith(b"\n"):
                while True:  # discard the rest of the oversized line
                    rest = self.inp.readline(1 << 20)
                    if not rest or rest.endswith(b"\n"):
                        break
                self.send({"id": "", "ok": False,
                           "error": _plain_error("bad_request", "BadRequest", "request line too long")})
                continue
            if not line.strip():
                continue
            rid = ""
            try:
                try:
                    req = json.loads(line)
                except ValueError as e:
                    raise _bad("request is not JSON: %s" % e)
                if not isinstance(req, dict):
                    raise _bad("request is not a JSON object")
                rid = req.get("id", "")
                if not isinstance(rid, str):
                    rid = ""
                    raise _bad("request id must be a string")
                op = req.get("op")
                if op == "shutdown":
                    self.send({"id": rid, "ok": True})
                    return 0
                h = handlers.get(op) if isinstance(op, str) else None
                if h is None:
                    raise _bad("unknown op %r" % (op,))
                reply = {"id": rid, "ok": True}
                reply.update(h(req) or {})
            except Failure as f:
                reply = {"id": rid, "ok": False, "error": f.error}
            except Exception as e:  # the worker itself failed
                reply = {"id": rid, "ok": False, "error": _exc_error("internal", e)}
            self.send(reply)

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
        mid = _get(req, "module", str)
        bundle = _get(req, "bundle", str)
        source = _get(req, "source", str)
        entry = _get(req, "entry", str)
        prepare = _get(req, "prepare", str, "", required=False)
        if not mid or not entry:
            raise _bad("module and entry must be non-empty")
        if not os.path.isabs(bundle):
            raise _bad("bundle %r must be an absolute path" % bundle)
        modname = _module_name(source)
        root = os.path.realpath(bundle)
        if mid in self.modules:
            _m, b, s = self.modules[mid]
            if (b, s) != (bundle, source):
                raise _bad("module id %r already names %s in %s" % (mid, s, b))
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
                raise Failure(_plain_error(
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
            raise Failure(_exc_error("import_error", e))
        want = os.path.realpath(os.path.join(bundle, source))
        got = _module_paths(mod)
        if not got or os.path.realpath(got[0]) != want:
            raise Failure(_plain_error(
                "import_error", "ImportError",
                "%s imported as %r from %r, not from the bundle" % (source, modname, got[:1])))
        return mod

    def _callable(self, mod, name, what, cls):
        try:
            fn = getattr(mod, name, None)
            ok = callable(fn)
        except BaseException as e:  # noqa: B902 - module __getattr__
            raise Failure(_exc_error(cls, e, "looking up %s %r: " % (what, name)))
        if not ok:
            raise Failure(_plain_error(
                cls, "AttributeError",
                "%s %r is %s in %s" % (what, name,
                                       "missing" if fn is None else "not callable",
                                       getattr(mod, "__name__", "?"))))
        return fn

    # -- group -------------------------------------------------------------

    def op_group(self, req):
        backend = _get(req, "backend", str)
        init_method = _get(req, "init_method", str)
        rank = _get(req, "rank", int)
        world = _get(req, "world_size", int)
        device = _get(req, "device", str, "cpu", required=False)
        local_rank = _get(req, "local_rank", int, rank, required=False)
        if world < 1 or not 0 <= rank < world or local_rank < 0:
            raise _bad("bad rank %d / world_size %d / local_rank %d" % (rank, world, local_rank))
        key = (backend, init_method, rank, world, device, local_rank)
        if self.group_key is not None:
            if key == self.group_key:
                return {}
            raise Failure(_plain_error("group_error", "RuntimeError",
                                       "a different process group is already initialized"))
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
            raise Failure(_exc_error("group_error", e))
        self.group_key = key
        return {}

    # -- run ---------------------------------------------------------------

    def op_run(self, req):
        torch = self.torch
        mid = _get(req, "module", str)
        if mid not in self.modules:
            raise _bad("module %r is not loaded" % mid)
        mod = self.modules[mid][0]
        device = _get(req, "device", str)
        try:
            dev = torch.device(device)
        except (RuntimeError, ValueError, TypeError) as e:
            raise _bad("bad device %r: %s" % (device, e))
        if dev.type not in ("cpu", "cuda"):
            raise _bad("unsupported device %r" % device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise _bad("device %r requested but CUDA is not available" % device)
        entry = _get(req, "entry", str)
        prepare = _get(req, "prepare", str, "", required=False)
        args = _get(req, "args", list)
        prepare_args = _str_list(req, "prepare_args")
        outputs = _get(req, "outputs", list)
        inputs_file = _get(req, "inputs", str)
        replays = _str_list(req, "replays")
        graph = _get(req, "graph", bool, False, required=False)
        graph_replays = _str_list(req, "graph_replays")
        jobdir = _get(req, "dir", str)
        if not os.path.isabs(jobdir):
            raise _bad("dir %r must be an absolute path" % jobdir)
        if graph and dev.type != "cuda":
            raise _bad("graph mode needs a CUDA device")
        if graph_replays and not graph:
            raise _bad("graph_replays given without graph")
        if prepare_args and not prepare:
            raise _bad("prepare_args given without prepare")

        out_specs = [self._out_spec(o) for o in outputs]
        out_names = [o[0] for o in out_specs]
        if len(set(out_names)) != len(out_names):
            raise _bad("duplicate output names")

        # Inputs: every tensor in the inputs file, one fresh storage each.
        host_in = self._read(jobdir, inputs_file)
        for name in out_names:
            if name in host_in:
                raise _bad("output %r has the name of an input" % name)
            if name.startswith("in."):
                raise _bad("output name %r uses the reserved prefix in." % name)
        call_args = self._arg_plan(args, host_in, out_names, bool(prepare))
        for n in prepare_args:
            if n not in host_in:
                raise _bad("prepare input %r is not in %s" % (n, inputs_file))
        replay_data = [self._read_replay(jobdir, r, host_in) for r in replays]
        graph_data = [self._read_replay(jobdir, r, host_in) for r in graph_replays]

        fn = self._callable(mod, entry, "entry", "missing_entry")
        pfn = self._callable(mod, prepare, "prepare", "missing_entry") if prepare else None

        if dev.type == "cuda":
            with torch.cuda.device(dev):
                calls = self._run(dev, fn, pfn, call_args, prepare_args, out_specs,
                                  host_in, replay_data, graph, graph_data, jobdir)
        else:
            calls = self._run(dev, fn, pfn, call_args, prepare_args, out_specs,
                              host_in, replay_data, graph, graph_data, jobdir)
        return {"calls": calls}

    def _out_spec(self, o):
        if not isinstance(o, dict):
            raise _bad("output spec must be an object")
        name = _get(o, "name", str)
        dtname = _get(o, "dtype", str)
        if not name:
            raise _bad("empty output name")
        dt = self._dtypes.get(dtname)
        if dt is None:
            raise _bad("output %r: unsupported dtype %r" % (name, dtname))
        shape = _int_list(_get(o, "shape", list), "output %r shape" % name)
        elsize = self._empty((), dtype=dt).element_size()
        if "stride" in o and o["stride"] is not None:
            stride = _int_list(o["stride"], "output %r stride" % name)
            if len(stride) != len(shape):
                raise _bad("output %r: %d strides for %d dims" % (name, len(stride), len(shape)))
        else:
            stride, acc = [0] * len(shape), 1
            for i in range(len(shape) - 1, -1, -1):
                stride[i] = acc
                acc *= max(shape[i], 1)
        align = _get(o, "alignment", int, 0, required=False)
        if align == 0:
            align = elsize
        if align < elsize or align & (align - 1) or align > (1 << 20):
            raise _bad("output %r: bad alignment %d" % (name, align))
        if any(d == 0 for d in shape):
            storage = 0
        else:
            storage = 1 + sum((d - 1) * s for d, s in zip(shape, stride))
        if storage * elsize > (1 << 40):
            raise _bad("output %r is too large" % name)
        return (name, dt, shape, stride, align, elsize, storage)

    def _read(self, jobdir, rel):
        path = os.path.join(jobdir, rel)
        try:
            tensors, _md = self.stio.load(path)
        except (OSError, ValueError) as e:
            raise _bad("reading %s: %s" % (rel, e))
        return tensors

    def _read_replay(self, jobdir, rel, host_in):
        t = self._read(jobdir, rel)
        for name, v in t.items():
            ref = host_in.get(name)
            if ref is None:
                raise _bad("replay %s: %r is not an input" % (rel, name))
            if v.dtype != ref.dtype or list(v.shape) != list(ref.shape):
                raise _bad("replay %s: %r has %s%s, input has %s%s"
                           % (rel, name, v.dtype, list(v.shape), ref.dtype, list(ref.shape)))
        return t

    def _arg_plan(self, args, host_in, out_names, has_prepare):
        plan = []
        for a in args:
            if not isinstance(a, dict):
                raise _bad("arg must be an object")
            name = _get(a, "name", str)
            kind = _get(a, "kind", str)
            if kind not in _ARG_KINDS:
                raise _bad("arg %r: unknown kind %r" % (name, kind))
            if kind == "input":
                if name not in host_in:
                    raise _bad("input %r is not in the inputs file" % name)
                plan.append(("input", name))
            elif kind == "output":
                if name not in out_names:
                    raise _bad("output arg %r has no output spec" % name)
                plan.append(("output", name))
            elif kind == "scalar":
                plan.append(("scalar", self._scalar(a, name)))
            elif kind == "prepared":
                if not has_prepare:
                    raise _bad("arg %r is prepared state but no prepare is named" % name)
                plan.append(("prepared", None))
            else:
                if self.group is None:
                    raise _bad("arg %r needs a process group; send group first" % name)
                plan.append(("group", None))
        return plan

    @staticmethod
    def _scalar(a, name):
        typ = _get(a, "type", str)
        v = a.get("value")
        if typ == "float":
            if isinstance(v, str) and v in ("inf", "-inf", "nan"):
                return float(v)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _bad("scalar %r: float value expected" % name)
            return float(v)
        if typ == "int":
            if isinstance(v, bool) or not isinstance(v, int):
                raise _bad("scalar %r: int value expected" % name)
            return v
        if typ == "bool":
            if not isinstance(v, bool):
                raise _bad("scalar %r: bool value expected" % name)
            return v
        if typ == "str":
            if not isinstance(v, str):
                raise _bad("scalar %r: string value expected" % name)
            return v
        if typ == "none":
            return None
        raise _bad("scalar %r: unknown type %r" % (name, typ))

    # -- the calls -----------------------------------------------------------

    def _alloc_output(self, spec, dev):
        name, dt, shape, stride, align, elsize, storage = spec
        base = self._empty((storage + align // elsize,), dtype=dt, device=dev)
        pad = (-self._data_ptr(base)) % align
        if pad % elsize:
            raise RuntimeError("allocator returned a pointer not aligned to the element size")
        off = pad // elsize
        contract = self._as_strided(base, shape, stride, off)
        visible = self._as_strided(base, shape, stride, off)
        if dt in self._floats:
            poison = float("nan")
        elif dt is self.torch.bool:
            poison = False
        else:
            poison = self._iinfo(dt).min
        return base, contract, visible, poison

    def _run(self, dev, fn, pfn, call_args, prepare_args, out_specs, host_in,
             replay_data, graph, graph_data, jobdir):
        torch = self.torch
        cuda = dev.type == "cuda"

        def sync():
            if cuda:
                torch.cuda.synchronize(dev)

        # Validator-owned memory ("own") and the tensor objects the candidate
        # sees ("vis"): separate tensor objects over the same storage, so a
        # candidate that rebinds its object (set_, resize_) does not move the
        # memory that is refreshed, poisoned and dumped.
        own_in = {}
        for name, t in host_in.items():
            own_in[name] = self._to(t, dev) if cuda else t
        vis_in = {n: self._detach(t) for n, t in own_in.items()}
        outs = {}
        for spec in out_specs:
            outs[spec[0]] = self._alloc_output(spec, dev)
        vis_out = {n: o[2] for n, o in outs.items()}
        sync()

        prepared = None
        if pfn is not None:
            try:
                prepared = pfn(*[vis_in[n] for n in prepare_args])
                sync()
            except BaseException as e:  # noqa: B902
                raise Failure(_exc_error("prepare_error", e))

        argv = []
        for kind, v in call_args:
            if kind == "input":
                argv.append(vis_in[v])
            elif kind == "output":
                argv.append(vis_out[v])
            elif kind == "scalar":
                argv.append(v)
            elif kind == "prepared":
                argv.append(prepared)
            else:
                argv.append(self.group)

        def poison():
            for base, _c, _v, value in outs.values():
                self._fill(base, value)

        def refresh(new):
            for name, t in new.items():
                self._copy(own_in[name], t)

        calls = []

        def call(phase, invoke):
            poison()
            sync()
            before = self._facts(vis_in, vis_out)
            err = None
            try:
                invoke()
                sync()
            except BaseException as e:  # noqa: B902 - candidate code
                err = _exc_error("exception", e)
            after = self._facts(vis_in, vis_out)
            n = len(calls)
            fname = "call-%d.safetensors" % n
            dump_err = self._dump(os.path.join(jobdir, fname), outs, own_in)
            if err is None:
                err = dump_err
            calls.append({"call": n, "phase": phase, "file": fname,
                          "before": before, "after": after, "error": err})
            return err is None

        def entry_call():
            fn(*argv)

        ok = call(_PHASE_EAGER, entry_call)
        for new in replay_data:
            if not ok:
                break
            refresh(new)
            ok = call(_PHASE_REPLAY, entry_call)
        if ok and graph:
            g = self._capture(dev, fn, argv, poison)
            for new in graph_data:
                if not ok:
                    break
                refresh(new)
                ok = call(_PHASE_GRAPH, g.replay)
            del g
        return calls

    def _capture(self, dev, fn, argv, poison):
        """Warm up on a side stream, then capture one entry call."""
        torch = self.torch
        try:
            torch.cuda.synchronize(dev)
            s = torch.cuda.Stream(device=dev)
            poison()
            s.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(s):
                fn(*argv)
            torch.cuda.current_stream(dev).wait_stream(s)
            torch.cuda.synchronize(dev)
        except BaseException as e:  # noqa: B902
            raise Failure(_exc_error("graph_capture_error", e, "warm-up call before capture: "))
        g = torch.cuda.CUDAGraph()
        try:
            # Same stream as the warm-up (lazily created library handles are
            # per stream), capture of one entry call.
            with torch.cuda.graph(g, stream=s):
                fn(*argv)
            torch.cuda.synchronize(dev)
        except BaseException as e:  # noqa: B902
            raise Failure(_exc_error("graph_capture_error", e))
        return g

    def _facts(self, vis_in, vis_out):
        facts = {}
        for name, t in vis_in.items():
            facts[name] = self._fact(t)
        for name, t in vis_out.items():
            facts[name] = self._fact(t)
        return facts

    def _fact(self, t):
        def attempt(f, default):
            try:
                return f()
            except BaseException:  # noqa: B902 - a tensor left in a broken state
                return default
        return {
            "data_ptr": attempt(lambda: int(self._data_ptr(t)), -1),
            "storage_ptr": attempt(lambda: int(self._storage(t).data_ptr()), -1),
            "storage_offset": attempt(lambda: int(self._storage_offset(t)), -1),
            "shape": attempt(lambda: [int(d) for d in self._size(t)], []),
            "stride": attempt(lambda: [int(d) for d in self._stride(t)], []),
            "dtype": attempt(lambda: str(self._dtype_get(t)).replace("torch.", ""), ""),
            "device": attempt(lambda: str(self._device_get(t)), ""),
        }

    def _dump(self, path, outs, own_in):
        """Write outputs (contract views) and inputs-after as safetensors.

        A tensor that cannot be read back (its storage was resized or freed
        by the candidate) is left out of the file, and the call reports an
        error saying so. Returns that error or None.
        """
        tensors = {}
        problems = []
        items = [(n, o[1]) for n, o in outs.items()] + [("in." + n, t) for n, t in own_in.items()]
        for name, t in items:
            try:
                h = self._detach(t)
                if h.device.type != "cpu":
                    h = self._to(h, "cpu")
                tensors[name] = self._contiguous(h)
            except BaseException as e:  # noqa: B902
                problems.append((name, e))
        try:
            self.stio.save(path, tensors)
        except BaseException as e:  # noqa: B902
            raise Failure(_exc_error("internal", e, "writing %s: " % os.path.basename(path)))
        if problems:
            name, e = problems[0]
            return _exc_error("exception", e, "reading %r after the call failed (left out of the file): " % name)
        return None


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
    return proto_out, os.fdopen(proto_in, "rb", buffering=1 << 16)


def _serve_without_torch(proto_out, proto_in, exc):
    """torch could not be imported: answer every request with that fact."""
    err = _exc_error("internal", exc, "import torch failed: ")
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
