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
        # The runtime guard, built before any candidate import and handed
        # to every load (docs/worker-protocol.md, "Runtime guard").
        from .. import guard
        self.safety = guard.Safety(torch, hook)

    def send(self, obj):
        wire.send_line(self.out_fd, obj)

    def serve(self):
        from . import dispatch
        handlers = {"hello": self.op_hello, "load": self.op_load, "generate": self.op_generate,
                    "score": self.op_score, "stats": self.op_stats}

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
        if (oom is not None and isinstance(e, oom)) or (isinstance(e, RuntimeError) and "out of memory" in str(e)):
            return "oom"
        return "internal"

    # -- requests ----------------------------------------------------------

    def op_hello(self, req):
        torch = self.torch
        cuda = bool(torch.cuda.is_available())
        return {"python": "%d.%d.%d" % tuple(sys.version_info[:3]), "torch": str(torch.__version__),
                "cuda": cuda, "device_name": torch.cuda.get_device_name(0) if cuda else "cpu",
                "triton": host.triton_version(), "pid": os.getpid(),
                "audit_hook": self.safety.hook is not None}

    def op_load(self, req):
        from . import runner
        self.engine = None
        gc.collect()
        if self.torch.cuda.is_available():
            self.torch.cuda.empty_cache()
        try:
            self.engine = runner.Engine(req, self.safety)
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
    try:
        import torch
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
