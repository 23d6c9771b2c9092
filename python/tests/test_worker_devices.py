"""Worker protocol tests on more than one process or on a GPU: two gloo
ranks in a process group (CollectiveTest), and every CPU test of
test_worker again on CUDA with graph capture and replays (CudaWorkerTest,
skipped without a GPU). The helpers are in workerkit.

Run: python3 -m unittest discover -s python/tests   (from the repo root)
"""

import json
import os
import shutil
import socket
import tempfile
import unittest

import torch

import test_worker
import workerkit as tw  # sets the path of cacheon_runtime
from cacheon_runtime import stio  # noqa: E402  (after workerkit)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class CollectiveTest(unittest.TestCase):
    """Two workers, gloo on CPU: group, then run all_reduce on each rank."""

    def test_gloo_all_reduce(self):
        import torch.distributed as dist
        if not dist.is_available():
            self.skipTest("torch.distributed not available")
        tmp = tempfile.mkdtemp()
        workers = []
        try:
            bundle = os.path.join(tmp, "bundle")
            tw.write_bundle(bundle)
            init = "tcp://127.0.0.1:%d" % free_port()
            xs = [torch.randn(5, 8) for _ in range(2)]
            for rank in range(2):
                d = os.path.join(tmp, "rank%d" % rank)
                os.makedirs(d)
                stio.save(os.path.join(d, "in.safetensors"), {"x": xs[rank]})
                workers.append(tw.Worker(d))
            # The group comes first, as Go sends it: before any candidate
            # code is imported. init_process_group blocks until both ranks
            # arrive: send both first.
            for rank, w in enumerate(workers):
                w.send_raw((json.dumps({"op": "group", "id": "g", "backend": "gloo",
                                        "init_method": init, "rank": rank, "world_size": 2,
                                        "device": "cpu"}) + "\n").encode())
            for w in workers:
                rep = w.reply()
                self.assertTrue(rep["ok"], rep)
            for w in workers:
                rep = w.request({"op": "load", "module": "m0", "bundle": bundle,
                                 "source": "kernels/cands.py", "entry": "all_reduce"})
                self.assertTrue(rep["ok"], rep)
            # A group after a load is refused (a different one: the same one
            # again is a no-op).
            rep = workers[0].request({"op": "group", "backend": "gloo", "init_method": init + "0",
                                      "rank": 0, "world_size": 2, "device": "cpu"})
            self.assertEqual(rep["error"]["class"], "bad_request", rep)
            self.assertIn("before any load", rep["error"]["message"])
            for rank, w in enumerate(workers):
                w.send_raw((json.dumps({
                    "op": "run", "id": "r", "module": "m0", "device": "cpu",
                    "entry": "all_reduce", "prepare": "",
                    "args": [{"name": "x", "kind": "input"}, {"name": "out", "kind": "output"},
                             {"name": "group", "kind": "group"}],
                    "outputs": [{"name": "out", "dtype": "float32", "shape": [5, 8],
                                 "stride": [8, 1], "alignment": 16}],
                    "inputs": "in.safetensors", "replays": [], "graph": False,
                    "dir": w.jobdir}) + "\n").encode())
            for w in workers:
                rep = w.reply()
                self.assertTrue(rep["ok"], rep)
                self.assertIsNone(rep["calls"][0]["error"])
                t, _ = stio.load(os.path.join(w.jobdir, "call-0.safetensors"))
                self.assertTrue(torch.allclose(t["out"], xs[0] + xs[1]))
        finally:
            for w in workers:
                w.close()
            shutil.rmtree(tmp, ignore_errors=True)


