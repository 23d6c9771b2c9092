"""retention: whether a kernel kept what a case handed it.

After a case the worker drops its own references to the case's inputs
and outputs; retained names those whose storage is still alive, which
the kernel could write to later (docs/verify.md, "What a kernel keeps").
"""

import gc
import time
import types


# How long a storage may stay alive after the case before it counts as
# kept. torch's own threads can hold one briefly: gloo's worker drops a
# finished collective's tensors just after the caller's wait returns.
# Candidate code cannot run in the meantime (the scan refuses threads), so
# the grace gives nothing to a kernel that keeps a reference: that one
# stays alive past it.
RETAIN_GRACE_S = 2.0


def retained(watch, grace=RETAIN_GRACE_S):
    """Names whose storage is still alive (watch: (name, StorageWeakRef))
    once cycles are collected and torch's own threads have had ``grace``
    seconds to let go."""
    alive = [(n, w) for n, w in watch if not w.expired()]
    if not alive:
        return []
    gc.collect()
    if any(not w.expired() for _, w in alive):
        _clear_finished_frames()
        gc.collect()
    deadline = time.monotonic() + grace
    sleep = 0.001
    while True:
        alive = [(n, w) for n, w in alive if not w.expired()]
        if not alive or time.monotonic() >= deadline:
            return [n for n, _ in alive]
        time.sleep(sleep)
        sleep = min(sleep * 2, 0.05)
        gc.collect()


# CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR
_SUSPENDABLE = 0x20 | 0x80 | 0x200


def _clear_finished_frames():
    """Drop the locals of the finished frames that tracebacks keep: a
    kernel that keeps a caught exception (to say why it fell back) keeps
    its traceback, the frames it passed through and their callers, and
    every tensor they held (hs52). No candidate code can read them (the
    scan refuses tb_frame, f_locals, __traceback__ and the like). A frame
    still running is left as it is, and so is a generator's or
    coroutine's, which clearing would finalize: what those hold stays
    retained."""
    for o in gc.get_objects():
        if type(o) is not types.TracebackType:
            continue
        frames = []
        tb = o
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
        # The frame that caught it keeps its callers (f_back) once it ends.
        f = frames[0].f_back if frames else None
        while f is not None:
            frames.append(f)
            f = f.f_back
        for f in frames:
            if not f.f_code.co_flags & _SUSPENDABLE:
                try:
                    f.clear()
                except RuntimeError:  # still running
                    continue
                # A snapshot of the locals taken before (f_locals: the
                # audit hook's stack walks) keeps its values until read
                # again (Python before 3.13).
                _ = f.f_locals
