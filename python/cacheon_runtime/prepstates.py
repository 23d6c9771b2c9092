"""prepstates: a run case's prepared states as serving holds them.

The engine prepares every layer's weights at load (model.py,
``dispatch.prepare_experts`` per layer) and then calls the layers in turn:
several prepared states are alive at once and each layer is called after
the others were prepared. A case with ``decoys`` (other prepare inputs of
the same shapes, Go's slot.Case.Decoy) is run the same way: the first
decoy is prepared before the case's own state and the others after it,
every state stays alive until the case ends, and the entry is called with
decoys' states in turn, cycling, ungraded (the graded call poisons the
outputs first), as many times before each graded eager call and before
the graph's capture as the request's ``decoy_calls`` says (Go's
slot.Case.DecoyCalls: a state comes back after every other layer of a
stack, up to 128 deep). A prepare that leaves its result in module state
for the entry to read, ignoring its prepared argument, an entry that
keeps the first state it is called with, or one that changes its
arithmetic once a state comes back after many others, fails the graded
calls.
"""

from . import guard, host, wire
from .wire import Failure


def prepare_all(case, pfn, prepare_args, decoy_data):
    """(the case's prepared state, the decoys' states in decoy order)."""
    own = [case.vis_in[n] for n in prepare_args]
    inputs = [_inputs(case, d, prepare_args) for d in decoy_data]
    states = [_prepare(case, pfn, argv) for argv in inputs[:1] + [own] + inputs[1:]]
    k = 1 if inputs else 0
    return states[k], states[:k] + states[k + 1:]


def _inputs(case, data, prepare_args):
    """Validator memory holding one decoy's prepare inputs, placed as the
    case's inputs are; the objects prepare sees."""
    out = []
    for n in prepare_args:
        d = case.placed(data[n])
        case.raw.write(d, data[n])
        out.append(case.ops.detach(d))
    return out


def _prepare(case, pfn, argv):
    return _guarded(case, lambda: pfn(*argv), "prepare: ", "prepare_error", "")


class Cycle:
    """The decoys' states called in turn between a case's graded calls."""

    def __init__(self, case, fn, arguments, states, counts):
        self.case, self.fn, self.arguments = case, fn, arguments
        self.states, self.counts, self.next = states, counts or [], 0

    def before(self, i):
        """The ungraded calls that come before graded call i (the
        capture: one past the replays)."""
        if not self.states or i >= len(self.counts):
            return
        for _ in range(self.counts[i]):
            state = self.states[self.next % len(self.states)]
            self.next += 1
            decoy_call(self.case, self.fn, lambda: self.arguments(state))


def decoy_call(case, fn, arguments):
    """One ungraded entry call with another layer's prepared state on the
    case's inputs and outputs (arguments() makes the argument list after
    the tensor objects are renewed); the guard checks it as any call."""
    what = "a call with another layer's prepared state: "
    case.renew()
    argv = arguments()
    _guarded(case, lambda: fn(*argv), what, "exception", what)


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