@unittest.skipUnless(tw.CUDA, "CUDA is not available")
class CudaWorkerTest(test_worker.CpuWorkerTest):
    """Every CPU test again on CUDA, plus CUDA graph capture and replays."""
    device = "cuda"

    def bf(self, seed, n=7, h=192):
        return self.x(seed, torch.bfloat16, n, h)

    def test_triton_kernel_under_graph(self):
        try:
            import triton  # noqa: F401
        except ImportError:
            self.skipTest("triton is not installed")
        xs = [self.x(i) for i in range(4)]
        rep, d = self.run_case("triton_silu_and_mul", {"x": xs[0]}, [self.out_spec()],
                               source="kernels/tri.py",
                               replays=[{"x": xs[1]}], graph=True,
                               graph_replays=[{"x": x} for x in xs[2:]])
        self.assertTrue(rep["ok"], rep)
        self.assertEqual([c["phase"] for c in rep["calls"]],
                         ["eager", "replay", "graph_replay", "graph_replay"])
        for c, x in zip(rep["calls"], xs):
            self.assertIsNone(c["error"], c)
            out = self.call_file(d, c)["out"]
            self.assertTrue(torch.allclose(out, tw.silu_ref(x), atol=1e-5, rtol=1e-5), c["phase"])

    def test_nccl_group_single_rank_under_graph(self):
        w = tw.Worker(self.job)
        try:
            # The group comes first: once candidate code is loaded the audit
            # hook refuses sockets, and the worker refuses a late group.
            rep = w.request({"op": "group", "backend": "nccl",
                             "init_method": "tcp://127.0.0.1:%d" % free_port(),
                             "rank": 0, "world_size": 1, "device": "cuda", "local_rank": 0})
            self.assertTrue(rep["ok"], rep)
            rep = w.request({"op": "load", "module": "m0", "bundle": self.bundle,
                             "source": "kernels/cands.py", "entry": "all_reduce"})
            self.assertTrue(rep["ok"], rep)
            d = self.case_dir()
            xs = [torch.randn(5, 8) for _ in range(3)]
            stio.save(os.path.join(d, "in.safetensors"), {"x": xs[0]})
            stio.save(os.path.join(d, "r1.safetensors"), {"x": xs[1]})
            stio.save(os.path.join(d, "g1.safetensors"), {"x": xs[2]})
            rep = w.request({
                "op": "run", "module": "m0", "device": "cuda:0", "entry": "all_reduce",
                "args": [{"name": "x", "kind": "input"}, {"name": "out", "kind": "output"},
                         {"name": "group", "kind": "group"}],
                "outputs": [self.out_spec(shape=(5, 8))], "inputs": "in.safetensors",
                "replays": ["r1.safetensors"], "graph": True,
                "graph_replays": ["g1.safetensors"], "dir": d})
            self.assertTrue(rep["ok"], rep)
            self.assertEqual(len(rep["calls"]), 3)
            for c, x in zip(rep["calls"], xs):
                self.assertIsNone(c["error"], c)
                self.assertTrue(torch.equal(self.call_file(d, c)["out"], x))
        finally:
            w.close()

    def test_graph_capture_and_replays(self):
        xs = [self.bf(i) for i in range(7)]
        rep, d = self.run_case("silu_and_mul", {"x": xs[0]}, [self.out_spec(dtype="bfloat16")],
                               replays=[{"x": x} for x in xs[1:4]], graph=True,
                               graph_replays=[{"x": x} for x in xs[4:]])
        self.assertTrue(rep["ok"], rep)
        calls = rep["calls"]
        self.assertEqual([c["phase"] for c in calls],
                         ["eager"] + ["replay"] * 3 + ["graph_replay"] * 3)
        first = calls[0]["before"]
        self.assertTrue(first["x"]["device"].startswith("cuda"))
        for c, x in zip(calls, xs):
            self.assertIsNone(c["error"], c)
            self.assertEqual(c["before"], first)
            self.assertEqual(c["after"], first)
            t = self.call_file(d, c)
            self.assertTrue(torch.equal(t["in.x"], x))
            ref = tw.silu_ref(x.float()).to(torch.bfloat16)
            self.assertTrue(torch.allclose(t["out"].float(), ref.float(), atol=2e-2, rtol=2e-2),
                            c["phase"])

    def test_graph_poison_visible(self):
        rep, d = self.run_case("writes_nothing", {"x": self.bf(0)}, [self.out_spec(dtype="bfloat16")],
                               graph=True, graph_replays=[{"x": self.bf(1)}])
        self.assertTrue(rep["ok"], rep)
        self.assertEqual(rep["calls"][-1]["phase"], "graph_replay")
        for c in rep["calls"]:
            self.assertTrue(torch.isnan(self.call_file(d, c)["out"].float()).all())

    def test_graph_capture_error(self):
        # .item() synchronizes with the host: fine eagerly, illegal during capture.
        rep, _d = self.run_case("syncs", {"x": self.x(0)}, [self.out_spec(shape=(2, 2))],
                                replays=[{"x": self.x(1)}], graph=True,
                                graph_replays=[{"x": self.x(2)}])
        self.assertFalse(rep["ok"], rep)
        self.assertEqual(rep["error"]["class"], "graph_capture_error")
        self.assertTrue(self.w.request({"op": "hello"})["ok"])
        # The worker still runs eager cases afterwards.
        rep, _d = self.run_case("silu_and_mul", {"x": self.bf(3)}, [self.out_spec(dtype="bfloat16")])
        self.assertTrue(rep["ok"], rep)
        self.assertIsNone(rep["calls"][0]["error"])

    def test_some_calls_begin_on_a_busy_stream(self):
        # The worker synchronizes around every call; it queues work ahead
        # of about half of them, so that a kernel asking whether the
        # stream is idle gets both answers in verify, as in serving.
        xs = [self.x(i) for i in range(24)]
        rep, d = self.run_case("stream_busy", {"x": xs[0]}, [self.out_spec()],
                               replays=[{"x": x} for x in xs[1:]])
        self.assertTrue(rep["ok"], rep)
        seen = {float(self.call_file(d, c)["out"].flatten()[0]) for c in rep["calls"]}
        self.assertEqual(seen, {0.0, 1.0})

    def test_eager_exception_on_cuda(self):
        rep, _d = self.run_case("raises", {"x": self.bf(0)}, [self.out_spec(dtype="bfloat16")],
                                graph=True, graph_replays=[{"x": self.bf(1)}])
        self.assertTrue(rep["ok"], rep)
        self.assertEqual(len(rep["calls"]), 1)
        self.assertEqual(rep["calls"][0]["error"]["type"], "ValueError")
        self.assertTrue(self.w.request({"op": "hello"})["ok"])


if __name__ == "__main__":
    unittest.main()
