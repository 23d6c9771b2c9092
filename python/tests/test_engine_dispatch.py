"""Tests of the arena runtime's dispatch layer (CPU, tiny arenas): seams,
candidate bundles (good, broken, raising, identity-violating), eligibility,
strict and non-strict failure, receipts, audit dumps.

Run: python3 -m unittest discover -s python/tests -p 'test_engine*.py'
"""

import math
import os
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402

from cacheon_runtime import guard, stio  # noqa: E402
from cacheon_runtime.engine import dispatch, kernels, stock  # noqa: E402
from cacheon_runtime.wire import Failure  # noqa: E402
from test_engine_model import make, tiny_arena, wave  # noqa: E402

SEAMS = {"llama": ("activation.silu_and_mul", "attention.decode", "attention.sdpa", "norm.rmsnorm"),
         "mixtral": ("moe.fused_experts", "attention.decode", "attention.sdpa", "norm.rmsnorm")}

SOURCES = {
    "rms_good": """
        import torch
        def rmsnorm(x, weight, out, eps):
            xf = x.float()
            out.copy_(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float())
    """,
    "rms_keeps": """
        import torch
        KEPT = []
        def rmsnorm(x, weight, out, eps):
            xf = x.float()
            out.copy_(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float())
            for w in KEPT:          # every weight it was handed before
                w.mul_(1.5)
            KEPT.append(weight)
    """,
    "rms_epsids": """
        import torch
        SEEN = []
        def rmsnorm(x, weight, out, eps):
            xf = x.float()
            out.copy_(xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float())
            SEEN.append(eps)
    """,
    "rms_broken": """
        import torch
        def rmsnorm(x, weight, out, eps):
            out.copy_(x * weight * 2.0)   # forgot to normalize
    """,
    "silu_raises": """
        def silu_and_mul(x, out):
            raise RuntimeError("boom from the candidate")
    """,
    "silu_rebinds": """
        import torch
        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            out.set_(torch.empty_like(out))    # swaps the storage the validator owns
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
    """,
    "silu_good": """
        import torch
        def silu_and_mul(x, out):
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d].float()) * x[:, d:].float())
    """,
    "silu_prints": """
        import torch
        print("hello from the candidate at import")
        def silu_and_mul(x, out):
            print('{"id":"forged","ok":true}')
            d = x.shape[-1] // 2
            out.copy_(torch.nn.functional.silu(x[:, :d]) * x[:, d:])
    """,
    "decode_good": """
        import torch
        def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
            ps = k_cache.shape[1]
            g = q.shape[1] // k_cache.shape[2]
            for b in range(q.shape[0]):
                n = int(seq_lens[b])
                pages = block_table[b, :(n + ps - 1) // ps].long()
                k = k_cache[pages].reshape(-1, k_cache.shape[2], k_cache.shape[3])[:n]
                v = v_cache[pages].reshape(-1, v_cache.shape[2], v_cache.shape[3])[:n]
                k = k.repeat_interleave(g, dim=1)
                v = v.repeat_interleave(g, dim=1)
                s = torch.einsum("hd,shd->hs", q[b].float(), k.float()) * sm_scale
                out[b] = torch.einsum("hs,shd->hd", s.softmax(-1), v.float())
    """,
    "sdpa_good": """
        import torch
        def attention(q, k, v, out, sm_scale, causal):
            t, s = q.shape[0], k.shape[0]
            g = q.shape[1] // k.shape[1]
            k = k.repeat_interleave(g, dim=1).float()
            v = v.repeat_interleave(g, dim=1).float()
            sc = torch.einsum("thd,shd->hts", q.float(), k) * sm_scale
            if causal:
                sc = sc.masked_fill(~torch.ones(t, s, dtype=torch.bool).tril(s - t), float("-inf"))
            out.copy_(torch.einsum("hts,shd->thd", sc.softmax(-1), v))
    """,
    "moe_good": """
        import torch
        def prepare(w13, w2):
            return {"w13": w13, "w2": w2}
        def fused_experts(x, topk_ids, topk_weights, prepared, out):
            w13, w2 = prepared["w13"], prepared["w2"]
            i = w13.shape[1] // 2
            acc = torch.zeros(out.shape, dtype=torch.float32)
            for t in range(x.shape[0]):
                for j in range(topk_ids.shape[1]):
                    e = int(topk_ids[t, j])
                    gu = w13[e].float() @ x[t].float()
                    a = torch.nn.functional.silu(gu[:i]) * gu[i:]
                    acc[t] += float(topk_weights[t, j]) * (w2[e].float() @ a)
            out.copy_(acc)
    """,
    "silu_importfails": """
        import cacheon_no_such_module_xyz
        def silu_and_mul(x, out):
            pass
    """,
    "moe_prepare_raises": """
        def prepare(w13, w2):
            raise ValueError("cannot repack")
        def fused_experts(x, topk_ids, topk_weights, prepared, out):
            pass
    """,
}

