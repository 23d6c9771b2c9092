"""Honest flash-style attention: a callable object entry, keys in blocks of
128 with an online (running max / running sum) softmax, float32 state for
half-precision calls and float64 for float32 calls, p kept unrounded."""
import torch


class _OnlineAttention:
    block = 128

    def __call__(self, q, k, v, out, sm_scale, causal):
        t, hq, d = q.shape
        s, hkv, _ = k.shape
        g = hq // hkv
        acc = torch.float64 if q.dtype == torch.float32 else torch.float32
        qf = q.to(acc).reshape(t, hkv, g, d).permute(1, 2, 0, 3)  # k g t d
        kf = k.to(acc).permute(1, 0, 2)  # kvh s d
        vf = v.to(acc).permute(1, 0, 2)
        m = torch.full((hkv, g, t, 1), float("-inf"), dtype=acc, device=q.device)
        l = torch.zeros((hkv, g, t, 1), dtype=acc, device=q.device)
        o = torch.zeros((hkv, g, t, d), dtype=acc, device=q.device)
        rows = torch.arange(t, device=q.device).unsqueeze(1) + (s - t)
        for j0 in range(0, s, self.block):
            j1 = min(s, j0 + self.block)
            sc = torch.matmul(qf, kf[:, None, j0:j1, :].transpose(-1, -2)) * sm_scale
            if causal:
                cols = torch.arange(j0, j1, device=q.device).unsqueeze(0)
                sc = sc.masked_fill(~(cols <= rows), float("-inf"))
            mb = sc.amax(dim=-1, keepdim=True)
            mn = torch.maximum(m, mb)
            safe = torch.where(torch.isinf(mn), torch.zeros_like(mn), mn)
            p = torch.exp(sc - safe)
            alpha = torch.exp(m - safe)
            l = l * alpha + p.sum(dim=-1, keepdim=True)
            o = o * alpha + torch.matmul(p, vf[:, None, j0:j1, :])
            m = mn
        res = (o / l).permute(2, 0, 1, 3).reshape(t, hq, d)
        out.copy_(res)


attention = _OnlineAttention()
