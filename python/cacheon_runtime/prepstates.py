"""prepstates: a run case's other layers, as serving holds them.

The engine gives every layer state of its own (a norm's weight, a decode
layer's KV cache, an expert layer's prepared weights) and calls the
layers in turn at every step: several states are alive at once and a
layer's state comes back after every other layer's. A case with
``decoys`` (files of other layers' state, the request's ``layer_args``;
Go's slot.Case.Decoy) is run the same way. With a prepare, the states
are prepared in layer order, as an engine prepares its layers at load:
the decoys called before the first graded call (the first entry of
``decoy_calls``: the layers above the case's own in a stack) before the
case's own state, the others after it. The layers' memory is allocated
in that order too (place), before the case's other inputs, each decoy's
inputs in memory of their own. Every decoy stays alive until the
case ends, and the entry is called with the decoys in turn, cycling,
ungraded (the graded call poisons the outputs first), as many times
before each graded eager call and before the graph's capture as the
request's ``decoy_calls`` says (Go's slot.Case.DecoyCalls and
slot.Stack: a state comes back after every other layer of a stack, up
to 256 deep).

Each decoy call may take activations of its own (``decoy_feeds``, one
file a call, Go's slot.Case.Feed): its inputs are written into the case's
memory before the call, as serving's next layer finds new activations in
the same buffers, and ``NAME@at`` / ``NAME@rows`` grow the called decoy's
layer input NAME (a decode cache one step longer, Go's slot.Grow). A
graded call then finds its own values again: a fed input its file does
not hold is written back from the last graded call's values (restore).

Some decoy calls are graded, unannounced (``decoy_dumps``, their numbers
in the order the decoy calls are made): after such a call returns and
the guard has checked it, its outputs and its inputs as they are after
it are written to ``decoy-<n>.safetensors`` in the case's directory, as
a graded call's are (the case's inputs but a prepared state's raw
inputs, which the call does not take, and a decoy layer's own inputs),
for Go to grade against the reference of that call's inputs. Nothing
before or during the call differs from any other decoy call's.

Where the request chains an output to an input (``chain``, the fused
norms' residual stream), every decoy call is handed the output the call
before it wrote, in that memory and unchanged, as serving hands its next
layer (its feed writes the input only at a step's first layer, where Go
starts the stream, or moves it to fresh memory, ``NAME@move``, and adds
another sublayer's output to it, ``NAME@add``, as engines that add an
output between two fused calls do); the input is read raw before every
decoy call, and a graded one's dump holds it as ``pre.NAME``: Go grades
the call from those values (generator v25).

A prepare that leaves its result in module state for the entry to read,
ignoring its prepared argument, an entry that keeps the first state it
is called with, or one that changes its arithmetic once a state comes
back after many others, fails the graded calls.
"""

import ctypes
import functools

from . import guard, host, rawmem, wire
from .wire import Failure, bad


class Layer:
    """A decoy layer's inputs in validator memory of their own (own) and
    the tensor objects the candidate is handed (visible, renewed a call)."""

    def __init__(self, own):
        self.own = own


def place_layers(case, host_in, names, decoy_data, before, place_input):
    """Place a case's memory in layer order, as an engine allocates its
    layers at load and its activations after: the layer inputs ``names``
    of the first ``before`` decoys (``before`` at most their number), the
    case's own (``place_input(name, tensor)``), those of the other
    decoys, then the case's other inputs. The decoys' placed inputs, in
    decoy order."""
    placed = place(case, names, decoy_data[:before])
    for layer in (True, False):
        for name, t in host_in.items():
            if (name in names) == layer:
                place_input(name, t)
        if layer:
            placed += place(case, names, decoy_data[before:])
    return placed


def place(case, names, decoy_data):
    """Validator memory holding the inputs ``names`` of each decoy, placed
    as the case's inputs are, one {name: tensor} per decoy."""
    out = []
    for d in decoy_data:
        own = {}
        for n in names:
            p = case.placed(d[n])
            case.raw.write(p, d[n])
            own[n] = p
        out.append(own)
    return out


def prepare_all(case, pfn, prepare_args, placed, before):
    """(the case's prepared state, the decoys' states in decoy order),
    prepared in layer order from the decoys' placed inputs: the first
    ``before`` decoys (at most all of them), then the case's own, then
    the rest."""
    own = [case.vis_in[n] for n in prepare_args]
    inputs = [[case.ops.detach(p[n]) for n in prepare_args] for p in placed]
    k = max(0, min(before, len(inputs)))
    states = [_prepare(case, pfn, argv) for argv in inputs[:k] + [own] + inputs[k:]]
    return states[k], states[:k] + states[k + 1:]


def _prepare(case, pfn, argv):
    return _guarded(case, functools.partial(pfn, *argv), "prepare: ", "prepare_error", "")


