"""Tests of the graph audit (auditsites): sites captured beside candidate
calls and dumped after the replays that cover a drawn position.

Run: python3 -m unittest discover -s python/tests -p 'test_engine*.py'
"""

import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402

from cacheon_runtime import stio  # noqa: E402
from cacheon_runtime.engine import dispatch, enginestate  # noqa: E402
from cacheon_runtime.wire import Failure  # noqa: E402
from test_engine_dispatch import SOURCES, Bundles, check_dump  # noqa: E402
from test_engine_model import make, tiny_arena, wave  # noqa: E402

# decode_good's result, then a write into a page its first row reads.
SOURCES.setdefault("decode_scribble", SOURCES["decode_good"] + """
        _honest = attention_decode
        def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
            _honest(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out)
            k_cache[int(block_table[0, 0])].add_(1.0)
""")


class AuditSitesTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.b = Bundles()

    @classmethod
    def tearDownClass(cls):
        cls.b.tmp.cleanup()

    def test_audit_graph_sites(self):
        # A capture on the CPU (no CUDA graph: its copies run once, during
        # the capture, as they would in every replay): the drawn positions
        # a "replay" covers are dumped from the sites' copies, numbered as
        # the engine counts selected calls, and only those; an engine
        # without audit.graph keeps no site.
        with tempfile.TemporaryDirectory() as d:
            eng = make(tiny_arena("llama"), stack=self.b.stack("rms_good", "decode_good"), audit={"dir": d, "graph": True})
            dd = eng.d
            gen = torch.Generator().manual_seed(3)
            x, w = torch.randn(3, 64, generator=gen), torch.randn(64, generator=gen)
            b, hq, hkv, dim, ps, npages = 2, 4, 2, 16, 4, 6
            q = torch.randn(b, hq, dim, generator=gen)
            kc, vc = torch.randn(npages, ps, hkv, dim, generator=gen), torch.randn(npages, ps, hkv, dim, generator=gen)
            bt = torch.tensor([[4, 1], [2, 0]], dtype=torch.int32)
            sl = torch.tensor([7, 3], dtype=torch.int32)
            dd.set_mode("decode", True)
            dd.begin_capture()
            for _ in range(3):
                dd.rmsnorm(x, w, 1e-5)
            dd.decode(q, kc, vc, bt, sl, 0.25)
            log = dd.end_capture()
            self.assertEqual(sorted(log.sites["norm.rmsnorm"]), [0, 1, 2])
            self.assertEqual(sorted(log.sites["attention.decode"]), [0])
            self.assertEqual(os.listdir(d), [])
            base = dd.counts["norm.rmsnorm"]["selected"]
            dbase = dd.counts["attention.decode"]["selected"]
            dd.set_audit_calls({"norm.rmsnorm": [base + 1, base + 5], "attention.decode": [dbase + 1]})
            dd.add_log(log)  # the first replay: rmsnorm base..base+2, decode dbase
            self.assertEqual(os.listdir(d), ["norm.rmsnorm-%d.safetensors" % (base + 1)])
            dd.add_log(log)  # the second: rmsnorm base+3..base+5, decode dbase+1
            want = {"norm.rmsnorm-%d.safetensors" % (base + 1), "norm.rmsnorm-%d.safetensors" % (base + 5),
                    "attention.decode-%d.safetensors" % (dbase + 1)}
            self.assertEqual(set(os.listdir(d)), want)
            for f in want:
                t, meta = stio.load(os.path.join(d, f))
                self.assertEqual(meta["graph_mode"], "graph")
                check_dump(self, meta["slot"], t, meta)
            self.assertEqual(dd.counts["norm.rmsnorm"]["selected"], base + 6)
            self.assertEqual(dd.counts["norm.rmsnorm"]["audited"], 2)
            plain = make(tiny_arena("llama"), stack=self.b.stack("rms_good"), audit={"dir": d})
            plain.d.set_mode("decode", True)
            plain.d.begin_capture()
            plain.d.rmsnorm(x, w, 1e-5)
            self.assertEqual(plain.d.end_capture().sites, {})
            with self.assertRaises(Failure):
                make(tiny_arena("llama"), stack=self.b.stack("rms_good"), audit={"dir": d, "graph": "yes"})

    def test_audit_graph_share(self):
        # The share rule (verify's served stage) reaches replayed calls:
        # every replayed call is drawn for in the order the engine counts
        # them, up to max_dumps, as eager calls are.
        gen = torch.Generator().manual_seed(5)
        x, w = torch.randn(3, 64, generator=gen), torch.randn(64, generator=gen)
        for share, max_dumps, want in (("1", 64, 6), ("1", 4, 4), ("0", 64, 0)):
            with tempfile.TemporaryDirectory() as d:
                eng = make(tiny_arena("llama"), stack=self.b.stack("rms_good"),
                           audit={"dir": d, "graph": True, "share": share, "max_dumps": max_dumps})
                dd = eng.d
                dd.set_mode("decode", True)
                dd.begin_capture()
                for _ in range(3):
                    dd.rmsnorm(x, w, 1e-5)
                log = dd.end_capture()
                base = dd.counts["norm.rmsnorm"]["selected"]
                dd.add_log(log)
                dd.add_log(log)
                names = sorted(os.listdir(d))
                self.assertEqual(len(names), want, (share, max_dumps, names))
                self.assertEqual(dd.counts["norm.rmsnorm"]["audited"], want)
                self.assertEqual(names, sorted("norm.rmsnorm-%d.safetensors" % (base + i) for i in range(want)))
                for f in names:
                    t, meta = stio.load(os.path.join(d, f))
                    self.assertEqual(meta["graph_mode"], "graph")
                    check_dump(self, meta["slot"], t, meta)

    def test_same_work_before_every_call(self):
        # An auditing engine copies a counted eager call's inputs and the
        # engine state before every such call, dumped or not, so the work
        # before a call tells no kernel whether it is dumped; the dumps
        # read their inputs before the call from those copies.
        with tempfile.TemporaryDirectory() as d:
            eng = make(tiny_arena("llama"), stack=self.b.stack("rms_good", "decode_good"),
                       audit={"dir": d, "share": "0.3", "seed": 5})
            takes, real = [], eng.d.state_copies.take
            eng.d.state_copies.take = lambda state: (takes.append(1), real(state))[1]
            eng.generate({"requests": wave()})
            counted = sum(eng.d.counts[s]["selected"] for s in ("norm.rmsnorm", "attention.decode"))
            audited = sum(eng.d.counts[s]["audited"] for s in ("norm.rmsnorm", "attention.decode"))
            self.assertTrue(0 < audited < counted, (audited, counted))
            self.assertEqual(len(takes), counted)
            names = sorted(os.listdir(d))
            self.assertEqual(len(names), audited)
            for f in names:
                t, meta = stio.load(os.path.join(d, f))
                check_dump(self, meta["slot"], t, meta)

    def test_step_slots(self):
        # The slots a decode step writes itself (runner._step_slots: each
        # row's new keys, values and index keys, the scratch page) are all
        # it changes of the caches: a replay's comparison exempts them and
        # nothing else.
        for kind in ("llama", "msa", "mixtral"):
            eng = make(tiny_arena(kind))
            real, seen = eng.model.decode_step, []

            def step(st, bsz, eng=eng, real=real, seen=seen):
                before = enginestate.snapshot(eng.d.engine_state)
                slots = eng._step_slots(bsz)
                exempt = [t.clone() for t in before]
                real(st, bsz)
                seen.append((enginestate.changed(exempt, eng.d.engine_state, slots),
                             enginestate.changed(before, eng.d.engine_state)))
            eng.model.decode_step = step
            eng.generate({"requests": wave()})
            self.assertTrue(seen, kind)
            for exempt, whole in seen:
                self.assertEqual(exempt, "", kind)
                self.assertIn("the call changed layer 0's K cache", whole)

    def test_replay_state_compared(self):
        # A replay with a dumped call is compared with the engine state
        # before it: a write outside the step's own slots aborts the
        # engine (no fallback inside a replay), naming the replayed calls.
        with tempfile.TemporaryDirectory() as d:
            eng = make(tiny_arena("llama"), stack=self.b.stack("rms_good"), audit={"dir": d, "graph": True})
            dd = eng.d
            gen = torch.Generator().manual_seed(6)
            x, w = torch.randn(3, 64, generator=gen), torch.randn(64, generator=gen)
            kc = eng.kc[1]
            dd.set_mode("decode", True)
            dd.begin_capture()
            dd.rmsnorm(x, w, 1e-5)
            log = dd.end_capture()
            ps = eng.ecfg.page_size
            for written, fails in ((None, False), (torch.arange(3 * ps, 4 * ps), False), (torch.arange(ps), True)):
                base = dd.counts["norm.rmsnorm"]["selected"]
                dd.set_audit_calls({"norm.rmsnorm": [base]})
                planned = dd.replay_plan(log)
                self.assertEqual([p for _s, p in planned], [base])
                before = enginestate.snapshot(dd.engine_state)
                if written is not None:
                    kc[3].add_(1.0)  # "during the replay"
                if fails:
                    with self.assertRaises(dispatch.CandidateAbort) as cm:
                        dd.add_log(log, planned, before, written)
                    self.assertIn("the replayed calls changed layer 1's K cache", cm.exception.reason)
                else:
                    dd.add_log(log, planned, before, written)

    def test_audit_graph_cache_write(self):
        # A write into a decode cache during a captured call: the dump's
        # pages before the call come from the cache's shadow, after it from
        # the cache, so Go's input check sees the write (a copy per site
        # would be too large; reading the cache live twice saw nothing).
        with tempfile.TemporaryDirectory() as d:
            eng = make(tiny_arena("llama"), stack=self.b.stack("decode_scribble"), audit={"dir": d, "graph": True})
            dd = eng.d
            gen = torch.Generator().manual_seed(4)
            b, hq, hkv, dim, ps, npages = 2, 4, 2, 16, 4, 6
            q = torch.randn(b, hq, dim, generator=gen)
            kc, vc = torch.randn(npages, ps, hkv, dim, generator=gen), torch.randn(npages, ps, hkv, dim, generator=gen)
            kc0 = kc.clone()
            bt = torch.tensor([[4, 1], [2, 0]], dtype=torch.int32)
            sl = torch.tensor([7, 3], dtype=torch.int32)
            dd.set_mode("decode", True)
            dd.begin_capture()
            dd.decode(q, kc, vc, bt, sl, 0.25)
            dd.decode(q, kc, vc, bt, sl, 0.25)  # the same cache again: shadows of its own
            log = dd.end_capture()
            self.assertEqual(len(dd.cache_shadows), 4)  # k and v, twice
            self.assertFalse(torch.equal(kc, kc0))
            base = dd.counts["attention.decode"]["selected"]
            dd.set_audit_calls({"attention.decode": [base, base + 1]})
            dd.add_log(log)
            dumps = [stio.load(os.path.join(d, "attention.decode-%d.safetensors" % (base + i)))[0] for i in (0, 1)]
            for i, t in enumerate(dumps):
                self.assertTrue(torch.equal(t["v_cache"], t["in.v_cache"]))
                # the cache's page 4 is the dump's page 2 (the used pages 1, 2, 4 in order)
                diff = (t["in.k_cache"].double() - t["k_cache"].double()).sum(dim=(1, 2, 3))
                self.assertEqual([int(i) for i in torch.nonzero(diff).flatten()], [2])
                # each call's before is its own (kc0, then kc0 + 1); after
                # is the cache at the replay's end (kc0 + 2)
                self.assertAlmostEqual(float(diff[2]) / (ps * hkv * dim), 2 - i, places=5)
            self.assertTrue(torch.equal(dumps[0]["k_cache"][2], kc0[4]))


