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
candidate before a ``load`` request. Before the first one the worker
applies the conditions candidates run under in serving too
(``guard.same_conditions``: one intra-op thread, gradients off), installs
the runtime's audit hook (``audithook``, armed by the first load) and
captures what torch looks like (``guard.Guard``); docs/worker-protocol.md,
"Runtime guard".
"""

import os
import sys

from . import argplan, host, runcase, signature, wire
from .wire import Failure, bad, field

MAX_REQUEST_BYTES = 16 << 20


class Worker:
    def __init__(self, proto_out, proto_in, torch, hook=None):
        from . import identity, stio
        self.out_fd = proto_out
        self.inp = proto_in
        self.torch = torch
        self.stio = stio
        self.ops = identity.Ops(torch)
        # The runtime guard (guard.py, rawmem.py, audithook.py): built here,
        # before any candidate import.
        from . import guard, rawmem
        self.hook = hook
        self.guard = guard.Guard(torch, hook)
        self.raw = rawmem.RawMem(torch)
        self.loader = host.Loader(hook=hook, guard=self.guard)
        self.group = None
        self.group_key = None
        # The scalars candidate calls are handed (argplan.Scalars).
        self.scalars = argplan.Scalars()
        # device -> the scratch memory a busy call's queued work covers
        # (runcase._Case.busy); allocated on a device's first busy call.
        self.busy_memory = {}
        # The subgroups made after the group (a partition of the ranks, as
        # tuples) and this rank's own; None until a group request names them.
        self.subgroups = None
        self.subgroup = None

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
        if field(req, "init_device", str, "", required=False) == "cuda" and cuda:
            # Go measures device initialisation apart from the first call.
            torch.empty(1, device="cuda")
            torch.cuda.synchronize()
        return {"python": "%d.%d.%d" % tuple(sys.version_info[:3]),
                "torch": str(torch.__version__),
                "cuda": cuda,
                "device_count": int(torch.cuda.device_count()) if cuda else 0,
                "triton": host.triton_version(),
                "pid": os.getpid(),
                "audit_hook": self.hook is not None}

    # -- load --------------------------------------------------------------

    def op_load(self, req):
        mid = field(req, "module", str)
        bundle = field(req, "bundle", str)
        source = field(req, "source", str)
        entry = field(req, "entry", str)
        prepare = field(req, "prepare", str, "", required=False)
        mod = self.loader.load(mid, bundle, source, entry, prepare)
        # The entry's parameters, a fact for Go's ABI check (signature.py).
        return {"entry_params": signature.describe(self.loader.lookup(mod, entry, "entry"))}

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
        subgroups = partition_field(req, world)
        key = (backend, init_method, rank, world, device, local_rank)
        new_subgroups = subgroups is not None and subgroups != self.subgroups
        if self.loader.modules and (key != self.group_key or new_subgroups):
            # The process group and its subgroups (and their sockets) are
            # set up before any candidate code is imported: after a load
            # the audit hook refuses sockets, and torch.distributed is no
            # longer the runtime's own.
            raise bad("group must come before any load")
        if self.group_key is not None and key != self.group_key:
            raise Failure(wire.plain_error(
                "group_error", "RuntimeError", "a different process group is already initialized"))
        if new_subgroups and self.subgroups is not None:
            raise Failure(wire.plain_error(
                "group_error", "RuntimeError", "different subgroups are already made"))
        if self.group_key is None:
            self.group = host.init_group(self.torch, backend, init_method, rank, world, device, local_rank)
            self.group_key = key
        if new_subgroups:
            # Every rank makes every subgroup, in the request's order (also
            # those it is not in: torch.distributed.new_group asks all).
            self.subgroup = host.make_subgroups(subgroups, rank)
            self.subgroups = subgroups
        return {}

    # -- run ---------------------------------------------------------------

    def op_run(self, req):
        return runcase.run(self, req)


def partition_field(req, world):
    """The group request's optional ``subgroups``: a partition of the ranks
    0..world-1 into two or more non-empty lists, as a tuple of tuples; None
    when absent."""
    v = req.get("subgroups")
    if v is None:
        return None
    what = "field 'subgroups' must partition the ranks 0..%d into two or more non-empty lists" % (world - 1)
    if not isinstance(v, list) or len(v) < 2:
        raise bad(what)
    seen = set()
    parts = []
    for i, part in enumerate(v):
        if not isinstance(part, list) or not part:
            raise bad("%s: subgroups[%d] is %s" % (what, i, "empty" if part == [] else "not a list"))
        for r in part:
            if not isinstance(r, int) or isinstance(r, bool) or not 0 <= r < world:
                raise bad("%s: subgroups[%d] holds %r, not a rank" % (what, i, r))
            if r in seen:
                raise bad("%s: rank %d is in two subgroups" % (what, r))
            seen.add(r)
        parts.append(tuple(part))
    if len(seen) != world:
        missing = sorted(set(range(world)) - seen)
        raise bad("%s: ranks %s are in none" % (what, missing))
    return tuple(parts)


def main():
    proto_out, proto_in = host.private_stdio()
    preinit = host.cuda_preinit()
    try:
        import torch
        preinit()
        from . import audithook, guard
        guard.same_conditions(torch)
        hook = audithook.install()
        w = Worker(proto_out, proto_in, torch, hook)
    except Exception as e:  # noqa: BLE001 - e.g. no torch: say so on every request
        code = host.serve_without_torch(proto_out, proto_in, e, MAX_REQUEST_BYTES)
    else:
        code = w.serve()
    try:
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    os._exit(code)
