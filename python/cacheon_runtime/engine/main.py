"""main: the arena runtime's JSON-lines server (docs/engine-protocol.md).

Started by Go as::

    python3 -I -B -c "import sys; sys.path.insert(0, RUNTIME_PARENT); \
        from cacheon_runtime.engine import main; main.main()"

One JSON request per line on stdin, exactly one reply line per request on a
private duplicate of the original stdout; fd 1 / ``sys.stdout`` point at
stderr and fd 0 at an empty pipe (host.private_stdio, as in the verify
worker), so candidate code can neither forge nor steal protocol lines. A
candidate that fails after selection in strict mode gets a
``candidate_error`` reply and the process exits (status 3).

Before any load it applies the conditions candidates run under in verify
too (``guard.same_conditions``), installs the runtime's audit hook
(``audithook``) and builds the torch guard (``guard.Safety``), exactly as
the verify worker does.
"""

import gc
import os
import sys

from .. import host, wire
from ..wire import Failure, bad

MAX_REQUEST_BYTES = 64 << 20
EXIT_ABORT = 3


class Server:
    def __init__(self, proto_out, proto_in, torch, hook=None):
        self.out_fd, self.inp, self.torch = proto_out, proto_in, torch
        self.engine = None
        self.tp = None  # (group, rank, world_size) once a group request made one
        self.loaded_once = False
        # The runtime guard, built before any candidate import and handed
        # to every load (docs/worker-protocol.md, "Runtime guard").
        from .. import guard
        self.safety = guard.Safety(torch, hook)

    def send(self, obj):
        wire.send_line(self.out_fd, obj)

    def serve(self):
        from . import dispatch
        handlers = {"hello": self.op_hello, "group": self.op_group, "load": self.op_load, "generate": self.op_generate,
                    "score": self.op_score, "stats": self.op_stats, "audit_calls": self.op_audit_calls}

        def on_error(rid, e):
            if isinstance(e, dispatch.CandidateAbort):
                return {"id": rid, "ok": False,
                        "error": {"class": "candidate_error", "type": "CandidateAbort",
                                  "message": wire.clip(str(e)), "traceback": wire.clip(e.traceback, tail=True)}}, EXIT_ABORT
            # the engine itself failed
            return {"id": rid, "ok": False, "error": wire.exc_error(self._class_of(e), e)}, None
        return wire.serve(self.inp, self.send, handlers, MAX_REQUEST_BYTES, on_error)

    def _class_of(self, e):
        oom = getattr(self.torch.cuda, "OutOfMemoryError", None)
        if (oom is not None and isinstance(e, oom)) or (isinstance(e, RuntimeError) and "out of memory" in wire.as_text(e)):
            return "oom"
        return "internal"

    # -- requests ----------------------------------------------------------

    def op_hello(self, req):
        torch = self.torch
        cuda = bool(torch.cuda.is_available())
        return {"python": "%d.%d.%d" % tuple(sys.version_info[:3]), "torch": str(torch.__version__),
                "cuda": cuda, "device_name": torch.cuda.get_device_name(0) if cuda else "cpu",
                "triton": host.triton_version(), "pid": os.getpid(),
                "audit_hook": self.safety.hook is not None,
                "device_count": int(torch.cuda.device_count()) if cuda else 0}

    def op_group(self, req):
        """Join the tensor-parallel process group (docs/engine-protocol.md,
        group): before the first load, since the audit hook refuses sockets
        once candidate code is imported; once per process."""
        backend = wire.field(req, "backend", str)
        init_method = wire.field(req, "init_method", str)
        rank = wire.field(req, "rank", int)
        world = wire.field(req, "world_size", int)
        local_rank = wire.field(req, "local_rank", int, rank, required=False)
        device = wire.field(req, "device", str, "cpu", required=False)
        if world < 2 or not 0 <= rank < world or local_rank < 0:
            raise bad("bad rank %d / world_size %d / local_rank %d (a group has at least 2 ranks)"
                      % (rank, world, local_rank))
        if backend not in ("gloo", "nccl"):
            raise bad("backend %r: want gloo or nccl" % (backend,))
        if self.loaded_once:
            raise bad("group must come before any load")
        if self.tp is not None:
            raise bad("the process group is already initialized")
        group = host.init_group(self.torch, backend, init_method, rank, world, device, local_rank)
        self.tp = (group, rank, world)
        return {"rank": rank, "world_size": world}

    def op_load(self, req):
        from . import runner
        self.loaded_once = True
        self.engine = None
        gc.collect()
        if self.torch.cuda.is_available():
            self.torch.cuda.empty_cache()
        try:
            self.engine = runner.Engine(req, self.safety, tp=self.tp)
        except Failure as f:
            if f.error.get("class") in ("import_error", "missing_entry", "tamper"):
                err = dict(f.error)
                err["message"] = wire.clip("%s: %s" % (f.error["class"], f.error.get("message", "")))
                err["class"] = "load_error"
                raise Failure(err)
            raise
        return self.engine.load_reply()

    def _need(self):
        if self.engine is None:
            raise bad("no arena is loaded; send load first")
        return self.engine

    def op_generate(self, req):
        return generate_reply(self._need().generate(req))

    def op_score(self, req):
        return self._need().score(req)

    def op_stats(self, req):
        return self._need().stats()

    def op_audit_calls(self, req):
        """The selected calls to dump from now on, per slot
        (docs/engine-protocol.md, audit_calls)."""
        return {"calls": self._need().d.set_audit_calls(req.get("calls"))}


def generate_reply(out):
    """The generate reply of runner output: each result's tokens as
    tokens_i32 and logprobs as logprobs_f32 (base64 of little-endian int32
    and float32, docs/engine-protocol.md)."""
    for r in out["results"]:
        r["tokens_i32"] = wire.i32_base64(r.pop("tokens"))
        r["logprobs_f32"] = wire.f32_base64(r.pop("logprobs"))
    return out


def main():
    proto_out, proto_in = host.private_stdio()
    preinit = host.cuda_preinit()
    try:
        import torch
        preinit()
        from .. import audithook, guard
        guard.same_conditions(torch)
        hook = audithook.install()
        srv = Server(proto_out, proto_in, torch, hook)
    except Exception as e:  # noqa: BLE001 - e.g. no torch: say so on every request
        code = host.serve_without_torch(proto_out, proto_in, e)
    else:
        code = srv.serve()
    try:
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    os._exit(code)
