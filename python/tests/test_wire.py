"""Tests of cacheon_runtime.wire's encoders of values Go decodes.

Run: python3 -m unittest discover -s python/tests   (from the repo root)
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class IntListTest(unittest.TestCase):
    """wire.int_list: token lists from JSON requests."""

    def test_cases(self):
        from cacheon_runtime import wire
        for v in ([], [0], [0, 1, 2], [5] * 1000):
            self.assertIs(wire.int_list(v, "v"), v)
        for v in ([1, True], [False], [1, -1], [1, 2.0], [None], [[1]], "x", None, (1, 2)):
            with self.assertRaises(wire.Failure, msg=repr(v)):
                wire.int_list(v, "v")


class F32Base64Test(unittest.TestCase):
    """wire.f32_base64: little-endian float32, base64 (Go decodes it)."""

    def test_cases(self):
        from cacheon_runtime import wire
        cases = [([], ""), ([0.0], "AAAAAA=="), ([1.0], "AACAPw=="), ([-2.0, 1.0], "AAAAwAAAgD8=")]
        for vals, want in cases:
            self.assertEqual(wire.f32_base64(vals), want, vals)
        # an fp32 value comes back exactly; a double rounds to the nearest fp32
        import array
        import base64
        for v in (-0.1234567, -17.25, -1e-30):
            got = array.array("f", base64.b64decode(wire.f32_base64([v])))[0]
            self.assertEqual(got, array.array("f", [v])[0])



class I32Base64Test(unittest.TestCase):
    """wire.i32_base64: little-endian int32, base64 (Go decodes it)."""

    def test_cases(self):
        from cacheon_runtime import wire
        cases = [([], ""), ([0], "AAAAAA=="), ([1], "AQAAAA=="), ([128255, 7], "//QBAAcAAAA="),
                 ([2147483647], "////fw==")]
        for vals, want in cases:
            self.assertEqual(wire.i32_base64(vals), want, vals)


if __name__ == "__main__":
    unittest.main()
