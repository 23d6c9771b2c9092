"""Worker protocol tests of the residual stream passed on through a
stack's decoy calls (session 46, generator v25): with a ``chain`` (output
-> input), each decoy call is handed the output the call before wrote, as
it is or moved by ``NAME@add`` (in place) and ``NAME@move`` (to fresh
memory first); a graded decoy call's dump holds the input as it was
before the call (``pre.NAME``).

Run: python3 -m unittest discover -s python/tests   (from the repo root)
"""

import os
import unittest

import torch

from workerkit import WorkerTestBase  # sets the path of cacheon_runtime
from cacheon_runtime import stio  # noqa: E402  (after workerkit)


class ChainedDecoyTest(WorkerTestBase):
    def test_decoy_calls_pass_the_chain_on(self):
        # With a chain (output -> input), every decoy call is handed the
        # output the call before wrote, in that memory and unchanged; a
        # feed that holds the input (a step's first layer) writes it
        # there; a graded decoy call's dump holds the input as it was
        # before the call (pre.NAME); the graded calls find their own.
        args = [{"name": "x", "kind": "input"}, {"name": "residual", "kind": "input"},
                {"name": "w", "kind": "input"}, {"name": "out", "kind": "output"},
                {"name": "out_residual", "kind": "output"}]
        outputs = [self.out_spec(shape=(4, 8)), self.out_spec("out_residual", shape=(4, 8))]
        xs = [torch.randn(4, 8) for _ in range(2)]
        rs = [torch.randn(4, 8) for _ in range(2)]
        w = torch.randn(4, 8)
        dws = [torch.randn(4, 8) for _ in range(3)]
        start = torch.randn(4, 8)
        delta = torch.randn(4, 8)
        delta1 = torch.randn(4, 8)
        feeds = [{"x": torch.randn(4, 8)}, {"x": torch.randn(4, 8), "residual@add": delta1},
                 {"x": torch.randn(4, 8), "residual": start},
                 {"x": torch.randn(4, 8), "residual@add": delta, "residual@move": torch.ones(1)}]
        rep, d = self.run_case("chained", {"x": xs[0], "residual": rs[0], "w": w}, outputs, args=args,
                               replays=[{"x": xs[1], "residual": rs[1]}], layer_args=["w"],
                               decoys=[{"w": t} for t in dws], decoy_calls=[1, 3], feeds=feeds,
                               decoy_dumps=[0, 1, 2, 3], chain={"out_residual": "residual"})
        self.assertTrue(rep["ok"], rep)
        first = self.call_file(d, rep["calls"][0])
        self.assertTrue(torch.equal(first["out_residual"], xs[0] + rs[0]))
        # call order: decoy 0, graded 0, decoys 1 to 3, graded 1. Decoy 0
        # comes before any call wrote an output: it finds the case's input;
        # decoy 1 the graded call's output with delta1 added in place;
        # decoy 2 its feed's; decoy 3 decoy 2's output moved to fresh
        # memory with delta added
        dumps = [stio.load(os.path.join(d, "decoy-%d.safetensors" % n))[0] for n in range(4)]
        want = [rs[0], first["out_residual"] + delta1, start, dumps[2]["out_residual"] + delta]
        for n, t in enumerate(dumps):
            self.assertTrue(torch.equal(t["pre.residual"], want[n]), n)
            self.assertTrue(torch.equal(t["in.residual"], want[n]), n)
            self.assertTrue(torch.equal(t["out_residual"], feeds[n]["x"] + want[n]), n)
            self.assertTrue(torch.equal(t["out"], t["out_residual"] * dws[n % 3]), n)
        last = self.call_file(d, rep["calls"][1])
        self.assertTrue(torch.equal(last["out_residual"], xs[1] + rs[1]))
        self.assertTrue(torch.equal(last["in.residual"], rs[1]))
        # only a chained input is added to, and not with its own values
        for bad_feed, what in (({"x": torch.randn(4, 8), "residual@add": delta}, "only a chained input"),
                               ({"x": torch.randn(4, 8), "residual@add": delta[:2]}, "the input has")):
            rep, _ = self.run_case("chained", {"x": xs[0], "residual": rs[0], "w": w}, outputs, args=args,
                                   replays=[{"x": xs[1], "residual": rs[1]}], layer_args=["w"],
                                   decoys=[{"w": t} for t in dws], decoy_calls=[1, 3],
                                   feeds=[feeds[0], {"x": feeds[1]["x"]}, feeds[2], bad_feed],
                                   chain=None if what.startswith("only") else {"out_residual": "residual"})
            self.assertFalse(rep["ok"], what)
            self.assertEqual(rep["error"]["class"], "bad_request", rep)
            self.assertIn(what, rep["error"]["message"])
        # without a chain, no decoy call is handed another's output
        rep, d = self.run_case("chained", {"x": xs[0], "residual": rs[0], "w": w}, outputs, args=args,
                               replays=[{"x": xs[1], "residual": rs[1]}], layer_args=["w"],
                               decoys=[{"w": t} for t in dws], decoy_calls=[1, 3],
                               feeds=[{"x": f["x"]} for f in feeds[:2]] + [feeds[2], {"x": feeds[3]["x"]}],
                               decoy_dumps=[3])
        self.assertTrue(rep["ok"], rep)
        t = stio.load(os.path.join(d, "decoy-3.safetensors"))[0]
        self.assertNotIn("pre.residual", t)
        self.assertTrue(torch.equal(t["in.residual"], start))

    def test_a_freed_stream_is_the_candidates_failure(self):
        # A call that frees the memory of the stream it hands on (resize_
        # on its storage) fails the case as the candidate's, named, at the
        # step that meets it: a decoy call's raw read before it, the way
        # the stream is passed on (@add, @move), or a graded call's fresh
        # tensor objects over that output (the guard's finding).
        args = [{"name": "x", "kind": "input"}, {"name": "residual", "kind": "input"},
                {"name": "w", "kind": "input"}, {"name": "out", "kind": "output"},
                {"name": "out_residual", "kind": "output"}]
        outputs = [self.out_spec(shape=(4, 8)), self.out_spec("out_residual", shape=(4, 8))]
        x = lambda: torch.randn(4, 8)  # noqa: E731
        for freeing, feed, cls, what in (
                (1, {"x": x()}, "exception", "reading 'residual' before a call with another layer's state failed"),
                (1, {"x": x(), "residual@add": x()}, "exception", "passing 'residual' on to a call"),
                (1, {"x": x(), "residual@move": torch.ones(1)}, "exception", "passing 'residual' on to a call"),
                (0, {"x": x()}, "tamper", "the memory of output 'out_residual' no longer holds")):
            dws = [x() for _ in range(3)]
            dws[freeing][0, 0] = 7  # the layer whose calls free it (chained_frees)
            rep, _ = self.run_case("chained_frees", {"x": x(), "residual": x(), "w": x()}, outputs, args=args,
                                   replays=[{"x": x(), "residual": x()}], layer_args=["w"],
                                   decoys=[{"w": t} for t in dws], decoy_calls=[1, 3],
                                   feeds=[{"x": x()}, {"x": x()}, feed, {"x": x()}],
                                   decoy_dumps=[3], chain={"out_residual": "residual"})
            self.assertFalse(rep["ok"], what)
            self.assertEqual(rep["error"]["class"], cls, rep)
            self.assertIn(what, rep["error"]["message"])
            self.assertIn("resized or freed", rep["error"]["message"])


if __name__ == "__main__":
    unittest.main()
