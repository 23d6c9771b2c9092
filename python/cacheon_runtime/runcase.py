"""runcase: the worker's ``run`` request (one verify case).

prepare (once, if named; with ``decoys``, other prepare inputs prepared
before and after it, see prepstates) -> eager call -> eager replays
-> on CUDA with ``graph: true``: side-stream warm-up, CUDA graph capture,
graph replays.

Before every call every output's whole allocation is poisoned (NaN, or the
integer dtype's minimum); on CUDA, before about half the eager calls and
decoy calls, work of the worker's own is queued on the current stream
(_Case.busy: an engine's stream is seldom idle when a kernel is called);
identity facts are recorded for every input and output before and after; after every call the device is synchronized and
``call-<n>.safetensors`` is written with every output (a contiguous copy of
the validator-owned view) and every input as it is after the call
(``in.<name>``). Replays copy new values in place into the same input
memory. Nothing here compares or decides anything.

Poison, refresh and dumps move raw bytes (rawmem: ctypes on CPU, the CUDA
driver on the GPU), never through a torch operator a mode or a registered
kernel could rewrite. Around every call the guard (guard.Guard) looks for
what the candidate may have changed: before the call the quick checks
(modes, tensor types, audit-hook refusals), after it the full ones
(also replaced functions and dispatch tables); a finding is the call's
error, class ``tamper``. Candidate code runs under ``torch.no_grad`` as in
the engine. Every call gets fresh tensor objects over the same memory.

When the case ends and the worker has dropped its own references, the
memory of every entry input and output must be freed: a kernel that kept
a reference to what it was handed could write to it in a later call (in
the engine, another layer's live weight or the residual stream), so a
storage still alive is the case's error (class ``tamper``). Prepare inputs
are not watched: the engine hands prepare copies, which the prepared state
may keep.
"""

import functools
import os
import random

from . import argplan, guard, host, layout, prepstates, rawmem, retention, wire
from .wire import Failure, bad, field

PHASE_EAGER = "eager"
PHASE_REPLAY = "replay"
PHASE_GRAPH = "graph_replay"

ARG_KINDS = ("input", "output", "scalar", "prepared", "group")

# The groups a run request's "process_group" may hand a "group" arg.
PROCESS_GROUPS = ("world", "sub")

# Where inputs are placed inside their allocations (_Case.placed): not
# reproducible on purpose, it changes no value Go grades.
_PLACE = random.SystemRandom()

# What a busy call queues on the current stream ahead of the candidate's
# work (_Case.busy): a fill of this many bytes of scratch memory, tens of
# microseconds on an H100 or H200.
_BUSY_BYTES = 256 << 20