def check_feed(rel, data, host_in, layer_args, prepared=False, chained=()):
    """Refuse a feed file that holds anything but inputs other than the
    layer inputs, NAME@at / NAME@rows pairs of a layer input NAME
    (int64 [m, 2] row indices in range, rows [m, ...] of its dtype; not
    where a prepare made the decoys' states, which hold no inputs to
    grow), and, for a chained input NAME, NAME@add (of its dtype and
    shape) and NAME@move (any tensor: a flag), not with NAME itself."""
    grows = set()
    for name, t in data.items():
        base, _, part = name.partition("@")
        ref = host_in.get(base)
        if ref is None:
            raise bad("decoy feed %s: %r is not an input" % (rel, base))
        if part in ("add", "move"):
            if base not in chained:
                raise bad("decoy feed %s: %r: only a chained input is moved or added to" % (rel, name))
            if base in data:
                raise bad("decoy feed %s: %r comes with %r, which writes the input" % (rel, name, base))
            if part == "add" and (t.dtype != ref.dtype or list(t.shape) != list(ref.shape)):
                raise bad("decoy feed %s: %r has %s%s, the input has %s%s"
                          % (rel, name, t.dtype, list(t.shape), ref.dtype, list(ref.shape)))
            continue
        if not part:
            if base in layer_args:
                raise bad("decoy feed %s: %r is a layer input; grow it with %s@at and %s@rows"
                          % (rel, base, base, base))
            if t.dtype != ref.dtype or list(t.shape) != list(ref.shape):
                raise bad("decoy feed %s: %r has %s%s, the input has %s%s"
                          % (rel, name, t.dtype, list(t.shape), ref.dtype, list(ref.shape)))
            continue
        if base not in layer_args or part not in ("at", "rows") or len(ref.shape) < 2:
            raise bad("decoy feed %s: %r names no growth of a layer input" % (rel, name))
        if prepared:
            raise bad("decoy feed %s: %r grows a prepare input; a prepared decoy's state cannot grow" % (rel, name))
        grows.add(base)
    for base in grows:
        at, rows = data.get(base + "@at"), data.get(base + "@rows")
        ref = host_in[base]
        if at is None or rows is None:
            raise bad("decoy feed %s: %s@at and %s@rows come together" % (rel, base, base))
        m = at.shape[0] if len(at.shape) == 2 else -1
        if str(at.dtype) != "torch.int64" or m < 0 or at.shape[1] != 2:
            raise bad("decoy feed %s: %s@at must be int64 [m, 2]" % (rel, base))
        if rows.dtype != ref.dtype or list(rows.shape) != [m] + list(ref.shape[2:]):
            raise bad("decoy feed %s: %s@rows has %s%s, want %s%s"
                      % (rel, base, rows.dtype, list(rows.shape), ref.dtype, [m] + list(ref.shape[2:])))
        for i, j in at.tolist():
            if not (0 <= i < ref.shape[0] and 0 <= j < ref.shape[1]):
                raise bad("decoy feed %s: %s@at row [%d, %d] outside %s" % (rel, base, i, j, list(ref.shape[:2])))


class Cycle:
    """The decoys' states called in turn between a case's graded calls."""

    def __init__(self, case, fn, arguments, states, counts, feeds=(), dumps=()):
        self.case, self.fn, self.arguments = case, fn, arguments
        self.states, self.counts, self.next = states, counts or [], 0
        self.feeds, self.fed = list(feeds), set()
        self.dumps = frozenset(dumps)

    def before(self, i):
        """The ungraded calls that come before graded call i (the
        capture: one past the replays)."""
        if not self.states or i >= len(self.counts):
            return
        case = self.case
        for _ in range(self.counts[i]):
            state = self.states[self.next % len(self.states)]
            self._pass_on()
            if self.next < len(self.feeds):
                self._feed(self.feeds[self.next], state)
            # every decoy call's chained inputs as they are before it (a
            # graded one's go into its dump): the same work before each
            pre = _before(case)
            n = self.next
            self.next += 1
            decoy_call(case, self.fn, lambda: self.arguments(state))
            if n in self.dumps:
                case.dump_decoy("decoy-%d.safetensors" % n, state, pre)

    def _pass_on(self):
        """Serving's residual stream through the decoy calls (the case's
        chain: output -> input): the chained input in the memory the call
        before wrote the output in, as it was left (a feed that holds the
        input, a step's first layer, writes its values there), the output
        in fresh memory. The graded call after them finds its own values
        written back (restore)."""
        case = self.case
        if not case.calls and self.next == 0:
            return  # no call has written an output yet: the input stays
        for out_name, in_name in case.chain.items():
            case.own_in[in_name] = case.outs[out_name].contract
            case.outs[out_name] = host.alloc_output(case.ops, case.specs[out_name], case.dev)
            self.fed.add(in_name)

    def _feed(self, data, state):
        case = self.case
        own = {}
        for name, t in data.items():
            base, _, part = name.partition("@")
            if part == "move":
                _raw_step(_move, case, base)
        for name, t in data.items():
            base, _, part = name.partition("@")
            if part == "add":
                _raw_step(_add, case, base, t)
            elif not part:
                own[name] = t
            elif part == "at":
                if type(state) is not Layer:
                    raise bad("decoy feed grows %r of a prepared state" % base)
                dst = state.own[base]
                _, shape, _, es, _, _ = case.raw.meta(dst)
                inner = 1
                for d in shape[2:]:
                    inner *= d
                at = [i * shape[1] + j for i, j in t.tolist()]
                case.raw.write_rows(dst, data[base + "@rows"], at, inner * es)
        if own:
            case.refresh(own)
            self.fed.update(own)

    def restore(self, new, last):
        """The values graded call finds in its inputs: new (its file's;
        None for the first call) and, for every input a decoy call's feed
        wrote since the last graded call and new does not hold, the last
        graded call's value. None where nothing is to be written."""
        back = {n: last[n] for n in self.fed if new is None or n not in new}
        self.fed = set()
        if not back:
            return new
        if new is not None:
            back.update(new)
        return back


