"""Tests of the tensor-parallel engine (CPU, gloo, two ranks).

Two ranks run the tiny arenas on their weight shards, every cross-rank
reduction through the collective slots' dispatch; their tokens must be the
one-rank engine's, and their logprobs within TP_LOGPROB_TOL of it (the
partial sums are added in another order than one rank's GEMM adds them, so
float32 results differ in the last bits).

Run: python3 -m unittest discover -s python/tests -p 'test_engine_tp.py'
"""

import os
import socket
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from cacheon_runtime.engine import dispatch, runner, weights  # noqa: E402
from test_engine_model import tiny_arena, wave  # noqa: E402

# The largest |logprob(TP=2) - logprob(TP=1)| accepted (float32).
TP_LOGPROB_TOL = 1e-5

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples")
ALL_REDUCE_BUNDLE = os.path.join(EXAMPLES, "all_reduce_torch")


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank, world, port, kind, stack, result_dir, engine):
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    try:
        req = {"arena": tiny_arena(kind, **engine), "stack": stack}
        eng = runner.Engine(req, tp=(dist.group.WORLD, rank, world))
        out = eng.generate({"requests": wave()})
        torch.save({"results": out["results"], "stats": eng.stats()}, os.path.join(result_dir, "rank%d.pt" % rank))
    finally:
        dist.destroy_process_group()


def run_tp(kind, stack=None, world=2, **engine):
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(_rank, args=(world, _port(), kind, stack or {}, d, engine), nprocs=world, join=True)
        return [torch.load(os.path.join(d, "rank%d.pt" % r)) for r in range(world)]


class ShardTest(unittest.TestCase):
    def test_check_tp(self):
        from cacheon_runtime.engine import config
        cfg = config.ModelConfig(tiny_arena())
        self.assertEqual(weights.check_tp(cfg, 2), "")
        self.assertIn("num_kv_heads", weights.check_tp(cfg, 4))

    def test_shards_cover_the_weights(self):
        from cacheon_runtime.engine import config
        for kind in ("llama", "mixtral"):
            cfg = config.ModelConfig(tiny_arena(kind))
            full = weights.random_weights(cfg, torch.device("cpu"), torch.float32)
            parts = [weights.shard(cfg, weights.random_weights(cfg, torch.device("cpu"), torch.float32), r, 2)
                     for r in range(2)]
            i = cfg.intermediate_size
            for li, ly in enumerate(full.layers):
                # o by columns: the shards side by side are the whole
                self.assertTrue(torch.equal(torch.cat([p.layers[li].o for p in parts], dim=1), ly.o))
                if kind == "llama":
                    gate = torch.cat([p.layers[li].gate_up[:i // 2] for p in parts])
                    up = torch.cat([p.layers[li].gate_up[i // 2:] for p in parts])
                    self.assertTrue(torch.equal(torch.cat([gate, up]), ly.gate_up))
                else:
                    gate = torch.cat([p.layers[li].w13[:, :i // 2] for p in parts], dim=1)
                    up = torch.cat([p.layers[li].w13[:, i // 2:] for p in parts], dim=1)
                    self.assertTrue(torch.equal(torch.cat([gate, up], dim=1), ly.w13))
                    self.assertTrue(torch.equal(torch.cat([p.layers[li].w2 for p in parts], dim=2), ly.w2))


class TensorParallelTest(unittest.TestCase):
    def check_equal(self, kind, stack=None, **engine):
        single = runner.Engine({"arena": tiny_arena(kind)}).generate({"requests": wave()})["results"]
        ranks = run_tp(kind, stack, **engine)
        for r, got in enumerate(ranks):
            for a, b in zip(single, got["results"]):
                self.assertEqual(a["tokens"], b["tokens"], "rank %d request %s" % (r, a["rid"]))
                worst = max(abs(x - y) for x, y in zip(a["logprobs"], b["logprobs"]))
                self.assertLessEqual(worst, TP_LOGPROB_TOL, "rank %d request %s" % (r, a["rid"]))
        return ranks

    def test_dense_tokens_equal_one_rank(self):
        ranks = self.check_equal("llama")
        slots = ranks[0]["stats"]["slots"]
        self.assertGreater(slots[dispatch.ALL_REDUCE]["stock"], 0)
        self.assertGreater(slots[dispatch.AR_RMSNORM]["stock"], 0)
        self.assertEqual(slots[dispatch.MOE_REDUCE]["stock"], 0)

    def test_moe_tokens_equal_one_rank(self):
        ranks = self.check_equal("mixtral")
        slots = ranks[0]["stats"]["slots"]
        self.assertGreater(slots[dispatch.MOE_REDUCE]["stock"], 0)
        self.assertEqual(slots[dispatch.MOE]["stock"], 0)

    def test_deep_moe_tokens_equal_one_rank(self):
        ranks = self.check_equal("mixtral", moe_path="deep")
        slots = ranks[0]["stats"]["slots"]
        self.assertGreater(slots[dispatch.MOE_FINALIZE]["stock"], 0)
        self.assertEqual(slots[dispatch.MOE_REDUCE]["stock"], 0)
        # the next layer's norm rides in moe_finalize: per forward only
        # layer 0's input norm and the final norm are rmsnorm calls, as
        # many as the two layers' ar_residual_rmsnorm calls (the fused
        # path calls rmsnorm three times per forward)
        self.assertEqual(slots[dispatch.RMSNORM]["stock"], slots[dispatch.AR_RMSNORM]["stock"])

    def test_candidate_moe_finalize_fires(self):
        stack = {dispatch.MOE_FINALIZE: {"bundle": os.path.join(EXAMPLES, "moe_finalize_torch"),
                                         "source": "finalize.py"}}
        ranks = self.check_equal("mixtral", stack, moe_path="deep")
        for got in ranks:
            c = got["stats"]["slots"][dispatch.MOE_FINALIZE]
            self.assertGreater(c["selected"], 0)
            self.assertEqual(c["completed"], c["selected"])

    def test_deep_needs_mixtral_on_ranks(self):
        with self.assertRaises(dispatch.Failure):
            runner.Engine({"arena": tiny_arena("mixtral", moe_path="deep")})
        with self.assertRaises(dispatch.Failure):
            runner.Engine({"arena": tiny_arena("mixtral", moe_path="wide")})

    def test_candidate_all_reduce_fires(self):
        stack = {dispatch.ALL_REDUCE: {"bundle": ALL_REDUCE_BUNDLE, "source": "all_reduce.py"}}
        ranks = self.check_equal("llama", stack)
        for got in ranks:
            c = got["stats"]["slots"][dispatch.ALL_REDUCE]
            self.assertGreater(c["selected"], 0)
            self.assertEqual(c["completed"], c["selected"])
            self.assertEqual(c["stock"], 0)

    def test_one_rank_refuses_collective_slots(self):
        stack = {dispatch.ALL_REDUCE: {"bundle": ALL_REDUCE_BUNDLE, "source": "all_reduce.py"}}
        with self.assertRaises(dispatch.Failure):
            runner.Engine({"arena": tiny_arena(), "stack": stack})


if __name__ == "__main__":
    unittest.main()