ENTRY = {"rms": ("norm.rmsnorm", "rmsnorm", ""), "silu": ("activation.silu_and_mul", "silu_and_mul", ""),
         "decode": ("attention.decode", "attention_decode", ""), "sdpa": ("attention.sdpa", "attention", ""),
         "moe": ("moe.fused_experts", "fused_experts", "prepare")}


class Bundles:
    """Writes each candidate source into its own bundle directory."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory()

    def row(self, name, domain=None, variant="default"):
        d = os.path.join(self.tmp.name, name)
        if not os.path.isdir(d):
            os.makedirs(os.path.join(d, "kern"))
            with open(os.path.join(d, "kern", "__init__.py"), "w") as f:
                f.write("")
            with open(os.path.join(d, "kern", name + ".py"), "w") as f:
                f.write(textwrap.dedent(SOURCES[name]))
        slot, entry, prep = ENTRY[name.split("_")[0]]
        return slot, {"bundle": d, "source": "kern/%s.py" % name, "entry": entry, "prepare": prep,
                      "variant": variant, "domain": domain or {"capabilities": {}}}

    def stack(self, *names, **domains):
        out = {}
        for n in names:
            slot, row = self.row(n, domains.get(n))
            out[slot] = row
        return out


def tokens(res):
    return [r["tokens"] for r in res["results"]]


class DispatchTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.b = Bundles()
        cls.reqs = wave(4, new=6)
        cls.stock = {k: make(tiny_arena(k)).generate({"requests": cls.reqs}) for k in ("llama", "mixtral")}

    @classmethod
    def tearDownClass(cls):
        cls.b.tmp.cleanup()

    def engine(self, kind, stack, **kw):
        return make(tiny_arena(kind), stack=stack, **kw)

    def test_every_seam_fires(self):
        for kind, seams in SEAMS.items():
            eng = make(tiny_arena(kind))
            eng.generate({"requests": self.reqs})
            st = eng.stats()
            for s in seams:
                self.assertGreater(st["slots"][s]["stock"], 0, "%s %s" % (kind, s))
                self.assertEqual(st["slots"][s]["selected"], 0)
            self.assertEqual(sorted(st["slots"]), sorted(dispatch.SLOTS))

    def test_good_candidates_keep_tokens(self):
        for kind, names in (("llama", ("rms_good", "decode_good", "sdpa_good")),
                            ("mixtral", ("moe_good", "rms_good"))):
            eng = self.engine(kind, self.b.stack(*names))
            got = eng.generate({"requests": self.reqs})
            self.assertEqual(tokens(got), tokens(self.stock[kind]), kind)
            for r, s in zip(got["results"], self.stock[kind]["results"]):
                for x, y in zip(r["logprobs"], s["logprobs"]):
                    self.assertAlmostEqual(x, y, delta=1e-4)
            st = eng.stats()
            for n in names:
                c = st["slots"][ENTRY[n.split("_")[0]][0]]
                self.assertGreater(c["selected"], 0, n)
                self.assertEqual(c["selected"], c["completed"], n)
                self.assertEqual(c["fallback"], 0)
                self.assertEqual(c["stock"], 0)

    def test_kept_weights_are_copies(self):
        # A kernel that keeps every norm weight it is handed and scales the
        # old ones in later calls (verify refuses the keeping; served, it
        # would rescale other layers' live weights) only scales its own
        # copies: the tokens stay stock's.
        eng = self.engine("llama", self.b.stack("rms_keeps"))
        got = eng.generate({"requests": self.reqs})
        self.assertEqual(tokens(got), tokens(self.stock["llama"]))
        self.assertGreater(eng.stats()["slots"]["norm.rmsnorm"]["selected"], 2)

    def test_scalars_one_object_per_value(self):
        # Every call is handed one object for its eps, as the verify worker
        # hands one per value and slot (argplan.Scalars): the model's own
        # float, passed to every call before, told serving from verify.
        eng = self.engine("llama", self.b.stack("rms_epsids"))
        eng.generate({"requests": self.reqs})
        var = eng.d.variants["norm.rmsnorm"][0]
        seen = var.entry.__globals__["SEEN"]
        self.assertGreater(len(seen), 2)
        self.assertTrue(all(e is seen[0] for e in seen))
        self.assertIs(eng.d.scalars.get("norm.rmsnorm", float(seen[0])), seen[0])

    def test_kept_copies_are_placed(self):
        # The per-call copies are placed as verify's inputs are: at even
        # odds an allocation of their own or a view at a random
        # 16-byte-aligned offset in a larger one, so that neither kind
        # tells serving from verify.
        eng = self.engine("llama", self.b.stack("rms_good"))
        w = torch.randn(64, dtype=torch.float32)
        exact = offsets = 0
        for _ in range(200):
            c = eng.d._own_copy(w)
            self.assertTrue(torch.equal(c, w))
            self.assertEqual(c.storage_offset() * c.element_size() % 16, 0)
            offsets += c.storage_offset() > 0
            nbytes = c.untyped_storage().nbytes() if hasattr(c, "untyped_storage") else c.storage().nbytes()
            exact += c.storage_offset() == 0 and nbytes == c.numel() * c.element_size()
        self.assertGreater(exact, 50)
        self.assertGreater(offsets, 50)

    def test_broken_candidate_changes_tokens(self):
        eng = self.engine("llama", self.b.stack("rms_broken"))
        got = eng.generate({"requests": self.reqs})
        self.assertNotEqual(tokens(got), tokens(self.stock["llama"]))
        self.assertGreater(eng.stats()["slots"]["norm.rmsnorm"]["completed"], 0)

    def test_raising_candidate_strict_aborts(self):
        eng = self.engine("llama", self.b.stack("silu_raises"), strict=True)
        with self.assertRaises(dispatch.CandidateAbort) as cm:
            eng.generate({"requests": self.reqs})
        self.assertIn("boom from the candidate", str(cm.exception))
        self.assertIn("activation.silu_and_mul", str(cm.exception))

    def test_raising_candidate_non_strict_falls_back(self):
        eng = self.engine("llama", self.b.stack("silu_raises"), strict=False)
        got = eng.generate({"requests": self.reqs})
        self.assertEqual(tokens(got), tokens(self.stock["llama"]))
        st = eng.stats()
        c = st["slots"]["activation.silu_and_mul"]
        self.assertGreater(c["fallback"], 0)
        self.assertEqual(c["fallback"], c["selected"])
        self.assertEqual(c["completed"], 0)
        self.assertEqual(len(st["receipts"]), 1)
        rc = st["receipts"][0]
        self.assertEqual((rc["slot"], rc["variant"], rc["count"]), ("activation.silu_and_mul", "default",
                                                                     c["fallback"]))
        self.assertIn("RuntimeError: boom", rc["reason"])

    def test_load_failure(self):
        # strict: the engine does not start; non-strict: the slot stays on
        # stock with a receipt, and tokens are stock's
        with self.assertRaises(Failure) as cm:
            self.engine("llama", self.b.stack("silu_importfails"), strict=True)
        self.assertEqual(cm.exception.error["class"], "import_error")
        eng = self.engine("llama", self.b.stack("silu_importfails"), strict=False)
        self.assertEqual(tokens(eng.generate({"requests": self.reqs})), tokens(self.stock["llama"]))
        st = eng.stats()
        self.assertEqual(st["slots"]["activation.silu_and_mul"]["selected"], 0)
        self.assertEqual(len(st["receipts"]), 1, st["receipts"])
        rc = st["receipts"][0]
        self.assertEqual((rc["slot"], rc["variant"], rc["count"]), ("activation.silu_and_mul", "default", 1))
        self.assertIn("load failed: import_error", rc["reason"])
        self.assertIn("cacheon_no_such_module_xyz", rc["reason"])
        # a missing entry is a load failure too; a malformed row is not
        _s, row = self.b.row("silu_good")
        eng = self.engine("llama", {"activation.silu_and_mul": dict(row, entry="nope")}, strict=False)
        self.assertIn("missing_entry", eng.stats()["receipts"][0]["reason"])
        with self.assertRaises(Failure):
            self.engine("llama", {"activation.silu_and_mul": dict(row, domain={"capabilities": {"colour": {}}})},
                        strict=False)

    def test_identity_violation(self):
        eng = self.engine("llama", self.b.stack("silu_rebinds"), strict=False)
        got = eng.generate({"requests": self.reqs})
        self.assertEqual(tokens(got), tokens(self.stock["llama"]))
        st = eng.stats()
        self.assertGreater(st["slots"]["activation.silu_and_mul"]["fallback"], 0)
        self.assertIn("identity changed", st["receipts"][0]["reason"])
        strict = self.engine("llama", self.b.stack("silu_rebinds"), strict=True)
        with self.assertRaises(dispatch.CandidateAbort):
            strict.generate({"requests": self.reqs})

    def test_eligibility_before_selection(self):
        # Only one-row calls (batch-1 decode and final norms of one row) are in
        # the domain; the rest is stock, counted ineligible, never selected.
        dom = {"capabilities": {"num_tokens": {"max": 1}, "dtype": {"one_of": ["float32"]},
                                "phase": {"one_of": ["decode"]}}}
        eng = self.engine("llama", self.b.stack("rms_good", rms_good=dom))
        eng.generate({"requests": self.reqs[:1]})
        c = eng.stats()["slots"]["norm.rmsnorm"]
        self.assertGreater(c["selected"], 0)
        self.assertGreater(c["ineligible"], 0)
        self.assertEqual(c["stock"], 0)
        # out of every domain: never selected, tokens are stock
        dom = {"capabilities": {"dtype": {"one_of": ["bfloat16"]}}}
        eng = self.engine("llama", self.b.stack("rms_broken", rms_broken=dom))
        got = eng.generate({"requests": self.reqs})
        self.assertEqual(tokens(got), tokens(self.stock["llama"]))
        c = eng.stats()["slots"]["norm.rmsnorm"]
        self.assertEqual(c["selected"], 0)
        self.assertGreater(c["ineligible"], 0)
        # a field the descriptor lacks (architecture on CPU) fails closed
        dom = {"capabilities": {"architecture": {"one_of": ["sm90"]}}}
        eng = self.engine("llama", self.b.stack("rms_broken", rms_broken=dom))
        self.assertEqual(tokens(eng.generate({"requests": self.reqs})), tokens(self.stock["llama"]))

    def test_variants_first_match(self):
        _s, broken = self.b.row("rms_broken", {"capabilities": {"num_tokens": {"min": 2}}}, variant="many")
        _s, good = self.b.row("rms_good", {"capabilities": {"num_tokens": {"max": 1}}}, variant="one")
        eng = self.engine("llama", {"norm.rmsnorm": [broken, good]})
        eng.generate({"requests": self.reqs[:1]})
        self.assertEqual(eng.stats()["slots"]["norm.rmsnorm"]["ineligible"], 0)

    def test_prepare_failure(self):
        with self.assertRaises(dispatch.CandidateAbort):
            self.engine("mixtral", self.b.stack("moe_prepare_raises"), strict=True)
        eng = self.engine("mixtral", self.b.stack("moe_prepare_raises"), strict=False)
        got = eng.generate({"requests": self.reqs})
        self.assertEqual(tokens(got), tokens(self.stock["mixtral"]))
        st = eng.stats()
        self.assertGreater(st["slots"]["moe.fused_experts"]["fallback"], 0)
        self.assertTrue(any("prepare" in r["reason"] for r in st["receipts"]))

    def test_poisoned_stock_slots(self):
        # The referee's target: stock calls of a poisoned slot get fresh,
        # aligned, NaN-filled outputs (what a candidate's get) and serve the
        # same tokens; a stock function that wrote nothing would leave NaN.
        eng = self.engine("llama", {}, poison=["activation.silu_and_mul", "norm.rmsnorm"])
        got = eng.generate({"requests": self.reqs})
        self.assertEqual(tokens(got), tokens(self.stock["llama"]))
        out = eng.d._stock("norm.rmsnorm", {"out": (3, 8)}, torch.float32, lambda o: None)["out"]
        self.assertTrue(torch.isnan(out).all())
        self.assertEqual(out.data_ptr() % dispatch.ALIGNMENT, 0)
        for bad in (["no.such_slot"], "norm.rmsnorm", [1]):
            with self.assertRaises(Failure):
                self.engine("llama", {}, poison=bad)

    def test_poisoned_stock_pays_the_harness(self):
        # Every stock call of a poisoned target goes through a candidate
        # call's host work (the guard before and after it), so that the
        # referee's B and C differ in the kernel alone; unpoisoned slots
        # do not.
        eng = self.engine("llama", {}, poison=["activation.silu_and_mul"])
        quick, calls = eng.d.safety.guard.quick, []

        full, fulls = eng.d.safety.guard.full, []

        def counted(*groups):
            if groups:  # around a call (full's own quick check has none)
                calls.append(sorted(n for g in groups for n in g))
            return quick(*groups)

        def counted_full(*groups):
            fulls.append(1)
            return full(*groups)
        eng.d.safety.guard.quick, eng.d.safety.guard.full = counted, counted_full
        got = eng.generate({"requests": self.reqs})
        self.assertEqual(tokens(got), tokens(self.stock["llama"]))
        stock_calls = eng.stats()["slots"]["activation.silu_and_mul"]["stock"]
        self.assertGreater(stock_calls, 0)
        self.assertEqual(len(calls), 2 * stock_calls)
        self.assertTrue(all(c == ["out", "x"] for c in calls), calls[:3])
        # and B's request pays the full check after it, as C's does
        self.assertEqual(len(fulls), 1)
        eng.d.safety.guard.full = lambda *g: "a dispatch table changed"
        with self.assertRaisesRegex(RuntimeError, "no candidate loaded: a dispatch table changed"):
            eng.generate({"requests": self.reqs})
        eng.d.safety.guard.full = full
        # an engine that is no referee's (nothing poisoned) does not
        plain = self.engine("llama", {})
        plain.d.safety.guard.full = lambda *g: self.fail("full check without a poisoned target")
        plain.generate({"requests": self.reqs[:1]})
        # a finding there is the runtime's own fault, not a candidate's
        eng.d.safety.guard.quick = lambda *g: "a mode is active"
        with self.assertRaisesRegex(RuntimeError, "poisoned target: a mode is active"):
            eng.generate({"requests": self.reqs})
        # C: the calls no variant admits pay it too (else a candidate with a
        # narrow domain would read faster than B by the harness alone), and
        # a finding there is the candidate's, whose code is loaded
        dom = {"capabilities": {"num_tokens": {"max": 1}, "phase": {"one_of": ["decode"]}}}
        eng = self.engine("llama", self.b.stack("rms_good", rms_good=dom), poison=["norm.rmsnorm"])
        quick, calls = eng.d.safety.guard.quick, []
        # (counting the checks around calls: the full check after a
        # request, which runs where candidates are loaded, passes none)
        eng.d.safety.guard.quick = lambda *g: (g and calls.append(1)) or quick(*g)
        eng.generate({"requests": self.reqs[:1]})
        c = eng.stats()["slots"]["norm.rmsnorm"]
        self.assertGreater(c["ineligible"], 0)
        self.assertGreater(c["selected"], 0)
        self.assertEqual(len(calls), 2 * (c["ineligible"] + c["selected"]))
        eng.d.safety.guard.quick = lambda *g: "a mode is active"
        with self.assertRaises(dispatch.CandidateAbort):
            eng.generate({"requests": self.reqs})

    def test_poisoned_engine_arms_the_hook(self):
        # B is held to the audit hook as C is (armed at load), so that its
        # waves pay the hook's checks C's pay; an engine that is no
        # referee's, without candidate code, is not.
        class Hook:
            armed = 0

            def arm(self):
                self.armed += 1

            def refusals(self):
                return []
        for poison, want in ((["activation.silu_and_mul"], 1), ([], 0)):
            safety = guard.Safety(torch)
            safety.hook = Hook()
            dispatch.Dispatch(torch.device("cpu"), torch.float32, {"device": "cpu", "dtype": "float32"}, {},
                              safety=safety, poison=poison)
            self.assertEqual(safety.hook.armed, want, poison)

    def test_bad_stacks(self):
        _s, row = self.b.row("rms_good")
        for stack in ({"attention.msa_block_score": row}, {"norm.rmsnorm": dict(row, entry="nope")},
                      {"norm.rmsnorm": dict(row, source="kern/missing.py")},
                      {"norm.rmsnorm": dict(row, domain={"capabilities": {"colour": {"one_of": ["red"]}}})},
                      {"norm.rmsnorm": dict(row, domain={"capabilities": {"num_tokens": {"one_of": ["1"]}}})},
                      {"norm.rmsnorm": dict(row, prepare="prepare")}):
            with self.assertRaises(Failure):
                self.engine("llama", stack)

    def test_audit_dumps(self):
        with tempfile.TemporaryDirectory() as d:
            stack = self.b.stack("rms_good", "decode_good", "sdpa_good", "silu_good")
            eng = self.engine("llama", stack, audit={"every": 3, "share": "0.1", "seed": 5, "dir": d,
                                                     "max_dumps": 40})
            eng.generate({"requests": self.reqs})
            st = eng.stats()
            files = sorted(os.listdir(d))
            self.assertEqual(len(files), sum(c["audited"] for c in st["slots"].values()))
            self.assertLessEqual(len(files), 40)
            seen = set()
            for f in files:
                t, meta = stio.load(os.path.join(d, f))
                slot = meta["slot"]
                seen.add(slot)
                self.assertEqual(f, "%s-%s.safetensors" % (slot, meta["call"]))
                check_dump(self, slot, t, meta)
            self.assertEqual(seen, set(SEAMS["llama"]))

    def test_audit_calls(self):
        # Explicit positions: exactly those selected calls are dumped, none
        # other (no share, no every), and the numbering runs from the load.
        with tempfile.TemporaryDirectory() as d:
            stack = self.b.stack("rms_good", "silu_good")
            eng = self.engine("llama", stack, audit={"dir": d})
            eng.generate({"requests": self.reqs})
            self.assertEqual(os.listdir(d), [])
            n0 = eng.d.counts["norm.rmsnorm"]["selected"]
            self.assertEqual(eng.d.set_audit_calls({"norm.rmsnorm": [n0, n0 + 2, 10 ** 9]}), 3)
            eng.generate({"requests": self.reqs})
            want = ["norm.rmsnorm-%d.safetensors" % n for n in (n0, n0 + 2)]
            self.assertEqual(sorted(os.listdir(d)), sorted(want))
            for f in want:
                t, meta = stio.load(os.path.join(d, f))
                check_dump(self, "norm.rmsnorm", t, meta)
            self.assertEqual(eng.stats()["slots"]["norm.rmsnorm"]["audited"], 2)
            for bad in ({"no.such_slot": [1]}, {"norm.rmsnorm": [-1]}, {"norm.rmsnorm": [True]},
                        {"norm.rmsnorm": "1"}, [1], {"norm.rmsnorm": [0] * 5000}):
                with self.assertRaises(Failure):
                    eng.d.set_audit_calls(bad)
        off = self.engine("llama", self.b.stack("rms_good"))
        with self.assertRaises(Failure):
            off.d.set_audit_calls({"norm.rmsnorm": [1]})

    def test_audit_moe_dump(self):
        with tempfile.TemporaryDirectory() as d:
            eng = self.engine("mixtral", self.b.stack("moe_good"), audit={"every": 5, "dir": d})
            eng.generate({"requests": self.reqs[:2]})
            files = os.listdir(d)
            self.assertTrue(files)
            for f in files:
                t, meta = stio.load(os.path.join(d, f))
                check_dump(self, meta["slot"], t, meta)


def check_dump(test, slot, t, meta):
    """The dump holds inputs (before and after) and the output, and the
    output is the slot's function of the inputs."""
    if slot == "norm.rmsnorm":
        x, w = t["x"].double(), t["weight"].double()
        eps = float(meta["scalar.eps"])
        want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
        names = ("x", "weight")
    elif slot == "activation.silu_and_mul":
        x = t["x"].double()
        d = x.shape[1] // 2
        want = torch.nn.functional.silu(x[:, :d]) * x[:, d:]
        names = ("x",)
    elif slot == "attention.sdpa":
        q, k, v = t["q"].double(), t["k"].double(), t["v"].double()
        g = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        s = torch.einsum("thd,shd->hts", q, k) * float(meta["scalar.sm_scale"])
        tq, sk = q.shape[0], k.shape[0]
        s = s.masked_fill(~torch.ones(tq, sk, dtype=torch.bool).tril(sk - tq), float("-inf"))
        want = torch.einsum("hts,shd->thd", s.softmax(-1), v)
        names = ("q", "k", "v")
        test.assertEqual(meta["scalar.causal"], "True")
    elif slot == "attention.decode":
        q, kc, vc = t["q"].double(), t["k_cache"].double(), t["v_cache"].double()
        bt, sl = t["block_table"].long(), t["seq_lens"].long()
        test.assertEqual(meta.get("compacted"), "pages")
        test.assertTrue(bool((bt >= 0).all() and (bt < kc.shape[0]).all()))
        ps, g = kc.shape[1], q.shape[1] // kc.shape[2]
        want = torch.empty_like(q)
        for b in range(q.shape[0]):
            n = int(sl[b])
            pages = bt[b, :(n + ps - 1) // ps]
            k = kc[pages].reshape(-1, kc.shape[2], kc.shape[3])[:n].repeat_interleave(g, 1)
            v = vc[pages].reshape(-1, vc.shape[2], vc.shape[3])[:n].repeat_interleave(g, 1)
            s = torch.einsum("hd,shd->hs", q[b], k) * float(meta["scalar.sm_scale"])
            want[b] = torch.einsum("hs,shd->hd", s.softmax(-1), v)
        names = ("q", "k_cache", "v_cache", "block_table", "seq_lens")
    elif slot == "moe.fused_experts":
        x, w13, w2 = t["x"].double(), t["w13"].double(), t["w2"].double()
        ids, tw = t["topk_ids"].long(), t["topk_weights"].double()
        i = w13.shape[1] // 2
        want = torch.zeros_like(x)
        for r in range(x.shape[0]):
            for j in range(ids.shape[1]):
                gu = w13[ids[r, j]] @ x[r]
                want[r] += tw[r, j] * (w2[ids[r, j]] @ (torch.nn.functional.silu(gu[:i]) * gu[i:]))
        names = ("x", "topk_ids", "topk_weights")
        test.assertNotIn("in.w13", t)
    else:
        raise AssertionError(slot)
    for n in names:
        test.assertTrue(torch.equal(t[n], t["in." + n]), "%s: input %s changed" % (slot, n))
    err = float((t["out"].double() - want).abs().max())
    test.assertLess(err, 1e-4, "%s call %s: dump output differs from the slot function by %g"
                    % (slot, meta["call"], err))
    test.assertFalse(math.isnan(err))


class DomainTests(unittest.TestCase):
    def test_match(self):
        d = dispatch.Domain.parse({"capabilities": {"num_tokens": {"min": 2, "max": 8},
                                                    "dtype": {"one_of": ["bfloat16", "float32"]},
                                                    "head_dim": {"one_of": [64, 128]}},
                                   "graph_safe": True})
        self.assertTrue(d.match({"num_tokens": 4, "dtype": "float32", "head_dim": 64})[0])
        ok, why = d.match({"num_tokens": 9, "dtype": "float16"})
        self.assertFalse(ok)
        self.assertIn("num_tokens", why)
        self.assertIn("head_dim: descriptor lacks the field", why)
        self.assertTrue(dispatch.Domain.parse(None).match({})[0])
        self.assertTrue(dispatch.Domain.parse({"capabilities": {}}).match({"x": 1})[0])
        self.assertIs(d.graph_safe, True)

    def test_parse_errors(self):
        for bad in ([], {"capabilities": {"num_tokens": {"one_of": [1], "min": 1}}},
                    {"capabilities": {"dtype": {"min": 1}}}, {"caps": {}},
                    {"capabilities": {"num_tokens": {"one_of": [True]}}}, {"graph_safe": "yes"}):
            with self.assertRaises(Failure):
                dispatch.Domain.parse(bad)


if __name__ == "__main__":
    unittest.main()