# A decode whose every step is capturable (no host reads of the tables),
# honest; with a write into a page its first row reads after it.
_GRAPH_DECODE = """
        import torch
        def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
            b, hq, d = q.shape
            hkv = k_cache.shape[2]
            bt = block_table.long()
            k = k_cache[bt].reshape(b, -1, hkv, d).repeat_interleave(hq // hkv, dim=2).float()
            v = v_cache[bt].reshape(b, -1, hkv, d).repeat_interleave(hq // hkv, dim=2).float()
            s = torch.einsum("bhd,bshd->bhs", q.float(), k) * sm_scale
            pos = torch.arange(k.shape[1], device=q.device)
            s = s.masked_fill(pos[None, None, :] >= seq_lens.long()[:, None, None], float("-inf"))
            out.copy_(torch.einsum("bhs,bshd->bhd", s.softmax(-1), v))
"""
SOURCES.setdefault("decode_graphok", _GRAPH_DECODE)
SOURCES.setdefault("decode_graphscribble", _GRAPH_DECODE + """
            k_cache.index_add_(0, bt[:1, 0], torch.ones_like(k_cache[:1]))
""")


@unittest.skipUnless(torch.cuda.is_available(), "needs CUDA")
class AuditSitesCUDATests(unittest.TestCase):
    """The graph audit over real CUDA graph replays."""

    @classmethod
    def setUpClass(cls):
        cls.b = Bundles()

    @classmethod
    def tearDownClass(cls):
        cls.b.tmp.cleanup()

    def _dumps(self, name):
        from test_engine_model import wave
        arena = tiny_arena("llama")
        arena["device"] = "cuda"
        with tempfile.TemporaryDirectory() as d:
            eng = make(arena, stack=self.b.stack(name), audit={"dir": d, "graph": True})
            self.assertTrue(eng.graphs)
            eng.generate({"requests": wave()})  # warm-up
            base = eng.d.counts["attention.decode"]["selected"]
            eng.d.set_audit_calls({"attention.decode": list(range(base, base + 64, 3))})
            eng.generate({"requests": wave(seed=4)})
            out = []
            for f in sorted(os.listdir(d)):
                t, meta = stio.load(os.path.join(d, f))
                out.append((t, meta))
            return out

    def test_replayed_cache_write_seen(self):
        honest = self._dumps("decode_graphok")
        self.assertTrue(any(m["graph_mode"] == "graph" for _t, m in honest))
        for t, meta in honest:
            check_dump(self, meta["slot"], t, meta)
        # The write into a page the call reads is outside the step's own
        # slots: the replay's comparison with the state before it aborts.
        with self.assertRaises(dispatch.CandidateAbort) as cm:
            self._dumps("decode_graphscribble")
        self.assertIn("the replayed calls changed layer", cm.exception.reason)


if __name__ == "__main__":
    unittest.main()
