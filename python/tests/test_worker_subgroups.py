"""Worker protocol tests of process subgroups (session 39): the group
request's ``subgroups`` (a partition of the ranks, every one created on
every rank with torch.distributed.new_group before any load) and the run
request's ``process_group`` ("world" or "sub": which group a "group" arg
hands the kernel). Bad fields are refused as bad_request naming the field;
gloo runs on 2 and 4 ranks (CPU), NCCL on 2 GPUs where there are two.

Run: python3 -m unittest discover -s python/tests   (from the repo root)
"""

import json
import os
import shutil
import socket
import tempfile
import unittest

import torch

import workerkit as tw  # sets the path of cacheon_runtime
from cacheon_runtime import stio  # noqa: E402  (after workerkit)

# A kernel that ignores the group it is handed and reduces over the
# default (world) group: rt37's allreduce_default_group.
DEFAULT_GROUP = """
import torch.distributed as dist


def all_reduce(x, out, group):
    out.copy_(x)
    dist.all_reduce(out)
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def group_req(init, rank, world, backend="gloo", device="cpu", subgroups=None):
    req = {"op": "group", "backend": backend, "init_method": init, "rank": rank,
           "world_size": world, "device": device, "local_rank": rank}
    if subgroups is not None:
        req["subgroups"] = subgroups
    return req


def run_req(d, device="cpu", process_group=None, module="m0"):
    req = {"op": "run", "module": module, "device": device, "entry": "all_reduce", "prepare": "",
           "args": [{"name": "x", "kind": "input"}, {"name": "out", "kind": "output"},
                    {"name": "group", "kind": "group"}],
           "outputs": [{"name": "out", "dtype": "float32", "shape": [5, 8], "stride": [8, 1],
                        "alignment": 16}],
           "inputs": "in.safetensors", "replays": [], "graph": False, "dir": d}
    if process_group is not None:
        req["process_group"] = process_group
    return req


class Ranks:
    """world workers in one job tree, each with its own x; every request is
    sent to all ranks before any reply is read (rendezvous and new_group
    block until all ranks arrive)."""

    def __init__(self, world):
        self.tmp = tempfile.mkdtemp(prefix="cacheon-subgroups-")
        self.bundle = os.path.join(self.tmp, "bundle")
        tw.write_bundle(self.bundle)
        with open(os.path.join(self.bundle, "kernels", "default_group.py"), "w") as f:
            f.write(DEFAULT_GROUP)
        self.xs = [torch.randn(5, 8) for _ in range(world)]
        self.workers = []
        self.n = 0
        for rank in range(world):
            d = os.path.join(self.tmp, "rank%d" % rank)
            os.makedirs(d)
            stio.save(os.path.join(d, "in.safetensors"), {"x": self.xs[rank]})
            self.workers.append(tw.Worker(d))

    def all(self, make):
        """Send make(rank, worker) to every rank, then return the replies."""
        self.n += 1
        rid = "a%d" % self.n
        for rank, w in enumerate(self.workers):
            w.send_raw((json.dumps(dict(make(rank, w), id=rid)) + "\n").encode())
        return [w.reply() for w in self.workers]

    def load(self, source, module="m0"):
        return self.all(lambda r, w: {"op": "load", "module": module, "bundle": self.bundle,
                                      "source": source, "entry": "all_reduce"})

    def out(self, rank):
        t, _ = stio.load(os.path.join(self.workers[rank].jobdir, "call-0.safetensors"))
        return t["out"]

    def close(self):
        for w in self.workers:
            w.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class SubgroupFieldTest(tw.WorkerTestBase):
    """Bad subgroups and process_group fields on one worker, no group."""

    def test_bad_subgroups_refused(self):
        init = "tcp://127.0.0.1:%d" % free_port()
        for sub in ([[0, 1, 2, 3]], [[0, 2], []], [[0, 2], [1, 4]], [[0, 2], [2, 1, 3]],
                    [[0, 2], [1]], [[0, 2], [1, "3"]], [[0, 2], [1, True, 3]], "0,2;1,3",
                    [[0, 2], 1, [3]], []):
            rep = self.w.request(group_req(init, 0, 4, subgroups=sub))
            self.assertFalse(rep["ok"], sub)
            err = rep["error"]
            self.assertEqual(err["class"], "bad_request", (sub, rep))
            self.assertIn("'subgroups'", err["message"], sub)
            self.assertFalse(err.get("traceback"), sub)
        # Refused before any rendezvous: the worker is still without a group.
        rep = self.w.request({"op": "run", "module": "none", "device": "cpu"})
        self.assertEqual(rep["error"]["class"], "bad_request")

    def test_bad_process_group_refused(self):
        module, rep = self.load("silu_and_mul", module="pg")
        self.assertTrue(rep["ok"], rep)
        d = self.case_dir()
        stio.save(os.path.join(d, "in.safetensors"), {"x": torch.randn(7, 192)})
        base = {"op": "run", "module": module, "device": "cpu", "entry": "silu_and_mul",
                "args": [{"name": "x", "kind": "input"}, {"name": "out", "kind": "output"}],
                "outputs": [self.out_spec()], "inputs": "in.safetensors", "dir": d}
        for pg, words in (("bogus", "'process_group'"), (3, "'process_group'"),
                          ("sub", "needs subgroups")):
            rep = self.w.request(dict(base, process_group=pg))
            self.assertEqual(rep["error"]["class"], "bad_request", (pg, rep))
            self.assertIn(words, rep["error"]["message"])
        self.assertTrue(self.w.request(dict(base, process_group="world"))["ok"])


class GlooSubgroupTest(unittest.TestCase):
    """gloo on CPU: four ranks as two interleaved pairs, two as two ranks
    alone."""

    def setUp(self):
        import torch.distributed as dist
        if not dist.is_available():
            self.skipTest("torch.distributed not available")

    def test_four_ranks_two_interleaved_pairs(self):
        ranks = Ranks(4)
        try:
            parts = [[0, 2], [1, 3]]
            init = "tcp://127.0.0.1:%d" % free_port()
            # The world group first, then its subgroups (Go sends them at a
            # set's first row); the same request again is a no-op.
            for rep in ranks.all(lambda r, w: group_req(init, r, 4)):
                self.assertTrue(rep["ok"], rep)
            for _ in range(2):
                for rep in ranks.all(lambda r, w: group_req(init, r, 4, subgroups=parts)):
                    self.assertTrue(rep["ok"], rep)
            rep = ranks.workers[0].request(group_req(init, 0, 4, subgroups=[[0, 1], [2, 3]]))
            self.assertEqual(rep["error"]["class"], "group_error", rep)
            self.assertIn("different subgroups", rep["error"]["message"])
            for rep in ranks.load("kernels/cands.py"):
                self.assertTrue(rep["ok"], rep)
            for rep in ranks.load("kernels/default_group.py", module="m1"):
                self.assertTrue(rep["ok"], rep)
            # New subgroups after a load are refused; the same ones are not.
            rep = ranks.workers[1].request(group_req(init, 1, 4, subgroups=[[0], [1, 2, 3]]))
            self.assertEqual(rep["error"]["class"], "bad_request", rep)
            self.assertIn("before any load", rep["error"]["message"])
            self.assertTrue(ranks.workers[1].request(group_req(init, 1, 4, subgroups=parts))["ok"])
            xs = ranks.xs
            world = xs[0] + xs[1] + xs[2] + xs[3]
            pair = {0: xs[0] + xs[2], 2: xs[0] + xs[2], 1: xs[1] + xs[3], 3: xs[1] + xs[3]}
            for module, pg, want in (("m0", "sub", pair), ("m0", "world", {r: world for r in range(4)}),
                                     ("m0", None, {r: world for r in range(4)}),
                                     ("m1", "sub", {r: world for r in range(4)})):
                reps = ranks.all(lambda r, w: run_req(w.jobdir, process_group=pg, module=module))
                for rank, rep in enumerate(reps):
                    self.assertTrue(rep["ok"], rep)
                    self.assertIsNone(rep["calls"][0]["error"])
                    self.assertTrue(torch.allclose(ranks.out(rank), want[rank], atol=1e-6),
                                    (module, pg, rank))
            # The kernel that ignores its group is wrong on every rank of a
            # subgroup: its sum is the world's.
            self.assertFalse(torch.allclose(world, pair[0], atol=1e-3))
        finally:
            ranks.close()

    def test_two_ranks_alone(self):
        ranks = Ranks(2)
        try:
            init = "tcp://127.0.0.1:%d" % free_port()
            # World and subgroups in one request, as a cold set's may.
            for rep in ranks.all(lambda r, w: group_req(init, r, 2, subgroups=[[1], [0]])):
                self.assertTrue(rep["ok"], rep)
            for rep in ranks.load("kernels/cands.py"):
                self.assertTrue(rep["ok"], rep)
            for rep in ranks.all(lambda r, w: run_req(w.jobdir, process_group="sub")):
                self.assertTrue(rep["ok"], rep)
                self.assertIsNone(rep["calls"][0]["error"])
            for rank in range(2):
                # A group of one rank: the reduction is the identity.
                self.assertTrue(torch.equal(ranks.out(rank), ranks.xs[rank]))
        finally:
            ranks.close()


@unittest.skipUnless(tw.CUDA and torch.cuda.device_count() >= 2, "needs two CUDA devices")
class NcclSubgroupTest(unittest.TestCase):
    """NCCL on two GPUs: each rank alone in its subgroup, then the world."""

    def test_nccl_ranks_alone(self):
        ranks = Ranks(2)
        try:
            init = "tcp://127.0.0.1:%d" % free_port()
            for rep in ranks.all(lambda r, w: group_req(init, r, 2, backend="nccl", device="cuda",
                                                         subgroups=[[0], [1]])):
                self.assertTrue(rep["ok"], rep)
            for rep in ranks.load("kernels/cands.py"):
                self.assertTrue(rep["ok"], rep)
            for pg in ("sub", "world"):
                reps = ranks.all(lambda r, w: run_req(w.jobdir, device="cuda:%d" % r, process_group=pg))
                for rank, rep in enumerate(reps):
                    self.assertTrue(rep["ok"], rep)
                    self.assertIsNone(rep["calls"][0]["error"], rep)
                    want = ranks.xs[rank] if pg == "sub" else ranks.xs[0] + ranks.xs[1]
                    self.assertTrue(torch.allclose(ranks.out(rank), want, atol=1e-5), (pg, rank))
        finally:
            ranks.close()


if __name__ == "__main__":
    unittest.main()
