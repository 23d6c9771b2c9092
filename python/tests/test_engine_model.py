"""Tests of the arena runtime's model and serving loop (CPU, tiny arenas).

The engine (paged KV cache, chunked prefill, continuous batching, decode
state on the device) is checked against a naive full-recompute forward in
float64 written here independently from the Llama / Mixtral tensor names.

Run: python3 -m unittest discover -s python/tests -p 'test_engine*.py'
"""

import math
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402

from cacheon_runtime import stio  # noqa: E402
from cacheon_runtime.engine import batching, runner, weights  # noqa: E402
from cacheon_runtime.wire import Failure  # noqa: E402


def tiny_arena(kind="llama", seed=1, layers=2, **engine):
    m = {"kind": kind, "vocab_size": 96, "hidden_size": 32, "num_layers": layers, "num_heads": 4,
         "num_kv_heads": 2, "head_dim": 8, "intermediate_size": 48, "rms_norm_eps": "0.00001",
         "rope_theta": 10000, "max_position": 256, "weights_seed": seed}
    if kind == "mixtral":
        m.update(num_experts=4, top_k=2)
    if kind == "msa":
        m.update(index_heads=2, index_head_dim=8, msa_block_size=4, msa_topk=2)
    e = {"page_size": 4, "max_batch": 4, "kv_pages": 96, "graph_buckets": [1, 2, 4]}
    e.update(engine)
    return {"name": "test-tiny", "device": "cpu", "dtype": "float32", "model": m, "engine": e}


def make(arena, **kw):
    req = {"arena": arena}
    req.update(kw)
    return runner.Engine(req)


def wave(n=5, new=7, seed=3, vocab=96, lens=(3, 11, 6, 17, 1, 9, 4)):
    g = torch.Generator().manual_seed(seed)
    return [{"rid": "r%d" % i, "prompt": torch.randint(0, vocab, (lens[i % len(lens)],), generator=g).tolist(),
             "max_new_tokens": new + (i % 3), "ignore_eos": True} for i in range(n)]


# ---------------------------------------------------------------------------
# The naive reference: full recompute, float64, HF tensor names.


