"""Tests of cacheon_runtime.wire's encoders of values Go decodes, and of
its formatting of what candidate code hands over.

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


class _Text(str):
    """A message as candidate code may make one (rt47): every method a
    formatter might call raises."""

    def __radd__(self, other):
        raise RuntimeError("radd")

    def __add__(self, other):
        raise RuntimeError("add")

    def encode(self, *a, **k):
        raise RuntimeError("encode")


class _Boom(Exception):
    def __str__(self):
        return _Text("not ready")


class _Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no")


class _Pretender:
    __class__ = str  # isinstance(x, str) holds; it is no str


class CandidateTextTest(unittest.TestCase):
    """wire.as_text, clip and exc_error on hostile objects: the result is
    an exact str and formatting never raises, so a failed load is still
    reported as the candidate's (import_error, missing_entry), not as
    the worker's own failure."""

    def test_as_text(self):
        from cacheon_runtime import wire
        for obj, want in ((_Text("abc"), "abc"), (_Boom(), "not ready"), (_Unprintable(), "<unprintable>"),
                          (_Pretender(), "<unprintable>"), (3, "3"), ("plain", "plain")):
            got = wire.as_text(obj)
            self.assertIs(type(got), str, obj)
            self.assertEqual(got, want)
        self.assertEqual(wire.clip(_Text("abcdef"), 3), "abc")

    def test_exc_error(self):
        from cacheon_runtime import wire
        for exc, want in ((_Boom(), "importing k.py: not ready"),
                          (_Unprintable(), "importing k.py: <unprintable exception>")):
            try:
                raise exc
            except Exception as e:  # noqa: BLE001
                err = wire.exc_error("import_error", e, _Text("importing k.py: "))
            self.assertEqual(err["class"], "import_error")
            self.assertEqual(err["message"], want)
            for k in ("type", "message", "traceback"):
                self.assertIs(type(err[k]), str, k)


if __name__ == "__main__":
    unittest.main()
