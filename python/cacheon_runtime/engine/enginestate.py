"""enginestate: the engine state no candidate call may write (every layer's
KV and index caches: Dispatch.engine_state, set by the runner), copied
before an audited call and compared bit for bit after it. A kernel that
keeps earlier layers' caches and rewrites them is exact in every call it
is graded on, on inputs it corrupted before; the comparison sees the
write itself.

An eager call is compared alone. A replayed CUDA graph runs a whole decode
step, whose own writes (each layer's new keys, values and index keys, and
the padding rows' scratch page) are legitimate: those slots are taken from
the state after the replay, every other byte must be unchanged.
"""

import torch

from . import copyarena

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class Copies:
    """Buffers kept for copies of the engine state (a copyarena.Arena:
    made at the first copy, out of the calls' pools), shared by an
    engine's eager calls and its replays, which never overlap."""

    def __init__(self, ops):
        self.arena = copyarena.Arena(ops)

    def take(self, state):
        """The state's tensors copied into the buffers, in order."""
        with torch.no_grad():
            return [c for _name, c in self.arena.copies(state)]


def snapshot(state):
    """Copies of the (name, tensor) pairs' tensors, in order."""
    with torch.no_grad():
        return [t.clone() for _name, t in state]


def changed(old, state, written=None, what="the call"):
    """What changed of state since old was taken ("" when nothing), as a
    candidate failure's reason. written: flat slots (page * page_size +
    offset, a long tensor on the state's device) the engine itself wrote
    since, exempt from the comparison; what names the calls compared."""
    if not old:
        return ""
    with torch.no_grad():
        for before, (name, now) in zip(old, state):
            if written is not None:
                rows = before.shape[0] * before.shape[1]
                flat_b, flat_n = before.view(rows, -1), now.view(rows, -1)
                flat_b.index_copy_(0, written, flat_n.index_select(0, written))
            bits = _BITS[before.element_size()]
            if not torch.equal(before.view(bits), now.view(bits)):
                return "%s changed %s, which no candidate call may write (engine state outside its inputs)" % (what, name)
    return ""


__all__ = ["Copies", "snapshot", "changed"]
