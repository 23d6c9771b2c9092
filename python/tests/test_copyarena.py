"""Tests of cacheon_runtime.engine.copyarena (an auditing engine's copies,
made in memory apart from the calls' own).

Run: python3 -m unittest discover -s python/tests   (from the repo root)
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE)))

import torch  # noqa: E402

from cacheon_runtime import identity, stio  # noqa: E402
from cacheon_runtime.engine import copyarena, enginestate  # noqa: E402


def base(t):
    """The address of t's storage."""
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return s.data_ptr()


class ArenaTests(unittest.TestCase):
    def setUp(self):
        self.ops = identity.Ops(torch)
        self.arena = copyarena.Arena(self.ops)

    def inputs(self, rows):
        g = torch.Generator().manual_seed(rows)
        x = torch.randn(rows, 96, generator=g).to(torch.bfloat16)
        return [
            ("x", x),
            ("t", torch.randn(8, rows, generator=g).t()),  # not contiguous
            ("ids", torch.arange(rows, dtype=torch.int32)),
            ("mask", torch.arange(rows) % 3 == 0),
            ("view", x[1:, 48:]),  # a view at an offset
            ("empty", torch.empty(0, 4)),
        ]

    def test_copies_hold_the_values(self):
        ins = self.inputs(5)
        out = self.arena.copies(ins)
        self.assertEqual([n for n, _ in out], [n for n, _ in ins])
        for (_, t), (name, c) in zip(ins, out):
            self.assertTrue(c.is_contiguous(), name)
            self.assertEqual((c.dtype, tuple(c.shape)), (t.dtype, tuple(t.shape)), name)
            self.assertTrue(torch.equal(c, t), name)
            # a dump reads a copy raw, as it reads any input
            self.assertEqual(stio.raw(c).data, stio.raw(t.contiguous()).data, name)

    def test_copies_do_not_overlap_and_reuse_one_buffer(self):
        first = self.arena.copies(self.inputs(5))
        bases = {n: base(c) for n, c in first}
        spans = sorted((c.data_ptr(), c.data_ptr() + c.numel() * c.element_size(), c.dtype) for _, c in first)
        for (lo1, hi1, d1), (lo2, _hi2, d2) in zip(spans, spans[1:]):
            if d1 == d2:
                self.assertLessEqual(hi1, lo2)
        # the next call, of other values and fewer rows, is written into
        # the same buffers: no memory is made per call
        again = self.arena.copies(self.inputs(3))
        self.assertEqual({n: base(c) for n, c in again}, bases)
        self.assertTrue(torch.equal(dict(again)["x"], self.inputs(3)[0][1]))

    def test_buffers_are_large_and_grow(self):
        self.arena.copies([("x", torch.zeros(4, dtype=torch.float16))])
        buf = self.arena.bufs[(torch.float16, torch.device("cpu"))]
        self.assertGreaterEqual(buf.numel() * buf.element_size(), copyarena.MIN_BYTES)
        big = torch.ones(buf.numel() + 1, dtype=torch.float16)
        (name, c), = self.arena.copies([("big", big)])
        self.assertTrue(torch.equal(c, big))
        self.assertGreater(self.arena.bufs[(torch.float16, torch.device("cpu"))].numel(), buf.numel())

    def test_state_copies(self):
        state = [("k", torch.randn(2, 4, 8)), ("v", torch.randn(2, 4, 8))]
        copies = enginestate.Copies(self.ops)
        before = copies.take(state)
        self.assertEqual(enginestate.changed(before, state), "")
        state[1][1][0, 0, 0] += 1
        self.assertIn("v", enginestate.changed(before, state))
        self.assertEqual([base(c) for c in copies.take(state)], [base(c) for c in before])


if __name__ == "__main__":
    unittest.main()