def check_dumps(dumps, calls):
    """The request's ``decoy_dumps``: distinct decoy call numbers below
    calls (the sum of ``decoy_calls``)."""
    wire.int_list(dumps, "field 'decoy_dumps'")
    if len(set(dumps)) != len(dumps):
        raise bad("field 'decoy_dumps' names a decoy call twice")
    for n in dumps:
        if n >= calls:
            raise bad("field 'decoy_dumps' names decoy call %d of %d" % (n, calls))
    return dumps


def _raw_step(step, case, name, *args):
    """step(case, name, *args) on a chained input; memory the candidate
    resized or freed is the case's failure."""
    try:
        step(case, name, *args)
    except (ValueError, rawmem.RawError) as e:
        raise Failure(wire.exc_error("exception", e,
                                     "passing %r on to a call with another layer's state failed: " % name))


def _move(case, name):
    """A chained input's values into fresh memory of its own (as a stream
    another kernel wrote anew between two calls of this one)."""
    old = case.own_in[name]
    dt, shape = case.raw.dtype_shape(old)
    data = case.raw.read(old)
    new = case.placed(case.torch.empty(shape, dtype=dt))
    case.raw.write_bytes(new, data)
    case.own_in[name] = new


def _add(case, name, delta):
    """delta added to a chained input in place, rounded once from float32
    (a sublayer's output added to the stream between two calls)."""
    torch, dst = case.torch, case.own_in[name]
    dt, shape = case.raw.dtype_shape(dst)
    cur = torch.empty(shape, dtype=dt)
    data = case.raw.read(dst)
    if data:
        ctypes.memmove(cur.data_ptr(), data, len(data))
    case.raw.write(dst, (cur.float() + delta.float()).to(dt))


def _before(case):
    """The case's chained inputs read raw (name -> stio.RawTensor)."""
    out = {}
    for name in case.chain.values():
        try:
            out[name] = case.w.stio.raw(case.own_in[name])
        except BaseException as e:  # noqa: B902
            raise Failure(wire.exc_error("exception", e,
                                         "reading %r before a call with another layer's state failed: " % name))
    return out


def decoy_call(case, fn, arguments):
    """One ungraded entry call with another layer's state on the case's
    inputs and outputs (arguments() makes the argument list after the
    tensor objects are renewed); the guard checks it as any call. Its
    outputs are poisoned first, as a graded call's and every served
    call's are: a kernel that found the last call's output in a decoy
    call told a stack's other layers from served ones (rt44's
    rmsnorm_prefill_chain)."""
    what = "a call with another layer's state: "
    case.renew()
    case.poison()
    case.sync()
    argv = arguments()
    case.busy()
    _guarded(case, functools.partial(fn, *argv), what, "exception", what)


def _guarded(case, invoke, where, kind, prefix):
    """invoke() under no_grad, synchronized, with the guard's check before
    and after it (a finding is a tamper error "before"/"in" where; an
    exception of candidate code one of kind, prefixed)."""
    problem = case.checked(False)
    if problem:
        raise Failure(host.tamper_error(problem, "before " + where))
    try:
        with guard.no_grad(case.torch):
            result = invoke()
        case.sync()
    except BaseException as e:  # noqa: B902 - candidate code
        problem = case.checked(True)
        if problem:
            raise Failure(host.tamper_error(problem, "in " + where))
        raise Failure(wire.exc_error(kind, e, prefix))
    problem = case.checked(True)
    if problem:
        raise Failure(host.tamper_error(problem, "in " + where))
    return result
