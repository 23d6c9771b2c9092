"""Tests of cacheon_runtime.argplan's scalar table: one object per value
and slot, in the worker and the engine alike.

Run: python3 -m unittest discover -s python/tests   (from the repo root)
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cacheon_runtime import argplan  # noqa: E402


class ScalarsTest(unittest.TestCase):
    def test_one_object_per_value_and_slot(self):
        s = argplan.Scalars()
        big = 1 << 40
        cases = [
            # (slot a, value a, slot b, value b, same object)
            ("norm", 1e-6, "norm", float("1e-6"), True),
            ("norm", 1e-6, "attn", 1e-6, False),
            ("norm", 0.0, "norm", -0.0, False),
            ("norm", float("nan"), "norm", float("nan"), True),
            ("norm", float("inf"), "norm", float("-inf"), False),
            ("norm", big, "norm", int(str(big)), True),
            ("norm", 4096, "norm", 4096.0, False),
            ("norm", "causal", "norm", "".join(["cau", "sal"]), True),
        ]
        for sa, a, sb, b, same in cases:
            got = s.get(sa, a) is s.get(sb, b)
            self.assertEqual(got, same, (sa, a, sb, b))

    def test_never_the_callers_object(self):
        s = argplan.Scalars()
        for v in (0.125, -0.0, 1 << 40, "a string of its own"):
            got = s.get("x", v)
            self.assertIsNot(got, v)
            self.assertEqual(type(got), type(v))
            self.assertEqual(repr(got), repr(v))
            self.assertIs(s.get("x", v), got)

    def test_singletons_pass_through(self):
        s = argplan.Scalars()
        for v in (True, False, None):
            self.assertIs(s.get("x", v), v)


if __name__ == "__main__":
    unittest.main()
