"""Tests of the worker's retention check (retention.retained): a kernel
that keeps a caught exception keeps no tensor through its traceback's
frames; one that keeps a suspended generator or a closure over a tensor
still does.

Run: python3 -m unittest discover -s python/tests   (from the repo root)
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
from torch.multiprocessing.reductions import StorageWeakRef  # noqa: E402

from cacheon_runtime import retention, runcase  # noqa: E402

KEPT = []


def _raises(x):
    raise RuntimeError("no fast path for %s" % (x.dtype,))


def keeps_exception(x, out):
    try:
        _raises(x)
    except RuntimeError as e:
        KEPT.append(e)
    out.copy_(x)


def _holds(t):
    while True:
        yield
        t.add_(1)


def keeps_generator(x, out):
    g = _holds(out)
    next(g)
    KEPT.append(g)
    try:
        _raises(x)
    except RuntimeError as e:
        KEPT.append(e)
    out.copy_(x)


def keeps_closure(x, out):
    def later():
        out.add_(1)
    try:
        _raises(x)
    except RuntimeError as e:
        KEPT.append((e, later))
    out.copy_(x)


def _case(kernel):
    """Run kernel as the worker does (through runcase._entry_call) on
    tensors only it and this frame hold; return the watch."""
    x, out = torch.randn(4, 8), torch.empty(4, 8)
    watch = [("input x", StorageWeakRef(x.storage())), ("output out", StorageWeakRef(out.storage()))]
    args = [x.detach(), out.detach()]
    runcase._entry_call(torch, kernel, lambda: list(args))
    del x, out, args
    return watch


class RetentionTest(unittest.TestCase):
    def tearDown(self):
        KEPT.clear()

    def test_cases(self):
        for kernel, want in ((keeps_exception, []),
                             (keeps_generator, ["output out"]),
                             (keeps_closure, ["output out"])):
            KEPT.clear()
            got = retention.retained(_case(kernel), grace=0.05)
            self.assertEqual(got, want, kernel.__name__)
            self.assertTrue(KEPT, kernel.__name__)


if __name__ == "__main__":
    unittest.main()