def run(worker, req):
    """Handle one run request; returns the reply fields ({"calls": [...]})."""
    torch = worker.torch
    mid = field(req, "module", str)
    loader = worker.loader
    if mid not in loader.modules:
        raise bad("module %r is not loaded" % mid)
    mod = loader.modules[mid][0]
    device = field(req, "device", str)
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError, TypeError) as e:
        raise bad("bad device %r: %s" % (device, e))
    if dev.type not in ("cpu", "cuda"):
        raise bad("unsupported device %r" % device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise bad("device %r requested but CUDA is not available" % device)
    entry = field(req, "entry", str)
    prepare = field(req, "prepare", str, "", required=False)
    args = field(req, "args", list)
    prepare_args = wire.str_list(req, "prepare_args")
    outputs = field(req, "outputs", list)
    inputs_file = field(req, "inputs", str)
    replays = wire.str_list(req, "replays")
    graph = field(req, "graph", bool, False, required=False)
    graph_replays = wire.str_list(req, "graph_replays")
    decoys = wire.str_list(req, "decoys")
    # How many ungraded calls with the decoys' states (in turn, cycling)
    # come before each graded eager call and before the graph's capture.
    decoy_calls = field(req, "decoy_calls", list, None, required=False)
    # What a decoy holds (absent: the prepare inputs), and one file of
    # fresh activations a decoy call (prepstates).
    layer_args = wire.str_list(req, "layer_args") or prepare_args
    decoy_feeds = wire.str_list(req, "decoy_feeds")
    jobdir = field(req, "dir", str)
    # Compare torch's classes and functions after this case (guard.objects,
    # tens of ms): Go asks for it on the first and last case of each row.
    check_objects = field(req, "check_objects", bool, True, required=False)
    # Seeds where the inputs are placed in memory (Go derives it from the
    # run's secret seed); 0: drawn here.
    place = field(req, "place", int, 0, required=False)
    if place < 0:
        raise bad("place %d must not be negative" % place)
    # Which group a "group" arg hands the kernel: the world, or this rank's
    # subgroup (made by a group request with subgroups).
    process_group = field(req, "process_group", str, "world", required=False)
    if process_group not in PROCESS_GROUPS:
        raise bad("field 'process_group' must be one of %s, got %r" % (", ".join(PROCESS_GROUPS), process_group))
    if process_group == "sub" and worker.subgroup is None:
        raise bad("process_group \"sub\" needs subgroups; send group with subgroups first")
    packed = field(req, "packed", dict, None, required=False)
    chain = field(req, "chain", dict, None, required=False) or {}
    if not os.path.isabs(jobdir):
        raise bad("dir %r must be an absolute path" % jobdir)
    if graph and dev.type != "cuda":
        raise bad("graph mode needs a CUDA device")
    if graph_replays and not graph:
        raise bad("graph_replays given without graph")
    if prepare_args and not prepare:
        raise bad("prepare_args given without prepare")
    if decoys and not layer_args:
        raise bad("decoys given without prepare_args or layer_args")
    if prepare and wire.str_list(req, "layer_args") and layer_args != prepare_args:
        raise bad("field 'layer_args' of a case with a prepare must be its prepare_args")
    if decoy_calls is None:
        decoy_calls = [1, 1] if decoys else []
    wire.int_list(decoy_calls, "field 'decoy_calls'")
    if len(decoy_calls) > len(replays) + 2:
        raise bad("field 'decoy_calls' has %d entries, more than the %d calls and the capture"
                  % (len(decoy_calls), len(replays) + 1))
    if any(decoy_calls) and not decoys:
        raise bad("field 'decoy_calls' given without decoys")
    decoy_dumps = prepstates.check_dumps(field(req, "decoy_dumps", list, [], required=False),
                                         sum(decoy_calls) if decoys else 0)
    if decoy_feeds and len(decoy_feeds) != sum(decoy_calls):
        raise bad("field 'decoy_feeds' has %d files for %d decoy calls" % (len(decoy_feeds), sum(decoy_calls)))

    ops = worker.ops
    specs = [host.output_spec(ops, o) for o in outputs]
    out_names = [s.name for s in specs]
    if len(set(out_names)) != len(out_names):
        raise bad("duplicate output names")
    host_in = _read(worker, jobdir, inputs_file)
    for name in out_names:
        if name in host_in:
            raise bad("output %r has the name of an input" % name)
        if name.startswith("in."):
            raise bad("output name %r uses the reserved prefix in." % name)
    plan = argplan.plan(worker, args, host_in, out_names, bool(prepare), process_group,
                        field(req, "slot", str, "", required=False))
    for n in prepare_args + layer_args:
        if n not in host_in:
            raise bad("%s input %r is not in %s" % ("prepare" if n in prepare_args else "layer", n, inputs_file))
    replay_data = [_read_replay(worker, jobdir, r, host_in) for r in replays]
    graph_data = [_read_replay(worker, jobdir, r, host_in) for r in graph_replays]
    decoy_data = [_read_replay(worker, jobdir, r, host_in) for r in decoys]
    for r, d in zip(decoys, decoy_data):
        if sorted(d) != sorted(layer_args):
            raise bad("decoy %s must hold the %s inputs %s" % (r, "prepare" if prepare else "layer", sorted(layer_args)))
    layout.check_chain(ops, chain, specs, host_in)
    feed_data = [_read(worker, jobdir, r) for r in decoy_feeds]
    for r, d in zip(decoy_feeds, feed_data):
        prepstates.check_feed(r, d, host_in, layer_args, prepared=bool(prepare), chained=chain.values())

    fn = loader.lookup(mod, entry, "entry")
    pfn = loader.lookup(mod, prepare, "prepare") if prepare else None

    case = _Case(worker, dev, jobdir)
    case.pack = layout.packing(packed, host_in) if packed is not None else None
    case.room_data = layout.take_rooms(host_in, case.pack)
    case.check_objects = check_objects
    case.chain = chain
    case.decoy_calls = decoy_calls
    case.layer_args, case.feed_data = layer_args, feed_data
    case.decoy_dumps = decoy_dumps
    case.rng = random.Random(place) if place else _PLACE
    if dev.type == "cuda":
        with torch.cuda.device(dev):
            calls = case.execute(fn, pfn, plan, prepare_args, specs, host_in,
                                 replay_data, graph, graph_data, decoy_data)
    else:
        calls = case.execute(fn, pfn, plan, prepare_args, specs, host_in,
                             replay_data, graph, graph_data, decoy_data)
    watch = case.watch(plan)
    del case, host_in, replay_data, graph_data, decoy_data, feed_data
    kept = retention.retained(watch)
    if kept and calls and calls[-1].get("error") is None:
        calls[-1]["error"] = host.tamper_error(
            "the candidate kept a reference to %s after its calls returned (a kernel may not retain what it "
            "is handed: it could write to it later)" % ", ".join(kept), "after the case: ")
    return {"calls": calls}


def _entry_call(torch, fn, arguments):
    """Call the entry with the arguments of this call. A module function,
    not a closure: a frame keeps its function, and a closure of the case
    kept the case, so that a traceback the kernel kept (its f_back
    chain runs through here) kept every tensor of the case alive."""
    argv = arguments()
    with guard.no_grad(torch):
        fn(*argv)


# ---------------------------------------------------------------------------
# Request parsing


def _read(worker, jobdir, rel):
    try:
        tensors, _md = worker.stio.load(os.path.join(jobdir, rel))
    except (OSError, ValueError) as e:
        raise bad("reading %s: %s" % (rel, e))
    return tensors


def _read_replay(worker, jobdir, rel, host_in):
    t = _read(worker, jobdir, rel)
    for name, v in t.items():
        ref = host_in.get(name)
        if ref is None:
            raise bad("replay %s: %r is not an input" % (rel, name))
        if v.dtype != ref.dtype or list(v.shape) != list(ref.shape):
            raise bad("replay %s: %r has %s%s, the input has %s%s"
                      % (rel, name, v.dtype, list(v.shape), ref.dtype, list(ref.shape)))
    return t


# ---------------------------------------------------------------------------
# Execution


class _Case:
    def __init__(self, worker, dev, jobdir):
        self.w = worker
        self.ops = worker.ops
        self.raw = worker.raw
        self.torch = worker.torch
        self.dev = dev
        self.cuda = dev.type == "cuda"
        self.jobdir = jobdir
        self.calls = []
        self.outs = {}
        self.own_in = {}
        self.vis_in = {}
        self.vis_out = {}
        self.check_objects = True
        self.rng = _PLACE
        self.pack = None  # (names, before, after) of packed inputs
        self.rooms = {}  # dump name -> the room views around packed inputs
        self.room_data = {}  # room name -> Go's rows for it (host tensors)
        self.chain = {}  # output -> the input serving hands in its memory
        self.decoy_calls = []  # ungraded decoy calls before each graded one
        self.layer_args, self.feed_data = [], []  # what decoys hold, each decoy call's activations
        self.decoy_dumps = []  # decoy calls whose outputs are dumped (graded)
        self.specs = {}  # output name -> OutSpec

    def sync(self):
        if self.cuda:
            self.raw.sync()

    def placed(self, t):
        """Validator memory for an input shaped like t (host.placed_like:
        its own allocation or a view at a random offset in a larger one)."""
        return host.placed_like(self.ops, t, self.dev, self.rng)

    def packed_place(self, name, t):
        """t placed as the packed batch's view (layout.packed_place); the
        rooms are kept for the dumps."""
        view, rooms = layout.packed_place(self.ops, self.raw, self.dev, self.pack, self.room_data, name, t)
        self.rooms.update(rooms)
        return view

    def watch(self, plan):
        """Weak references to the storages of the entry inputs and the
        outputs (see the module doc), by name."""
        from torch.multiprocessing.reductions import StorageWeakRef
        ops = self.ops
        entry_inputs = [v for kind, v in plan if kind == "input"]
        out = [("input " + n, StorageWeakRef(ops.storage(self.own_in[n]))) for n in entry_inputs]
        out += [("output " + n, StorageWeakRef(ops.storage(o.base))) for n, o in self.outs.items()]
        return out

    def renew(self):
        """Fresh tensor objects for the candidate's next call over the same
        memory, as the engine hands every call its own: what a candidate
        was given last time (an object it kept) does not tell it that this
        call replays the last."""
        ops = self.ops
        self.vis_in = {n: ops.detach(t) for n, t in self.own_in.items()}
        vis = {}
        for n, o in self.outs.items():
            try:
                vis[n] = host.renew_visible(ops, o)
            except RuntimeError as e:
                # only a call can have shrunk or freed it (resize_ on its
                # storage): the candidate's doing, never the runtime's
                raise Failure(host.tamper_error(
                    "the memory of output %r no longer holds its contract's layout (an earlier call resized or "
                    "freed its storage): %s" % (n, wire.clip(str(e), 200))))
        self.vis_out = vis

    def pass_on(self, new):
        """Serving's residual stream (chain: output -> input, the pairs Go
        chose): the replay's input in the memory the call before wrote
        the output in (refresh then writes the replay's values there), the
        output in fresh memory."""
        for out_name, in_name in self.chain.items():
            if in_name not in new:
                raise bad("chain: replay values lack the chained input %r" % in_name)
            self.own_in[in_name] = self.outs[out_name].contract
            self.outs[out_name] = host.alloc_output(self.ops, self.specs[out_name], self.dev)

    def busy(self):
        """On CUDA, for about half the calls (the case's draw), work queued
        on the current stream right before the candidate's call, as an
        engine's CPU runs ahead of its GPU: the worker synchronizes around
        every call, so the stream was always idle when a graded call began
        and a kernel asking (current_stream().query()) could tell verify
        from serving (rt53). The work is a raw fill of the worker's own
        scratch memory, which no input or output shares."""
        if not self.cuda or self.rng.random() >= 0.5:
            return
        mem = self.w.busy_memory.get(self.dev)
        try:
            if mem is None:
                mem = self.torch.empty(_BUSY_BYTES, dtype=self.torch.uint8, device=self.dev)
                self.w.busy_memory[self.dev] = mem
            self.raw.fill(mem, b"\0")
        except (RuntimeError, ValueError, rawmem.RawError):
            # the worker's own work, not the candidate's: a device short
            # of memory gets no queued work (the call runs as before)
            pass

    def poison(self):
        for o in self.outs.values():
            self.raw.fill(o.base, o.pattern)

    def refresh(self, new):
        """Write a replay's values: its inputs, and the rooms around its
        packed inputs (room_before.NAME, room_after.NAME: the next batch's
        other sequences)."""
        for name, t in new.items():
            room = self.rooms.get(name)
            self.raw.write(room if room is not None else self.own_in[name], t)

    def checked(self, full):
        """The guard's finding about the candidate's tensors and torch
        ('' when nothing changed); full adds identities and dispatch
        tables."""
        g = self.w.guard
        return (g.full if full else g.quick)(self.vis_in, self.vis_out)

    def execute(self, fn, pfn, plan, prepare_args, specs, host_in,
                replay_data, graph, graph_data, decoy_data=()):
        ops = self.ops
        # Validator-owned memory (own_in, Output.contract) and the tensor
        # objects the candidate sees (vis_in, Output.visible) are separate
        # tensor objects over the same storage: a candidate that rebinds its
        # object (set_, as_strided_) does not move the memory the worker
        # refreshes, poisons and dumps, and the facts show the rebinding.
        # Layer memory is placed in layer order (prepstates.place_layers).
        def place_input(name, t):
            if self.pack is not None and name in self.pack[0] and ops.size(t) and ops.size(t)[0] > 0:
                d = self.packed_place(name, t)
            else:
                d = self.placed(t)
                self.raw.write(d, t)
            self.own_in[name] = d
        names = (prepare_args if pfn is not None else self.layer_args) if decoy_data else []
        k = max(0, min(self.decoy_calls[0] if self.decoy_calls else 0, len(decoy_data)))
        placed = prepstates.place_layers(self, host_in, names, decoy_data, k, place_input)
        self.vis_in = {n: ops.detach(t) for n, t in self.own_in.items()}
        for s in specs:
            self.specs[s.name] = s
            self.outs[s.name] = host.alloc_output(ops, s, self.dev)
        self.vis_out = {n: o.visible for n, o in self.outs.items()}
        self.sync()

        prepared, others = None, []
        if pfn is not None:
            prepared, others = prepstates.prepare_all(self, pfn, prepare_args, placed, k)
        elif decoy_data:
            others = [prepstates.Layer(own) for own in placed]

        def arguments(state=None):
            argv = []
            for kind, v in plan:
                if kind == "input":
                    if type(state) is prepstates.Layer and v in state.own:
                        argv.append(ops.detach(state.own[v]))  # the decoy layer's own
                    else:
                        argv.append(self.vis_in[v])
                elif kind == "output":
                    argv.append(self.vis_out[v])
                elif kind == "scalar":
                    argv.append(v)
                elif kind == "prepared":
                    argv.append(prepared if state is None else state)
                else:
                    argv.append(v)  # the world group or this rank's subgroup
            return argv

        torch = self.torch

        # this call's own tensor objects (renew, in call)
        entry_call = functools.partial(_entry_call, torch, fn, arguments)

        # Other layers' calls between the graded ones (prepstates).
        # A graded call finds its own values in what decoy calls' feeds
        # wrote (Cycle.restore: the last graded call's, or its file's).
        layers = prepstates.Cycle(self, fn, arguments, others, self.decoy_calls, self.feed_data, self.decoy_dumps)
        last = dict(host_in)
        layers.before(0)
        ok = self.call(PHASE_EAGER, entry_call, layers.restore(None, last))
        for i, new in enumerate(replay_data):
            if not ok:
                break
            layers.before(i + 1)
            ok = self.call(PHASE_REPLAY, entry_call, layers.restore(new, last))
            last.update(new)
        if ok and graph:
            layers.before(len(replay_data) + 1)
            self.renew()
            g = self.capture(fn, arguments())
            for new in graph_data:
                if not ok:
                    break
                ok = self.call(PHASE_GRAPH, g.replay, new)
            del g
        # Stores into torch's (or the runtime's) classes and functions,
        # whatever route they took, are compared once per case (guard.objects).
        problem = (self.w.guard.objects() or self.w.loader.rebound()) if self.calls and self.check_objects else ""
        if problem:
            last = self.calls[-1]
            last["error"] = host.tamper_error(problem, "during the case: ")
        return self.calls

    def call(self, phase, invoke, new=None):
        """Check, refresh (new: replay values), poison, record, invoke,
        synchronize, check, record, dump."""
        n = len(self.calls)
        fname = "call-%d.safetensors" % n
        if phase == PHASE_REPLAY and new is not None:
            self.pass_on(new)
        if phase != PHASE_GRAPH:
            self.renew()
        problem = self.checked(False)
        err = host.tamper_error(problem, "before the call: ") if problem else None
        if err is None:
            try:
                if new is not None:
                    self.refresh(new)
                self.poison()
                self.sync()
            except (ValueError, rawmem.RawError) as e:
                # The candidate resized or freed validator-owned storage.
                err = wire.exc_error("exception", e, "preparing the call: ")
        if err is not None:  # not invoked
            facts = self.ops.facts(self.vis_in, self.vis_out)
            self.dump(os.path.join(self.jobdir, fname))
            self.calls.append({"call": n, "phase": phase, "file": fname, "before": facts,
                               "after": facts, "error": err})
            return False
        before = self.ops.facts(self.vis_in, self.vis_out)
        err = None
        if phase != PHASE_GRAPH:
            self.busy()
        try:
            invoke()
            self.sync()
        except BaseException as e:  # noqa: B902 - candidate code
            err = wire.exc_error("exception", e)
        problem = self.checked(True)
        after = self.ops.facts(self.vis_in, self.vis_out)
        dump_err = self.dump(os.path.join(self.jobdir, fname))
        if problem:
            err = host.tamper_error(problem, "during the call: ")
        elif err is None:
            err = dump_err
        self.calls.append({"call": n, "phase": phase, "file": fname,
                           "before": before, "after": after, "error": err})
        return err is None

    def capture(self, fn, argv):
        """One warm-up call on a side stream, then CUDA graph capture of one
        entry call on that same stream (library handles created lazily in
        the warm-up are per stream)."""
        torch, dev = self.torch, self.dev
        problem = self.checked(False)
        if problem:
            raise Failure(host.tamper_error(problem, "before graph capture: "))
        try:
            self.sync()
            s = torch.cuda.Stream(device=dev)
            self.poison()
            s.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(s), guard.no_grad(torch):
                fn(*argv)
            torch.cuda.current_stream(dev).wait_stream(s)
            self.sync()
        except BaseException as e:  # noqa: B902 - candidate code
            problem = self.checked(True)
            if problem:
                raise Failure(host.tamper_error(problem, "in the warm-up call before capture: "))
            raise Failure(wire.exc_error("graph_capture_error", e, "warm-up call before capture: "))
        g = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(g, stream=s), guard.no_grad(torch):
                fn(*argv)
            self.sync()
        except BaseException as e:  # noqa: B902 - candidate code
            problem = self.checked(True)
            if problem:
                raise Failure(host.tamper_error(problem, "in graph capture: "))
            raise Failure(wire.exc_error("graph_capture_error", e))
        problem = self.checked(True)
        if problem:
            raise Failure(host.tamper_error(problem, "in graph capture: "))
        return g

    def dump_decoy(self, rel, state, pre=None):
        """Write a graded decoy call's dump to rel in the case's directory
        (prepstates.Cycle): the outputs (contract views) and, as in.<name>,
        the inputs it was handed as they are after it: the case's own
        memory but the layer inputs, and a decoy layer's own (a prepared
        state's raw inputs are not the call's); pre (name -> a raw
        snapshot) as pre.<name>: the chained inputs before the call. A
        tensor that cannot be read back is the call's failure."""
        items = [(n, o.contract) for n, o in self.outs.items()]
        items += [("in." + n, t) for n, t in self.own_in.items() if n not in self.layer_args]
        if type(state) is prepstates.Layer:
            items += [("in." + n, t) for n, t in state.own.items()]
        tensors = {}
        for name, t in items:
            try:
                tensors[name] = self.w.stio.later(t)
            except BaseException as e:  # noqa: B902
                raise Failure(wire.exc_error("exception", e,
                                             "reading %r after a call with another layer's state failed: " % name))
        for name, t in (pre or {}).items():
            tensors["pre." + name] = t
        try:
            self.w.stio.save(os.path.join(self.jobdir, rel), tensors)
        except BaseException as e:  # noqa: B902
            raise Failure(wire.exc_error("internal", e, "writing %s: " % rel))

    def dump(self, path):
        """Write outputs (contract views) and inputs-after (in.<name>).

        A tensor that cannot be read back (the candidate resized or freed its
        storage) is left out of the file and the call reports an error that
        says so. Returns that error object, or None.
        """
        tensors = {}
        problem = None
        items = [(n, o.contract) for n, o in self.outs.items()]
        items += [("in." + n, t) for n, t in self.own_in.items()]
        items += [("in." + n, t) for n, t in self.rooms.items()]
        for name, t in items:
            try:
                # read raw while the file is written, no candidate code in between
                tensors[name] = self.w.stio.later(t)
            except BaseException as e:  # noqa: B902
                if problem is None:
                    problem = (name, e)
        try:
            self.w.stio.save(path, tensors)
        except BaseException as e:  # noqa: B902
            raise Failure(wire.exc_error("internal", e, "writing %s: " % os.path.basename(path)))
        if problem is not None:
            name, e = problem
            return wire.exc_error("exception", e,
                                  "reading %r after the call failed (left out of the file): " % name)
        return None

