"""Tests of cacheon_runtime.prepstates.place_layers: a case's memory is
placed in layer order, as an engine allocates its layers at load.

Run: python3 -m unittest discover -s python/tests   (from the repo root)
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from cacheon_runtime import prepstates  # noqa: E402


class _Raw:
    def write(self, dst, src):
        pass


class _Case:
    """What place_layers uses of a run case: placed() records the order."""

    def __init__(self):
        self.order = []
        self.raw = _Raw()

    def placed(self, t):
        self.order.append(t)
        return "mem:" + t


class PlaceLayers(unittest.TestCase):
    def test_layer_order(self):
        # Three decoys holding w and b; the case's own layer goes at the
        # place its stack draws (before), its activation x after every layer.
        host_in = {"x": "x", "w": "w", "b": "b"}
        decoys = [{"w": "w%d" % i, "b": "b%d" % i} for i in range(3)]
        for before, want in (
            (0, ["w", "b", "w0", "b0", "w1", "b1", "w2", "b2", "x"]),
            (1, ["w0", "b0", "w", "b", "w1", "b1", "w2", "b2", "x"]),
            (3, ["w0", "b0", "w1", "b1", "w2", "b2", "w", "b", "x"]),
        ):
            case, own = _Case(), []

            def place_input(name, t, case=case, own=own):
                own.append(name)
                case.placed(t)
            placed = prepstates.place_layers(case, host_in, ["w", "b"], decoys, before, place_input)
            self.assertEqual(case.order, want, before)
            self.assertEqual(own, ["w", "b", "x"])
            # the decoys' memory comes back in decoy order
            self.assertEqual(placed, [{"w": "mem:w%d" % i, "b": "mem:b%d" % i} for i in range(3)])

    def test_no_decoys(self):
        case, seen = _Case(), []
        placed = prepstates.place_layers(case, {"x": "x", "w": "w"}, [], [], 0,
                                         lambda n, t: seen.append(n))
        self.assertEqual((placed, seen, case.order), ([], ["x", "w"], []))


if __name__ == "__main__":
    unittest.main()
