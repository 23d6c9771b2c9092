"""Tests of the msa model kind (CPU, tiny arenas): the block-score slots are
live (stock and candidates, the shipped example bundles among them), the
prefill sheet is row-strided as the contract says, the runtime's selection
does not trust a sheet (NaN, +inf, garbage), and audit dumps hold what the
slot computed. The engine's tokens against a naive float64 msa model are
checked in test_engine_model (Serving).

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

from cacheon_runtime import stio  # noqa: E402
from cacheon_runtime.engine import dispatch, msa  # noqa: E402
from test_engine_model import make, tiny_arena, wave  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples")
DECODE, PREFILL = "attention.msa_block_score", "attention.msa_prefill_block_score"

# Candidates written here: the prefill one records the shape and stride of
# every sheet it was given, in its module's SEEN.
SOURCES = {
    "prefill_strided": """
        import torch

        SEEN = []

        def msa_prefill_block_score(q, index_k, prefix_len, scale, block_size, out):
            SEEN.append((tuple(out.shape), tuple(out.stride())))
            t, s = q.shape[0], index_k.shape[0]
            nb = out.shape[1]
            sc = (q.float() @ index_k.float().t()) * scale
            rows = torch.arange(t).unsqueeze(1) + prefix_len
            sc = sc.masked_fill(torch.arange(s).unsqueeze(0) > rows, float("-inf"))
            sc = torch.cat([sc, sc.new_full((t, nb * block_size - s), float("-inf"))], dim=1)
            for j in range(nb):
                out[:, j] = sc[:, j * block_size:(j + 1) * block_size].amax(dim=1)
    """,
    "decode_nan": """
        def msa_block_score(q, index_k, seq_lens, block_size, out):
            out.fill_(float("nan"))
    """,
    "prefill_inf": """
        def msa_prefill_block_score(q, index_k, prefix_len, scale, block_size, out):
            out.fill_(float("inf"))
    """,
}


def row(tmp, name, slot, entry):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    with open(os.path.join(d, "k.py"), "w") as f:
        f.write(textwrap.dedent(SOURCES[name]))
    return slot, {"bundle": d, "source": "k.py", "entry": entry, "variant": "default",
                  "domain": {"capabilities": {}}}


def example_stack():
    return {DECODE: {"bundle": os.path.join(EXAMPLES, "msa_block_score_torch"), "source": "msa_block_score.py",
                     "entry": "msa_block_score", "variant": "default", "domain": {"capabilities": {}}},
            PREFILL: {"bundle": os.path.join(EXAMPLES, "msa_prefill_block_score_torch"), "source": "msa_prefill.py",
                      "entry": "msa_prefill_block_score", "variant": "default", "domain": {"capabilities": {}}}}


def tokens(res):
    return [r["tokens"] for r in res["results"]]


class MSAServing(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.reqs = wave(4, new=6, lens=(17, 9, 22, 13))
        cls.stock = make(tiny_arena("msa")).generate({"requests": cls.reqs})

    def test_block_score_slots_fire(self):
        eng = make(tiny_arena("msa"))
        eng.generate({"requests": self.reqs})
        st = eng.stats()["slots"]
        self.assertEqual(sorted(st), sorted(dispatch.SLOTS + dispatch.MSA_SLOTS))
        for s in (DECODE, PREFILL, "norm.rmsnorm", "activation.silu_and_mul"):
            self.assertGreater(st[s]["stock"], 0, s)
        # the msa model's attention is the runtime's own
        self.assertEqual(st["attention.sdpa"]["stock"] + st["attention.decode"]["stock"], 0)
        self.assertNotIn(DECODE, make(tiny_arena()).stats()["slots"])

    def test_example_bundles_keep_tokens(self):
        eng = make(tiny_arena("msa"), stack=example_stack())
        got = eng.generate({"requests": self.reqs})
        self.assertEqual(tokens(got), tokens(self.stock))
        for r, s in zip(got["results"], self.stock["results"]):
            for x, y in zip(r["logprobs"], s["logprobs"]):
                self.assertAlmostEqual(x, y, delta=1e-4)
        st = eng.stats()["slots"]
        for s in (DECODE, PREFILL):
            self.assertGreater(st[s]["selected"], 0, s)
            self.assertEqual(st[s]["selected"], st[s]["completed"], s)
            self.assertEqual(st[s]["stock"], 0, s)

    def test_prefill_sheet_is_row_strided(self):
        with tempfile.TemporaryDirectory() as tmp:
            slot, r = row(tmp, "prefill_strided", PREFILL, "msa_prefill_block_score")
            eng = make(tiny_arena("msa"), stack={slot: r})
            got = eng.generate({"requests": self.reqs})
            self.assertEqual(tokens(got), tokens(self.stock))
            calls = eng.d.variants[PREFILL][0].entry.__globals__["SEEN"]
            self.assertTrue(calls)
            for (t, nb), (rs, cs) in calls:
                self.assertEqual(cs, 1)
                self.assertGreater(rs, nb)
                self.assertEqual(rs % 8, 0)

    def test_sheets_are_not_trusted(self):
        # NaN decode sheets and all-+inf prefill sheets choose blocks, but a
        # query still reads its own block and never a key it may not see:
        # the engine runs on and its log-probabilities stay finite.
        with tempfile.TemporaryDirectory() as tmp:
            stack = dict([row(tmp, "decode_nan", DECODE, "msa_block_score"),
                          row(tmp, "prefill_inf", PREFILL, "msa_prefill_block_score")])
            got = make(tiny_arena("msa"), stack=stack).generate({"requests": self.reqs})
            for q, r in zip(self.reqs, got["results"]):
                self.assertEqual(len(r["tokens"]), q["max_new_tokens"])
                self.assertTrue(all(math.isfinite(v) and v <= 0 for v in r["logprobs"]))

    def test_audit_dumps(self):
        with tempfile.TemporaryDirectory() as d:
            eng = make(tiny_arena("msa"), stack=example_stack(), audit={"every": 2, "dir": d})
            eng.generate({"requests": self.reqs})
            files = sorted(os.listdir(d))
            self.assertEqual(len(files), sum(c["audited"] for c in eng.stats()["slots"].values()))
            seen = set()
            for f in files:
                t, meta = stio.load(os.path.join(d, f))
                seen.add(meta["slot"])
                check_msa_dump(self, meta["slot"], t, meta)
            self.assertEqual(seen, {DECODE, PREFILL})


def check_msa_dump(test, slot, t, meta):
    """The dumped sheet is the slot's function of the dumped inputs (read
    logically: the prefill sheet's padding is not in the dump)."""
    bs = int(meta["scalar.block_size"])
    if slot == DECODE:
        q, ik, sl = t["q"].double(), t["index_k"].double(), t["seq_lens"].long()
        b, s = ik.shape[0], ik.shape[1]
        sc = torch.einsum("bd,bsd->bs", q.sum(1), ik[:, :, 0])
        sc = sc.masked_fill(torch.arange(s)[None, :] >= sl[:, None], float("-inf"))
        names = ("q", "index_k", "seq_lens")
    else:
        q, ik = t["q"].double(), t["index_k"].double()
        p = int(meta["scalar.prefix_len"])
        b, s = q.shape[0], ik.shape[0]
        sc = (q @ ik.t()) * float(meta["scalar.scale"])
        sc = sc.masked_fill(torch.arange(s)[None, :] > torch.arange(b)[:, None] + p, float("-inf"))
        names = ("q", "index_k")
    nb = -(-s // bs)
    sc = torch.cat([sc, sc.new_full((b, nb * bs - s), float("-inf"))], dim=1)
    want = sc.view(b, nb, bs).amax(-1)
    got = t["out"].double()
    test.assertEqual(tuple(got.shape), (b, nb))
    test.assertTrue(torch.equal(torch.isinf(got), torch.isinf(want)), "%s: -inf cells differ" % slot)
    fin = torch.isfinite(want)
    test.assertLess(float((got[fin] - want[fin]).abs().max()), 1e-3, slot)
    for n in names:
        test.assertTrue(torch.equal(t[n], t["in." + n]), "%s: input %s changed" % (slot, n))


class Selection(unittest.TestCase):
    def sparse(self, topk):
        a = tiny_arena("msa")
        a["model"]["msa_topk"] = topk
        return make(a).model.msa

    def test_rule(self):
        sp = self.sparse(2)
        nan, inf = float("nan"), float("inf")
        sheet = torch.tensor([[1.0, 3.0, 3.0, 0.0],    # tie: the lower block
                              [nan, nan, 2.0, nan],    # NaN counts as -inf
                              [inf, inf, inf, inf],    # own block first, then the lowest
                              [5.0, -inf, -inf, -inf]])
        own = torch.tensor([0, 3, 3, 3])
        got = sp.select(sheet, own).int().tolist()
        self.assertEqual(got, [[1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 1], [1, 0, 0, 1]])
        # a strided sheet is read through its strides, and left as it was
        wide = torch.zeros(4, 8)
        wide[:, :4] = sheet
        before = wide.clone()
        self.assertEqual(sp.select(wide[:, :4], own).int().tolist(), got)
        self.assertTrue(torch.equal(torch.isnan(wide), torch.isnan(before)))
        # msa_topk beyond the blocks (at most 8, config.MAX_MSA_TOPK, over
        # this sheet's 4): every block
        self.assertTrue(bool(self.sparse(8).select(sheet, own).all()))

    def test_key_slots(self):
        bt = torch.tensor([[3, 1, 0], [2, 0, 0]], dtype=torch.int32)
        sl = torch.tensor([5, 2], dtype=torch.int32)
        self.assertEqual(msa.key_slots(bt, sl, 4, static=False).tolist(),
                         [[12, 13, 14, 15, 4, 5, 6, 7], [8, 9, 10, 11, 0, 1, 2, 3]])
        self.assertEqual(msa.key_slots(bt, sl, 4, static=True).shape, (2, 12))


if __name__ == "__main__":
    unittest.main()
