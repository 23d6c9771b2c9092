"""CUDA checks of the arena runtime (skipped without a GPU).

The stock CUDA paths (Triton kernels, torch SDPA) against the CPU torch
paths, CUDA graphs against eager decoding. (Throughput is measured by
`cacheon engine bench` and python/bench/, never here.) Run:

    python3 -m unittest discover -s python/tests -p 'test_engine_cuda.py'
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402

from cacheon_runtime.engine import decode_gemm, kernels, runner, stock  # noqa: E402

CUDA = torch.cuda.is_available()


def close(test, got, want, tol, what):
    got, want = got.float().cpu(), want.float().cpu()
    err = (got - want).abs().max().item()
    test.assertTrue(torch.isfinite(got).all().item(), "%s: non-finite output" % what)
    test.assertLessEqual(err, tol, "%s: max abs error %g > %g" % (what, err, tol))


@unittest.skipUnless(CUDA, "needs CUDA")
class StockKernels(unittest.TestCase):
    dt = torch.bfloat16

    def setUp(self):
        torch.manual_seed(0)

    def test_triton_present(self):
        self.assertTrue(kernels.HAVE_TRITON, "triton is not importable")

    def test_rmsnorm_silu(self):
        for n, h in ((1, 2048), (7, 1000), (64, 4096)):
            x = torch.randn(n, h)
            w = torch.rand(h) + 0.5
            want = torch.empty(n, h)
            stock.rmsnorm(x, w, want, 1e-5)
            out = torch.empty(n, h, dtype=self.dt, device="cuda")
            stock.rmsnorm(x.to("cuda", self.dt), w.to("cuda", self.dt), out, 1e-5)
            close(self, out, want, 0.05, "rmsnorm %dx%d" % (n, h))
            x2 = torch.randn(n, 2 * h)
            want = torch.empty(n, h)
            stock.silu_and_mul(x2, want)
            out = torch.empty(n, h, dtype=self.dt, device="cuda")
            stock.silu_and_mul(x2.to("cuda", self.dt), out)
            close(self, out, want, 0.02 * want.abs().max().item() + 0.02, "silu %dx%d" % (n, h))

    def test_rope_store(self):
        from cacheon_runtime.engine.config import ModelConfig
        from cacheon_runtime.engine.model import rope_tables
        for hq, hkv, d in ((8, 2, 64), (32, 8, 128), (4, 1, 16)):
            cfg = ModelConfig({"model": {"vocab_size": 8, "hidden_size": hq * d, "num_layers": 1, "num_heads": hq,
                                         "num_kv_heads": hkv, "head_dim": d, "intermediate_size": 8}})
            cos, sin = rope_tables(cfg, 256, "cpu")
            t, pages, ps = 9, 6, 4
            qkv = torch.randn(t, (hq + 2 * hkv) * d)
            pos = torch.randint(0, 256, (t,))
            slots = torch.randperm(pages * ps)[:t]
            res = []
            for dev, dt in (("cpu", torch.float32), ("cuda", self.dt)):
                q = torch.empty(t, hq, d, dtype=dt, device=dev)
                kc = torch.zeros(pages, ps, hkv, d, dtype=dt, device=dev)
                vc = torch.zeros_like(kc)
                k = torch.empty(t, hkv, d, dtype=dt, device=dev)
                v = torch.empty_like(k)
                stock.rope_store(qkv.to(dev, dt), pos.to(dev), slots.to(dev), cos.to(dev), sin.to(dev),
                                 q, kc, vc, hq, hkv, k, v)
                res.append((q, kc, vc, k, v))
            for name, a, b in zip("q kc vc k v".split(), res[0], res[1]):
                close(self, b, a, 0.05, "rope_store %s hq=%d" % (name, hq))

    def test_qkv_rope_matches_mm_then_rope(self):
        from cacheon_runtime.engine.config import ModelConfig
        from cacheon_runtime.engine.model import rope_tables
        for hq, hkv, d, h in ((32, 8, 64, 2048), (8, 2, 128, 1024), (4, 4, 32, 512)):
            cfg = ModelConfig({"model": {"vocab_size": 8, "hidden_size": h, "num_layers": 1, "num_heads": hq,
                                         "num_kv_heads": hkv, "head_dim": d, "intermediate_size": 8}})
            cos, sin = rope_tables(cfg, 512, "cuda")
            x = torch.randn(1, h, device="cuda", dtype=self.dt)
            w = (torch.randn((hq + 2 * hkv) * d, h, device="cuda") * h ** -0.5).to(self.dt)
            pos = torch.tensor([300], device="cuda")
            bt = torch.tensor([[5, 9, 2, 7, 11, 3, 1, 4, 6, 8, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20]],
                              dtype=torch.int32, device="cuda")
            res = []
            for fused in (False, True):
                q = torch.empty(1, hq, d, dtype=self.dt, device="cuda")
                kc = torch.zeros(24, 16, hkv, d, dtype=self.dt, device="cuda")
                vc = torch.zeros_like(kc)
                if fused:
                    decode_gemm.qkv_rope(x, w, pos, bt, cos, sin, q, kc, vc, hq, hkv)
                else:
                    stock.rope_store(torch.mm(x, w.t()), pos, None, cos, sin, q, kc, vc, hq, hkv, block_table=bt)
                res.append((q, kc, vc))
            self.assertGreater(res[0][1].abs().sum().item(), 0)
            for name, a, b in zip(("q", "k_cache", "v_cache"), res[0], res[1]):
                close(self, b, a, 0.03, "qkv_rope %s hq=%d" % (name, hq))

    def test_gemv_and_skinny_match_mm(self):
        # every launch path of the decode GEMMs, with and without the fused
        # residual add, K splits, programmatic dependent launch and the
        # skinny GEMM's TMA copies
        for pdl, tma in ((True, True), (True, False), (False, True)):
            kernels.PDL, decode_gemm.TMA = pdl, tma
            try:
                for m, n, k in ((1, 2048, 2048), (1, 300, 8192), (2, 3072, 2048), (7, 2048, 8192),
                                (33, 16384, 2048), (64, 2048, 2048), (64, 1000, 4096), (64, 2048, 8192)):
                    x = torch.randn(m, k, device="cuda", dtype=self.dt)
                    w = (torch.randn(n, k, device="cuda") * k ** -0.5).to(self.dt)
                    base = torch.randn(m, n, device="cuda", dtype=self.dt)
                    want = x.float() @ w.float().t()
                    fn = decode_gemm.gemv if m == 1 else decode_gemm.skinny
                    ok = decode_gemm.gemv_ok if m == 1 else decode_gemm.skinny_ok
                    self.assertTrue(ok(x, w), "m=%d n=%d k=%d not served" % (m, n, k))
                    kw = {} if m == 1 else {"tma": tma}  # TMA or not at every shape, K splits included
                    out = torch.empty(m, n, device="cuda", dtype=self.dt)
                    fn(x, w, out, **kw)
                    close(self, out, want, 0.05, "%s m=%d n=%d k=%d pdl=%s tma=%s" % (fn.__name__, m, n, k, pdl, tma))
                    acc = base.clone()
                    fn(x, w, acc, add=True, **kw)
                    close(self, acc, base.float() + want, 0.08, "%s add m=%d n=%d k=%d" % (fn.__name__, m, n, k))
                    # a second call re-uses the self-resetting split counters
                    fn(x, w, out, **kw)
                    close(self, out, want, 0.05, "%s again m=%d" % (fn.__name__, m))
            finally:
                kernels.PDL, decode_gemm.TMA = True, True

    def test_lm_head_sample_matches_logits_then_sample(self):
        # the lm_head GEMM's own sampling pass against logits then sample():
        # the same first argmax (a tie across column blocks included, and a
        # vocabulary that is not a whole number of blocks) and logprob, with
        # and without TMA copies
        try:
            for m, v, tma in ((2, 50000, True), (64, 128256, True), (64, 128256, False), (17, 1000, True)):
                decode_gemm.TMA = tma
                h = torch.randn(m, 2048, device="cuda", dtype=self.dt)
                w = (torch.randn(v, 2048, device="cuda") * 2048 ** -0.5).to(self.dt)
                w[7] = w[v - 3] = (h[0].float() * 0.05).to(self.dt)  # row 0: a tie at 7 and v-3
                self.assertTrue(decode_gemm.skinny_ok(h, w))
                logits = torch.empty(m, v, device="cuda", dtype=self.dt)
                decode_gemm.skinny(h, w, logits)
                want_tok = torch.empty(m, dtype=torch.long, device="cuda")
                want_lp = torch.empty(m, dtype=torch.float32, device="cuda")
                kernels.sample(logits, want_tok, want_lp)
                tok = torch.full((m,), -1, dtype=torch.long, device="cuda")
                lp = torch.full((m,), float("nan"), dtype=torch.float32, device="cuda")
                decode_gemm.lm_head_sample(h, w, tok, lp)
                self.assertEqual(int(tok[0]), 7, "m=%d v=%d: the tie goes to the first index" % (m, v))
                self.assertTrue(torch.equal(tok, want_tok), "m=%d v=%d: tokens differ" % (m, v))
                close(self, lp, want_lp, 1e-4, "lm_head_sample logprob m=%d v=%d" % (m, v))
                ref = torch.log_softmax(logits.float(), -1).gather(1, tok[:, None]).squeeze(1)
                close(self, lp, ref, 1e-3, "lm_head_sample logprob vs log_softmax m=%d" % m)
        finally:
            decode_gemm.TMA = True

    def test_paged_decode(self):
        for b, hq, hkv, d, ps, maxp, npages in ((1, 32, 8, 64, 16, 64, 80), (5, 8, 2, 128, 16, 8, 50),
                                                 (3, 4, 1, 64, 1, 70, 400), (64, 32, 8, 64, 16, 20, 1400),
                                                 (2, 8, 8, 64, 4, 30, 70)):
            q = torch.randn(b, hq, d)
            kc = torch.randn(npages, ps, hkv, d)
            vc = torch.randn(npages, ps, hkv, d)
            bt = torch.stack([torch.randperm(npages)[:maxp] for _ in range(b)]).int()
            sl = torch.randint(1, maxp * ps + 1, (b,)).int()
            sl[0] = 1
            want = torch.empty(b, hq, d)
            stock.attention_decode(q, kc, vc, bt, sl, d ** -0.5, want)
            out = torch.empty(b, hq, d, dtype=self.dt, device="cuda")
            cu = lambda t: t.to("cuda", self.dt)  # noqa: E731
            args = (cu(q), cu(kc), cu(vc), bt.cuda(), sl.cuda(), d ** -0.5)
            stock.attention_decode(*args, out)
            close(self, out, want, 0.05, "decode b=%d hq=%d hkv=%d ps=%d" % (b, hq, hkv, ps))
            first = out.clone()
            for _ in range(30):  # the split merge is deterministic and race-free
                stock.attention_decode(*args, out)
                self.assertTrue(torch.equal(out, first), "decode b=%d: repeated launches differ" % b)

    def test_paged_decode_reads_the_new_position(self):
        # rope_store writes the step's K/V into the cache and paged decode,
        # launched right after it, must attend to them whatever it loads
        # before its PDL wait (kernels.EARLY): the cache holds stale values
        # at the new positions, which a read before the wait could return.
        # Batch 64 runs one 128-position tile loop per (row, kv head),
        # batch 3 splits each row's positions over several programs.
        from cacheon_runtime.engine.config import ModelConfig
        from cacheon_runtime.engine.model import rope_tables
        hq, hkv, d, ps, maxp = 32, 8, 64, 16, 24
        cfg = ModelConfig({"model": {"vocab_size": 8, "hidden_size": hq * d, "num_layers": 1, "num_heads": hq,
                                     "num_kv_heads": hkv, "head_dim": d, "intermediate_size": 8}})
        cos, sin = rope_tables(cfg, maxp * ps, "cuda")
        try:
            for b in (64, 3):
                npages = b * maxp + 1
                bt = (torch.randperm(npages - 1)[:b * maxp] + 1).view(b, maxp).int().cuda()
                sl = torch.randint(2, maxp * ps + 1, (b,)).int()
                # the new position second in its page, last in a page, first
                # in a page, first in a second 128-position tile
                edge = torch.tensor([2, ps, ps + 1, 129], dtype=torch.int32)
                sl[:min(b, 4)] = edge[:min(b, 4)]
                sl = sl.cuda()
                pos = (sl - 1).long()
                kc = torch.randn(npages, ps, hkv, d, device="cuda").to(self.dt) * 4
                vc = torch.randn(npages, ps, hkv, d, device="cuda").to(self.dt) * 4
                qkv = torch.randn(b, (hq + 2 * hkv) * d, device="cuda").to(self.dt)
                outs = []
                for early in (False, True):
                    kernels.EARLY = early
                    k1, v1 = kc.clone(), vc.clone()
                    q = torch.empty(b, hq, d, dtype=self.dt, device="cuda")
                    out = torch.empty(b, hq, d, dtype=self.dt, device="cuda")
                    torch.cuda.synchronize()
                    stock.rope_store(qkv, pos, None, cos, sin, q, k1, v1, hq, hkv, block_table=bt)
                    stock.attention_decode(q, k1, v1, bt, sl, d ** -0.5, out)
                    torch.cuda.synchronize()
                    want = torch.empty(b, hq, d)
                    stock.attention_decode(q.float().cpu(), k1.float().cpu(), v1.float().cpu(), bt.cpu(), sl.cpu(),
                                           d ** -0.5, want)
                    close(self, out, want, 0.05, "rope then decode, batch %d, EARLY=%s" % (b, early))
                    outs.append(out)
                self.assertTrue(torch.equal(outs[0], outs[1]), "batch %d: EARLY changed the result" % b)
        finally:
            kernels.EARLY = True

    def test_sdpa(self):
        for t, p, hq, hkv, d in ((64, 0, 8, 2, 64), (40, 56, 16, 1, 128), (24, 8, 4, 4, 64), (1, 36, 8, 8, 64)):
            q, k, v = torch.randn(t, hq, d), torch.randn(t + p, hkv, d), torch.randn(t + p, hkv, d)
            want = torch.empty(t, hq, d)
            stock.attention(q, k, v, want, d ** -0.5, True)
            out = torch.empty(t, hq, d, dtype=self.dt, device="cuda")
            stock.attention(q.to("cuda", self.dt), k.to("cuda", self.dt), v.to("cuda", self.dt), out,
                            d ** -0.5, True)
            close(self, out, want, 0.05, "sdpa t=%d p=%d" % (t, p))

    def test_fused_experts(self):
        for m, h, i, e, k in ((1, 256, 128, 8, 2), (48, 512, 256, 8, 2), (33, 256, 128, 16, 4), (300, 128, 64, 4, 2)):
            x = torch.randn(m, h)
            w13 = torch.randn(e, 2 * i, h) * h ** -0.5
            w2 = torch.randn(e, h, i) * i ** -0.5
            ids = torch.stack([torch.randperm(e)[:k] for _ in range(m)]).int()
            tw = torch.rand(m, k)
            tw = tw / tw.sum(-1, keepdim=True)
            want = torch.empty(m, h)
            stock.fused_experts(x, ids, tw, stock.prepare(w13, w2), want)
            out = torch.empty(m, h, dtype=self.dt, device="cuda")
            cu = lambda t: t.to("cuda", self.dt)  # noqa: E731
            stock.fused_experts(cu(x), ids.cuda(), tw.cuda(), stock.prepare(cu(w13), cu(w2)), out)
            close(self, out, want, 0.06, "moe m=%d e=%d k=%d" % (m, e, k))


def tiny_arena(kind="llama", dtype="bfloat16", layers=2, buckets=(1, 2, 4, 8)):
    m = {"kind": kind, "vocab_size": 512, "hidden_size": 256, "num_layers": layers, "num_heads": 8,
         "num_kv_heads": 2, "head_dim": 32, "intermediate_size": 512, "weights_seed": 3}
    if kind == "mixtral":
        m.update(num_experts=8, top_k=2)
    return {"name": "cuda-tiny", "model": m, "dtype": dtype, "device": "cuda",
            "engine": {"page_size": 16, "max_batch": 8, "kv_pages": 256, "max_seq_len": 512,
                       "graph_buckets": list(buckets)}}


def wave(n=5, new=24):
    g = torch.Generator().manual_seed(1)
    reqs = [{"rid": "r%d" % i, "prompt": torch.randint(0, 512, (5 + 7 * i,), generator=g).tolist(),
             "max_new_tokens": new, "ignore_eos": True} for i in range(n)]
    return {"requests": reqs, "arrivals": [0, 0, 3, 3, 9][:n]}


@unittest.skipUnless(CUDA, "needs CUDA")
class EngineCUDA(unittest.TestCase):
    def run_pair(self, kind, dtype):
        eager = runner.Engine({"arena": tiny_arena(kind, dtype), "graphs": False})
        a = eager.generate(wave())
        del eager
        graph = runner.Engine({"arena": tiny_arena(kind, dtype), "graphs": True})
        self.assertTrue(graph.use_graphs and graph.graphs)
        b = graph.generate(wave())
        stats = graph.stats()
        same = sum(x == y for ra, rb in zip(a["results"], b["results"]) for x, y in zip(ra["tokens"], rb["tokens"]))
        total = sum(len(r["tokens"]) for r in a["results"])
        self.assertGreaterEqual(same / total, 0.9, "graph vs eager tokens: %d/%d equal" % (same, total))
        for ra, rb in zip(a["results"], b["results"]):
            # the first tokens of every request come from identical math
            self.assertEqual(ra["tokens"][:2], rb["tokens"][:2])
        return stats

    def test_dense_graphs_match_eager(self):
        st = self.run_pair("llama", "bfloat16")
        self.assertGreater(st["slots"]["attention.decode"]["stock"], 0)

    def test_prefill_graphs_match_eager(self):
        # A single fresh prompt is prefilled by the graph of the smallest
        # token bucket that holds it (padded at its end): the same first
        # token and logprob as the eager prefill, the same slot counters,
        # and one prompt too long for every bucket stays eager.
        arena = tiny_arena("llama", "bfloat16")
        eager = runner.Engine({"arena": arena, "graphs": False})
        graph = runner.Engine({"arena": arena, "graphs": True})
        self.assertEqual(sorted(graph.pf_graphs), [32, 64, 128, 256, 512])
        self.assertEqual(graph.load_reply()["prefill_graph_tokens"], [32, 64, 128, 256, 512])
        self.assertEqual(runner.Engine({"arena": tiny_arena("mixtral", "bfloat16")}).pf_graphs, {})
        g = torch.Generator().manual_seed(5)
        for n in (1, 31, 32, 33, 200, 500):
            req = {"requests": [{"rid": "p%d" % n, "prompt": torch.randint(0, 512, (n,), generator=g).tolist(),
                                 "max_new_tokens": 4, "ignore_eos": True}]}
            a, b = eager.generate(req), graph.generate(req)
            self.assertEqual(a["results"][0]["tokens"][:2], b["results"][0]["tokens"][:2], "prompt of %d" % n)
            self.assertAlmostEqual(a["results"][0]["logprobs"][0], b["results"][0]["logprobs"][0], delta=0.05)
        se, sg = eager.stats()["slots"], graph.stats()["slots"]
        for slot in ("norm.rmsnorm", "activation.silu_and_mul", "attention.sdpa", "attention.decode"):
            self.assertEqual(se[slot], sg[slot], slot)
        self.assertGreater(sg["attention.sdpa"]["stock"], 0)
        # the graph serves one prompt of up to 512 tokens, never two
        used = []
        orig = graph._prefill_replay
        graph._prefill_replay = lambda r, t: used.append(t) or orig(r, t)
        graph.generate({"requests": [{"rid": "x", "prompt": [1] * 40, "max_new_tokens": 2}]})
        graph.generate({"requests": [{"rid": "y", "prompt": [1] * 40, "max_new_tokens": 2},
                                     {"rid": "z", "prompt": [2] * 9, "max_new_tokens": 2}]})
        self.assertEqual(used, [64])

    def test_moe_graphs_match_eager(self):
        st = self.run_pair("mixtral", "bfloat16")
        self.assertGreater(st["slots"]["moe.fused_experts"]["stock"], 0)

    def test_cuda_matches_cpu(self):
        # Random weights are drawn on the device, so CUDA and CPU share them
        # through a checkpoint.
        import tempfile
        from cacheon_runtime import stio
        from cacheon_runtime.engine import weights
        arena = tiny_arena("llama", "float32")
        arena["device"] = "cpu"
        cpu = runner.Engine({"arena": arena})
        cp = cpu.generate(wave(new=8))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.safetensors")
            stio.save(path, weights.hf_state_dict(cpu.mcfg, cpu.w))
            for dt in ("float32", "bfloat16"):
                arena.update(device="cuda", dtype=dt)
                cu = runner.Engine({"arena": arena, "checkpoint": path, "graphs": True}).generate(wave(new=8))
                for a, b in zip(cu["results"], cp["results"]):
                    n = 3 if dt == "float32" else 1
                    self.assertEqual(a["tokens"][:n], b["tokens"][:n], dt)

    def test_profile(self):
        e = runner.Engine({"arena": tiny_arena(), "profile": True})
        e.generate(wave())
        p = e.stats()["profile"]
        self.assertGreater(p["decode"]["device_ms"], 0)
        self.assertGreater(p["decode"]["split_ms"]["attention"], 0)


@unittest.skipUnless(CUDA, "needs CUDA")
class CandidatesCUDA(unittest.TestCase):
    """Candidates under CUDA graphs: selection happens at capture, counters
    are added per replay, a raising candidate aborts (strict) or falls back."""

    def test_graph_candidates(self):
        sys.path.insert(0, HERE)
        from test_engine_dispatch import Bundles
        from cacheon_runtime.engine import dispatch
        b = Bundles()
        try:
            ref = runner.Engine({"arena": tiny_arena()}).generate(wave())
            eng = runner.Engine({"arena": tiny_arena(), "stack": b.stack("rms_good")})
            self.assertTrue(eng.graphs)
            got = eng.generate(wave())
            st = eng.stats()["slots"]
            for slot in ("norm.rmsnorm",):
                self.assertGreater(st[slot]["selected"], 0, slot)
                self.assertEqual(st[slot]["selected"], st[slot]["completed"], slot)
            same = sum(x == y for ra, rb in zip(ref["results"], got["results"])
                       for x, y in zip(ra["tokens"], rb["tokens"]))
            self.assertGreaterEqual(same / sum(len(r["tokens"]) for r in ref["results"]), 0.9)
            with self.assertRaises(dispatch.CandidateAbort):
                runner.Engine({"arena": tiny_arena(), "stack": b.stack("silu_raises"), "strict": True})
            eng = runner.Engine({"arena": tiny_arena(), "stack": b.stack("silu_raises"), "strict": False})
            got = eng.generate(wave())
            st = eng.stats()
            self.assertGreater(st["slots"]["activation.silu_and_mul"]["fallback"], 0)
            self.assertTrue(st["receipts"])
            # decode_good syncs the host (int(seq_lens[b])): not capturable
            with self.assertRaises(dispatch.CandidateAbort):
                runner.Engine({"arena": tiny_arena(), "stack": b.stack("decode_good"), "strict": True})
            eng = runner.Engine({"arena": tiny_arena(), "stack": b.stack("decode_good"), "strict": False})
            eng.generate(wave())
            st = eng.stats()
            self.assertGreater(st["slots"]["attention.decode"]["fallback"], 0)
            self.assertTrue(any("graph capture failed" in r["reason"] for r in st["receipts"]), st["receipts"])
        finally:
            b.tmp.cleanup()


if __name__ == "__main__":
    unittest.main()
