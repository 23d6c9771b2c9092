"""Tests of the arena runtime's stock slot implementations on the CPU
(the CUDA paths are checked against these in test_engine_cuda.py), against
plain float64 references written here.

Run: python3 -m unittest discover -s python/tests -p 'test_engine*.py'
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from cacheon_runtime.engine import stock  # noqa: E402


def ref_attention(q, k, v, scale, causal):
    q, k, v = q.double(), k.double(), v.double()
    t, s = q.shape[0], k.shape[0]
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    sc = torch.einsum("thd,shd->hts", q, k) * scale
    if causal:
        i = torch.arange(t)[:, None]
        j = torch.arange(s)[None, :]
        sc = sc.masked_fill(j > i + (s - t), float("-inf"))  # bottom-right aligned
    return torch.einsum("hts,shd->thd", sc.softmax(-1), v)


class Stock(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def assertClose(self, got, want, tol=1e-5):
        err = float((got.double() - want.double()).abs().max())
        self.assertLess(err, tol)

    def test_rmsnorm_and_silu(self):
        x = torch.randn(7, 96) * 3 + 1
        w = torch.rand(96) + 0.5
        out = torch.empty(7, 96)
        stock.rmsnorm(x, w, out, 1e-6)
        xd = x.double()
        self.assertClose(out, xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * w.double())
        x2 = torch.randn(5, 64)
        out = torch.empty(5, 32)
        stock.silu_and_mul(x2, out)
        self.assertClose(out, F.silu(x2[:, :32].double()) * x2[:, 32:].double())
        # bf16 goes through fp32 math
        outb = torch.empty(5, 32, dtype=torch.bfloat16)
        stock.silu_and_mul(x2.bfloat16(), outb)
        self.assertClose(outb, F.silu(x2[:, :32].bfloat16().double()) * x2[:, 32:].bfloat16().double(), 0.05)

    def test_sdpa_bottom_right_causal_gqa(self):
        for t, p, hq, hkv, d, causal in ((1, 36, 8, 8, 16, True), (12, 0, 8, 2, 16, True),
                                         (9, 14, 8, 1, 32, True), (6, 4, 4, 4, 8, False)):
            q, k, v = torch.randn(t, hq, d), torch.randn(t + p, hkv, d), torch.randn(t + p, hkv, d)
            out = torch.empty(t, hq, d)
            stock.attention(q, k, v, out, d ** -0.5, causal)
            self.assertClose(out, ref_attention(q, k, v, d ** -0.5, causal))

    def test_chunked_equals_whole(self):
        # attention of a chunk over prefix + chunk equals the whole-prompt rows
        t, d = 20, 16
        q, k, v = torch.randn(t, 4, d), torch.randn(t, 2, d), torch.randn(t, 2, d)
        whole = torch.empty(t, 4, d)
        stock.attention(q, k, v, whole, 0.25, True)
        part = torch.empty(8, 4, d)
        stock.attention(q[12:], k, v, part, 0.25, True)
        self.assertClose(part, whole[12:])

    def test_paged_decode(self):
        for b, hq, hkv, d, ps, maxp, npages in ((3, 8, 2, 16, 4, 6, 24), (5, 4, 1, 8, 1, 20, 120),
                                                 (2, 4, 4, 8, 16, 3, 7)):
            q = torch.randn(b, hq, d)
            kc, vc = torch.randn(npages, ps, hkv, d), torch.randn(npages, ps, hkv, d)
            bt = torch.stack([torch.randperm(npages)[:maxp] for _ in range(b)]).int()
            sl = torch.randint(1, maxp * ps + 1, (b,)).int()
            out = torch.empty(b, hq, d)
            stock.attention_decode(q, kc, vc, bt, sl, d ** -0.5, out)
            for i in range(b):
                n = int(sl[i])
                k = kc[bt[i].long()].reshape(-1, hkv, d)[:n]
                v = vc[bt[i].long()].reshape(-1, hkv, d)[:n]
                want = ref_attention(q[i:i + 1], k, v, d ** -0.5, False)
                self.assertClose(out[i:i + 1], want)

    def test_fused_experts(self):
        for m, h, i, e, kk in ((1, 32, 16, 4, 2), (9, 48, 24, 8, 2), (13, 32, 8, 6, 3)):
            x = torch.randn(m, h)
            w13, w2 = torch.randn(e, 2 * i, h) / h ** 0.5, torch.randn(e, h, i) / i ** 0.5
            ids = torch.stack([torch.randperm(e)[:kk] for _ in range(m)]).int()
            tw = torch.rand(m, kk)
            out = torch.empty(m, h)
            stock.fused_experts(x, ids, tw, stock.prepare(w13, w2), out)
            want = torch.zeros(m, h, dtype=torch.float64)
            for r in range(m):
                for j in range(kk):
                    gu = w13[ids[r, j]].double() @ x[r].double()
                    want[r] += float(tw[r, j]) * (w2[ids[r, j]].double() @ (F.silu(gu[:i]) * gu[i:]))
            self.assertClose(out, want, 1e-4)

    def test_rope_store(self):
        t, hq, hkv, d, ps = 5, 4, 2, 8, 4
        qkv = torch.randn(t, (hq + 2 * hkv) * d)
        pos = torch.tensor([0, 3, 7, 8, 30])
        cos = torch.cos(torch.arange(32.0)[:, None] * torch.rand(d // 2)[None, :])
        sin = torch.sin(torch.arange(32.0)[:, None] * torch.rand(d // 2)[None, :])
        kc, vc = torch.zeros(10, ps, hkv, d), torch.zeros(10, ps, hkv, d)
        bt = torch.tensor([[3, 1, 4, 5, 9, 2, 6, 7, 8]] * t, dtype=torch.int32)
        q = torch.empty(t, hq, d)
        stock.rope_store(qkv, pos, None, cos, sin, q, kc, vc, hq, hkv, block_table=bt)
        for r in range(t):
            p = int(pos[r])
            c, s = cos[p], sin[p]
            x = qkv[r, :hq * d].view(hq, d)
            want = torch.cat([x[:, :d // 2] * c - x[:, d // 2:] * s, x[:, d // 2:] * c + x[:, :d // 2] * s], -1)
            self.assertClose(q[r], want)
            page, off = int(bt[r, p // ps]), p % ps
            self.assertClose(vc[page, off], qkv[r, (hq + hkv) * d:].view(hkv, d))
            k = qkv[r, hq * d:(hq + hkv) * d].view(hkv, d)
            self.assertClose(kc[page, off], torch.cat([k[:, :d // 2] * c - k[:, d // 2:] * s,
                                                       k[:, d // 2:] * c + k[:, :d // 2] * s], -1))


if __name__ == "__main__":
    unittest.main()


class UniformPrefill(unittest.TestCase):
    """The batched stock attention over equal fresh prompts computes what
    the per-sequence slot call computes."""

    def test_matches_per_sequence(self):
        g = torch.Generator().manual_seed(3)
        for hq, hkv in ((4, 4), (8, 2), (4, 1)):
            b, t, d = 3, 7, 16
            q = torch.randn(b, t, hq, d, generator=g)
            k = torch.randn(b, t, hkv, d, generator=g)
            v = torch.randn(b, t, hkv, d, generator=g)
            out = torch.empty_like(q)
            stock.attention_uniform(q, k, v, out, 0.25)
            for i in range(b):
                ref = torch.empty(t, hq, d)
                stock.attention(q[i], k[i], v[i], ref, 0.25, True)
                self.assertTrue(torch.allclose(out[i], ref, atol=1e-5, rtol=1e-5), (hq, hkv, i))


class DecodeGemmChoice(unittest.TestCase):
    """The decode GEMM routing: Triton paths only for CUDA 16-bit tensors,
    and the sweep-derived launch table for the Llama-1B shapes."""

    def test_cpu_never_takes_triton(self):
        from cacheon_runtime.engine import decode_gemm
        for m in (1, 2, 64):
            x = torch.randn(m, 2048, dtype=torch.bfloat16)
            w = torch.randn(3072, 2048, dtype=torch.bfloat16)
            self.assertFalse(decode_gemm.gemv_ok(x, w))
            self.assertFalse(decode_gemm.skinny_ok(x, w))

    def test_skinny_table(self):
        from cacheon_runtime.engine import decode_gemm
        cases = {(3072, 2048): (32, 256, 1, 4, 4), (2048, 2048): (32, 256, 2, 4, 4),
                 (16384, 2048): (64, 128, 1, 4, 3), (2048, 8192): (64, 128, 4, 4, 5),
                 (6144, 4096): (64, 128, 2, 4, 5), (4096, 65536): (64, 128, 8, 4, 5)}
        for (n, k), want in cases.items():
            self.assertEqual(decode_gemm.skinny_config(n, k), want, "n=%d k=%d" % (n, k))
        # L2 prefetch: q/k/v and o always, the MLP only above 32 rows (two
        # tiles when K is split), as measured
        for (m, n, k, split), want in {(2, 3072, 2048, 1): 1, (16, 2048, 2048, 2): 1, (32, 16384, 2048, 1): 0,
                                       (64, 16384, 2048, 1): 1, (32, 2048, 8192, 4): 0,
                                       (64, 2048, 8192, 4): 2}.items():
            self.assertEqual(decode_gemm.skinny_prefetch(m, n, k, split), want, (m, n, k, split))
