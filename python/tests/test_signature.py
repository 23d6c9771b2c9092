"""Tests of cacheon_runtime.signature (the entry's parameters that the
verify worker's load reply carries for Go's ABI check). Run:

    python3 -m unittest discover -s python/tests -p 'test_signature.py'
"""

import functools
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from cacheon_runtime import signature  # noqa: E402


def dense_decode(q, k, v, seq_lens, sm_scale, out):
    pass


def every_kind(a, /, b, c=1, *rest, d, e=2, **kw):
    pass


class Hostile:
    @property
    def __signature__(self):
        raise RuntimeError("no")

    def __call__(self, x):
        pass


class Describe(unittest.TestCase):
    def test_plain(self):
        got = signature.describe(dense_decode)
        self.assertEqual([p["name"] for p in got], ["q", "k", "v", "seq_lens", "sm_scale", "out"])
        self.assertTrue(all(p["kind"] == "positional" and not p["default"] for p in got))

    def test_kinds_and_defaults(self):
        got = [(p["name"], p["kind"], p["default"]) for p in signature.describe(every_kind)]
        self.assertEqual(got, [("a", "positional", False), ("b", "positional", False),
                               ("c", "positional", True), ("rest", "var_positional", False),
                               ("d", "keyword_only", False), ("e", "keyword_only", True),
                               ("kw", "var_keyword", False)])

    def test_partial_and_lambda(self):
        got = signature.describe(functools.partial(dense_decode, 1))
        self.assertEqual(len(got), 5)
        self.assertEqual(signature.describe(lambda x, out: None)[1]["name"], "out")

    def test_wrappers(self):
        # A functools.wraps wrapper that adds the slot's out argument is
        # called with it: its own parameters count, not the inner
        # function's. A pass-through (*args, **kwargs) wrapper is looked
        # through, level by level.
        def rms(x, weight, eps):
            pass

        def adds_out(fn):
            @functools.wraps(fn)
            def wrapper(x, weight, out, eps):
                pass
            return wrapper

        def passes(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                return fn(*args, **kwargs)
            return wrapper

        names = lambda f: [p["name"] for p in signature.describe(f)]  # noqa: E731
        self.assertEqual(names(adds_out(rms)), ["x", "weight", "out", "eps"])
        self.assertEqual(names(passes(adds_out(rms))), ["x", "weight", "out", "eps"])
        self.assertEqual(names(passes(passes(rms))), ["x", "weight", "eps"])
        bare = passes(rms)
        del bare.__wrapped__
        self.assertEqual(names(bare), ["args", "kwargs"])

    def test_unknown(self):
        self.assertIsNone(signature.describe(Hostile()))
        self.assertIsNone(signature.describe(42))
        many = eval("lambda " + ", ".join("a%d" % i for i in range(signature.MAX_PARAMS + 1)) + ": None")
        self.assertIsNone(signature.describe(many))


if __name__ == "__main__":
    unittest.main()