def _rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def naive_logits(cfg, sd, tokens):
    """Logits (T, V) float64 of every position of tokens."""
    sd = {k: v.double() for k, v in sd.items()}
    t = len(tokens)
    hq, hkv, d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    x = sd["model.embed_tokens.weight"][torch.tensor(tokens)]
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :], torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]

    def rope(v):
        rot = torch.cat([-v[..., d // 2:], v[..., :d // 2]], -1)
        return v * cos + rot * sin

    eps = cfg.rms_norm_eps
    for li in range(cfg.num_layers):
        p = "model.layers.%d." % li
        h = _rms(x, sd[p + "input_layernorm.weight"], eps)
        q = rope((h @ sd[p + "self_attn.q_proj.weight"].t()).view(t, hq, d))
        k = rope((h @ sd[p + "self_attn.k_proj.weight"].t()).view(t, hkv, d))
        v = (h @ sd[p + "self_attn.v_proj.weight"].t()).view(t, hkv, d)
        k = k.repeat_interleave(hq // hkv, dim=1)
        v = v.repeat_interleave(hq // hkv, dim=1)
        s = torch.einsum("thd,shd->hts", q, k) / math.sqrt(d)
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        if cfg.kind == "msa":
            s = s.masked_fill(~naive_msa_keys(cfg, sd, p, h), float("-inf"))
        a = torch.einsum("hts,shd->thd", s.softmax(-1), v).reshape(t, hq * d)
        x = x + a @ sd[p + "self_attn.o_proj.weight"].t()
        h = _rms(x, sd[p + "post_attention_layernorm.weight"], eps)
        if cfg.kind == "mixtral":
            q2 = p + "block_sparse_moe."
            probs = (h @ sd[q2 + "gate.weight"].t()).softmax(-1)
            tw, ti = probs.topk(cfg.top_k, -1)
            tw = tw / tw.sum(-1, keepdim=True)
            out = torch.zeros_like(x)
            for i in range(t):
                for j in range(cfg.top_k):
                    e = int(ti[i, j])
                    g = h[i] @ sd[q2 + "experts.%d.w1.weight" % e].t()
                    u = h[i] @ sd[q2 + "experts.%d.w3.weight" % e].t()
                    out[i] += tw[i, j] * ((torch.nn.functional.silu(g) * u) @ sd[q2 + "experts.%d.w2.weight" % e].t())
            x = x + out
        else:
            g = h @ sd[p + "mlp.gate_proj.weight"].t()
            u = h @ sd[p + "mlp.up_proj.weight"].t()
            x = x + (torch.nn.functional.silu(g) * u) @ sd[p + "mlp.down_proj.weight"].t()
    x = _rms(x, sd["model.norm.weight"], eps)
    head = sd.get("lm_head.weight", sd["model.embed_tokens.weight"])
    return x @ head.t()


def naive_msa_keys(cfg, sd, p, h):
    """(T, T) bool: the keys each position reads in an msa layer: its own
    block and the best others by block score (the max over the block's
    visible keys of the summed index heads' dot product), msa_topk blocks in
    all, and within them the keys at or before the position."""
    t, bs, d = h.shape[0], cfg.msa_block_size, cfg.index_head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :], torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]

    def rope(v):
        return v * cos + torch.cat([-v[..., d // 2:], v[..., :d // 2]], -1) * sin

    qs = rope((h @ sd[p + "self_attn.indexer.wq.weight"].t()).view(t, cfg.index_heads, d)).sum(1)
    ik = rope((h @ sd[p + "self_attn.indexer.wk.weight"].t()).view(t, 1, d))[:, 0]
    sc = qs @ ik.t()
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    allowed = torch.zeros(t, t, dtype=torch.bool)
    for i in range(t):
        nb = i // bs + 1
        best = [max(float(sc[i, j]) for j in range(b * bs, min((b + 1) * bs, i + 1))) for b in range(nb)]
        best[i // bs] = float("inf")
        keep = sorted(range(nb), key=lambda b: -best[b])[:cfg.msa_topk]
        for b in keep:
            allowed[i, b * bs:min((b + 1) * bs, i + 1)] = True
    return allowed & causal


def check_against_naive(test, eng, reqs, results, tol=2e-4):
    sd = weights.hf_state_dict(eng.mcfg, eng.w)
    for q, r in zip(reqs, results):
        seq = q["prompt"] + r["tokens"]
        ref = naive_logits(eng.mcfg, sd, seq).log_softmax(-1)
        test.assertEqual(len(r["tokens"]), q["max_new_tokens"])
        for i, (tok, lp) in enumerate(zip(r["tokens"], r["logprobs"])):
            row = ref[len(q["prompt"]) - 1 + i]
            top2 = row.topk(2).values
            if float(top2[0] - top2[1]) > 1e-3:  # not a near-tie: greedy must agree
                test.assertEqual(tok, int(row.argmax()), "%s token %d" % (q["rid"], i))
            test.assertAlmostEqual(lp, float(row[tok]), delta=tol, msg="%s logprob %d" % (q["rid"], i))


class Config(unittest.TestCase):
    def test_go_arena_json(self):
        # The shape internal/arena.RuntimeConfig sends (decimals as strings).
        arena = {"name": "cpu-tiny", "device": "cpu", "dtype": "float32",
                 "model": {"kind": "llama", "vocab_size": 512, "hidden_size": 128, "num_layers": 2,
                           "num_heads": 4, "num_kv_heads": 2, "head_dim": 32, "intermediate_size": 256,
                           "rms_norm_eps": "0.00001", "rope_theta": 10000, "max_position": 256,
                           "num_experts": 0, "top_k": 0, "weights_seed": 1, "checkpoint": ""},
                 "engine": {"page_size": 16, "max_batch": 8, "kv_pages": 64, "graph_buckets": [1, 2, 4, 8],
                            "graphs": False}}
        e = make(arena)
        self.assertEqual(e.load_reply(), {"params": e.w.params(), "layers": 2, "device": "cpu",
                                          "dtype": "float32", "kv_pages": 64, "graph_buckets": [],
                                          "prefill_graph_tokens": [], "rank": 0, "world_size": 1})
        self.assertAlmostEqual(e.mcfg.rms_norm_eps, 1e-5)
        self.assertEqual(e.mcfg.name, "cpu-tiny")

    def test_bad_arenas(self):
        for mutate in (lambda a: a["model"].update(kind="gpt"), lambda a: a["model"].update(num_kv_heads=3),
                       lambda a: a["model"].pop("vocab_size"), lambda a: a.update(dtype="int8"),
                       lambda a: a["model"].update(rms_norm_eps="x")):
            a = tiny_arena()
            mutate(a)
            with self.assertRaises(Failure):
                make(a)


class Serving(unittest.TestCase):
    def test_paged_continuous_batching_matches_naive(self):
        # Pages of 4 tokens, prefill chunks of 5 (several chunks per prompt,
        # several requests per forward), 7 requests through 3 batch rows with
        # staggered arrivals.
        for kind in ("llama", "mixtral", "msa"):
            eng = make(tiny_arena(kind, max_batch=3, prefill_chunk=5))
            reqs = wave(7)
            out = eng.generate({"requests": reqs, "arrivals": [0, 0, 1, 2, 2, 5, 9]})
            self.assertGreater(out["steps"]["decode"], 0)
            check_against_naive(self, eng, reqs, out["results"])
            self.assertEqual(len(eng.pool.free), eng.pool.total, "pages leaked")

    def test_equal_prompts_batched_prefill_matches_naive(self):
        # Equal fresh prompts packed into one forward take the batched stock
        # attention path; the result must still be the naive model's.
        for kind in ("llama", "mixtral"):
            eng = make(tiny_arena(kind, max_batch=4, prefill_chunk=64))
            reqs = wave(4, lens=(6,))
            out = eng.generate({"requests": reqs})
            check_against_naive(self, eng, reqs, out["results"])
            self.assertEqual(eng.d.counts["attention.sdpa"]["stock"] % 4, 0)

    def test_same_seed_same_tokens(self):
        reqs = wave(4)
        a = make(tiny_arena(seed=5)).generate({"requests": reqs})
        b = make(tiny_arena(seed=5)).generate({"requests": reqs})
        c = make(tiny_arena(seed=6)).generate({"requests": reqs})
        self.assertEqual(a, b)
        self.assertNotEqual([r["tokens"] for r in a["results"]], [r["tokens"] for r in c["results"]])

    def test_batch_independence(self):
        for kind in ("llama", "mixtral", "msa"):
            eng = make(tiny_arena(kind))
            reqs = wave(6)
            together = eng.generate({"requests": reqs, "arrivals": [0, 1, 1, 3, 4, 4]})["results"]
            for i in (0, 3, 5):
                alone = eng.generate({"requests": [reqs[i]]})["results"][0]
                self.assertEqual(alone["tokens"], together[i]["tokens"], "%s %s" % (kind, reqs[i]["rid"]))
                for x, y in zip(alone["logprobs"], together[i]["logprobs"]):
                    self.assertAlmostEqual(x, y, delta=1e-4)

    def test_eos_stops_unless_ignored(self):
        eng = make(tiny_arena())
        req = wave(1, new=12)[0]
        free = eng.generate({"requests": [req]})["results"][0]["tokens"]
        eos = free[3]
        eng.mcfg.eos_token_id = eos
        stop = dict(req, ignore_eos=False)
        got = eng.generate({"requests": [stop, req]})["results"]
        first = free.index(eos)
        self.assertEqual(got[0]["tokens"], free[:first + 1])
        self.assertEqual(got[1]["tokens"], free)

    def test_score_matches_generate_and_naive(self):
        for kind in ("mixtral", "msa"):
            eng = make(tiny_arena(kind, prefill_chunk=6))
            reqs = wave(2)
            res = eng.generate({"requests": reqs})["results"]
            seqs = [q["prompt"] + r["tokens"] for q, r in zip(reqs, res)]
            froms = [len(q["prompt"]) for q in reqs]
            nll = eng.score({"sequences": seqs, "from": froms})["nll"]
            sd = weights.hf_state_dict(eng.mcfg, eng.w)
            for s, k, got, r in zip(seqs, froms, nll, res):
                self.assertEqual(len(got), len(s) - k)
                ref = naive_logits(eng.mcfg, sd, s).log_softmax(-1)
                for j, v in enumerate(got):
                    self.assertAlmostEqual(v, -float(ref[k - 1 + j, s[k + j]]), delta=2e-4, msg=kind)
                    self.assertAlmostEqual(v, -r["logprobs"][j], delta=2e-4, msg=kind)
            self.assertEqual(eng.score({"sequences": [seqs[0]]})["nll"][0].__len__(), len(seqs[0]) - 1)

    def test_deep_model_stays_finite(self):
        eng = make(tiny_arena(layers=24, kv_pages=64))
        from cacheon_runtime.engine.model import PrefillBatch
        prompt = list(range(40))
        pages = eng.pool.alloc(10)
        slots = torch.tensor([pages[p // 4] * 4 + p % 4 for p in range(40)])
        x = eng.model.prefill(PrefillBatch(torch.tensor(prompt), torch.arange(40), slots, [(0, 40, 0, None)]))
        rms = float(x.pow(2).mean().sqrt())
        self.assertTrue(torch.isfinite(x).all())
        self.assertLess(rms, 20.0)
        self.assertGreater(rms, 0.1)
        eng.pool.release(pages)
        out = eng.generate({"requests": wave(2, new=4)})["results"]
        self.assertTrue(all(math.isfinite(v) and v <= 0 for r in out for v in r["logprobs"]))

    def test_bad_requests(self):
        eng = make(tiny_arena())
        for req in ({"requests": [{"rid": "a", "prompt": [], "max_new_tokens": 3}]},
                    {"requests": [{"rid": "a", "prompt": [1000], "max_new_tokens": 3}]},
                    {"requests": [{"rid": "a", "prompt": [1], "max_new_tokens": 300}]},
                    {"requests": [{"rid": "a", "prompt": [1], "max_new_tokens": 3}], "arrivals": [0, 1]},
                    {"requests": [{"rid": "a", "prompt": [-1], "max_new_tokens": 3}]}):
            with self.assertRaises(Failure):
                eng.generate(req)
        self.assertEqual(len(eng.pool.free), eng.pool.total)

    def test_queueing_when_pages_run_out(self):
        # 12 usable pages, each request needs 5 (prompt 11 + 8 new = 19 tokens): at most two at a time.
        eng = make(tiny_arena(kv_pages=13))
        reqs = [dict(r, prompt=(r["prompt"] * 11)[:11], max_new_tokens=8) for r in wave(4)]
        out = eng.generate({"requests": reqs})["results"]
        check_against_naive(self, eng, reqs, out)


class Packing(unittest.TestCase):
    def test_forward_packer_matches_per_position_lists(self):
        # ids, positions and flat cache slots of packed prefill segments,
        # fresh and resumed chunks, against the same built one position at
        # a time
        g = torch.Generator().manual_seed(3)
        ps = 4
        for n in (1, 3, 9):
            seqs = []
            for _ in range(n):
                length = int(torch.randint(1, 40, (1,), generator=g))
                pages = torch.randperm(100, generator=g)[:-(-length // ps) + 2].tolist()
                seqs.append((torch.randint(0, 500, (length,), generator=g).tolist(), pages))
            packer = batching.ForwardPacker(seqs, ps)
            segs, off = [], 0
            for j, (toks, _p) in enumerate(seqs):
                s0 = int(torch.randint(0, len(toks), (1,), generator=g))
                t = len(toks) - s0
                segs.append((j, s0, t, off))
                off += t
            want = [[], [], []]
            for j, s0, t, _o in segs:
                toks, pages = seqs[j]
                for p in range(s0, s0 + t):
                    want[0].append(toks[p])
                    want[1].append(p)
                    want[2].append(pages[p // ps] * ps + p % ps)
            self.assertEqual(packer.pack(segs).tolist(), want, "%d sequences" % n)
            toks, pages = seqs[-1]
            self.assertEqual(packer.slots(n - 1, 0, len(toks)).tolist(),
                             [pages[p // ps] * ps + p % ps for p in range(len(toks))])


class ReplayByRerun:
    """CPU stand-in for a captured CUDA graph: replay runs the captured
    function again (its slot calls uncounted, as a real replay makes none)
    and copies its results into the outputs the capture returned."""

    def __init__(self, eng, fn, out):
        self.eng, self.fn, self.out = eng, fn, out

    def replay(self):
        self.eng.d.counting = False
        try:
            for dst, src in zip(self.out, self.fn()):
                dst.copy_(src)
        finally:
            self.eng.d.counting = True

    def pool(self):
        return None


def rerun_graph(eng):
    """A capture function for Engine._capture_prefill that works on CPU:
    the same warm-up, reset and counted capture as Engine._graph."""
    def graph(fn, pool, reset):
        eng.d.counting = False
        try:
            fn()
        finally:
            eng.d.counting = True
        reset()
        eng.d.begin_capture()
        try:
            out = fn()
        finally:
            log = eng.d.end_capture()
        return ReplayByRerun(eng, fn, out), log, out
    return graph


class PrefillGraphs(unittest.TestCase):
    """The single-prompt prefill graphs' padding (CUDA-only in the runtime;
    here captured by re-running on CPU): a prompt padded at its end to its
    bucket gives the tokens, logprobs, KV cache and slot counters of the
    eager prefill."""

    def test_padded_prefill_matches_eager(self):
        arena = tiny_arena(prefill_chunk=128)
        eager = make(arena)
        eng = make(arena)
        self.assertEqual(eng.pf_graphs, {})  # no graphs on CPU
        eng._capture_prefill(graph=rerun_graph(eng))
        self.assertEqual(sorted(eng.pf_graphs), [32, 64, 128])  # no bucket beyond a prefill chunk
        used = []
        replay = eng._prefill_replay
        eng._prefill_replay = lambda r, t: used.append(t) or replay(r, t)
        g = torch.Generator().manual_seed(4)
        for n in (1, 5, 31, 32, 33, 100, 128):
            req = {"requests": [{"rid": "p%d" % n, "prompt": torch.randint(1, 96, (n,), generator=g).tolist(),
                                 "max_new_tokens": 7, "ignore_eos": True}]}
            a, b = eager.generate(req)["results"][0], eng.generate(req)["results"][0]
            self.assertEqual(a["tokens"], b["tokens"], "prompt of %d" % n)
            for x, y in zip(a["logprobs"], b["logprobs"]):
                self.assertAlmostEqual(x, y, delta=1e-4)
        self.assertEqual(used, [32, 32, 32, 32, 64, 128, 128])
        self.assertEqual(eager.stats()["slots"], eng.stats()["slots"])
        # two prompts at once, and a prompt longer than every bucket, prefill eagerly
        eng.generate({"requests": wave(2)})
        eng.generate({"requests": [{"rid": "long", "prompt": [3] * 129, "max_new_tokens": 2}]})
        self.assertEqual(len(used), 7)
        self.assertEqual(len(eng.pool.free), eng.pool.total, "pages leaked")

    def test_capture_failure(self):
        # A prefill graph capture that raises: without candidates the error
        # propagates; with one, strict mode aborts and non-strict mode keeps
        # prefill eager with a receipt.
        from cacheon_runtime.engine import dispatch
        from test_engine_dispatch import Bundles

        def broken(fn, pool, reset):
            raise RuntimeError("operation not permitted when stream is capturing")

        with self.assertRaisesRegex(RuntimeError, "not permitted"):
            make(tiny_arena())._capture_prefill(graph=broken)
        b = Bundles()
        try:
            stack = b.stack("rms_good")
            with self.assertRaises(dispatch.CandidateAbort):
                make(tiny_arena(), stack=stack, strict=True)._capture_prefill(graph=broken)
            eng = make(tiny_arena(), stack=stack, strict=False)
            eng._capture_prefill(graph=broken)
            self.assertEqual(eng.pf_graphs, {})
            self.assertEqual(eng.load_reply()["prefill_graph_tokens"], [])
            rc = eng.stats()["receipts"]
            self.assertEqual([(r["slot"], r["variant"]) for r in rc], [("prefill graphs", "capture")], rc)
            self.assertIn("prefill graph capture failed with candidates: RuntimeError", rc[0]["reason"])
            out = eng.generate({"requests": [{"rid": "a", "prompt": [1, 2, 3], "max_new_tokens": 3}]})
            self.assertEqual(len(out["results"][0]["tokens"]), 3)
        finally:
            b.tmp.cleanup()


class Checkpoint(unittest.TestCase):
    def test_round_trip(self):
        for kind in ("llama", "mixtral"):
            src = make(tiny_arena(kind, seed=11))
            reqs = wave(3)
            want = src.generate({"requests": reqs})
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "model.safetensors")
                stio.save(path, {k: v.clone() for k, v in weights.hf_state_dict(src.mcfg, src.w).items()})
                dst = make(tiny_arena(kind, seed=99), checkpoint=path)
                self.assertEqual(dst.generate({"requests": reqs}), want)
                # a directory of shards loads too
                sd = {k: v.clone() for k, v in weights.hf_state_dict(src.mcfg, src.w).items()}
                names = sorted(sd)
                os.mkdir(os.path.join(d, "shards"))
                stio.save(os.path.join(d, "shards", "a.safetensors"), {k: sd[k] for k in names[::2]})
                stio.save(os.path.join(d, "shards", "b.safetensors"), {k: sd[k] for k in names[1::2]})
                self.assertEqual(make(tiny_arena(kind), checkpoint=os.path.join(d, "shards"))
                                 .generate({"requests": reqs}), want)

    def test_tied_and_bad_checkpoints(self):
        src = make(tiny_arena())
        sd = {k: v.clone() for k, v in weights.hf_state_dict(src.mcfg, src.w).items()}
        with tempfile.TemporaryDirectory() as d:
            tied = dict(sd)
            del tied["lm_head.weight"]
            p = os.path.join(d, "tied.safetensors")
            stio.save(p, tied)
            e = make(tiny_arena(), checkpoint=p)
            self.assertIs(e.w.lm_head, e.w.embed)
            for bad in ({k: v for k, v in sd.items() if "layers.1.mlp.up" not in k},
                        dict(sd, **{"model.norm.weight": torch.ones(7)})):
                p = os.path.join(d, "bad.safetensors")
                stio.save(p, bad)
                with self.assertRaises(Failure) as cm:
                    make(tiny_arena(), checkpoint=p)
                self.assertEqual(cm.exception.error["class"], "load_error")


if __name__ == "__main__":
    unittest.main()
