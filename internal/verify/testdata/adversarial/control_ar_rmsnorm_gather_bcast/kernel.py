"""Fused all-reduce + residual + RMSNorm, the reduction as gather to the
group's first rank (float32 shares), a rank-order float32 sum there, and a
broadcast back; then the residual add in float32 and the RMS norm through a
callable norm object that sums squares with Kahan compensation over column
chunks. out_residual and out_norm each get one rounding."""
import torch
import torch.distributed as dist


class KahanRMSNorm:
    def __init__(self, chunk=256):
        self.chunk = chunk

    def mean_square(self, r):
        s = torch.zeros(r.shape[0], 1, dtype=torch.float32, device=r.device)
        c = torch.zeros_like(s)
        for c0 in range(0, r.shape[1], self.chunk):
            part = r[:, c0:c0 + self.chunk]
            y = (part * part).sum(dim=1, keepdim=True) - c
            t = s + y
            c = (t - s) - y
            s = t
        return s / r.shape[1]

    def __call__(self, r, weight, eps):
        return r * torch.rsqrt(self.mean_square(r) + eps) * weight.float()


_norm = KahanRMSNorm()


def _gather_sum_bcast(share, group):
    ws = dist.get_world_size(group)
    root = dist.get_global_rank(group, 0)
    me = dist.get_rank(group)
    bucket = [torch.empty_like(share) for _ in range(ws)] if me == 0 else None
    dist.gather(share, bucket, dst=root, group=group)
    if me == 0:
        total = bucket[0].clone()
        for b in bucket[1:]:
            total += b
    else:
        total = torch.empty_like(share)
    dist.broadcast(total, src=root, group=group)
    return total


def ar_residual_rmsnorm(x, residual, weight, eps, out_norm, out_residual, group):
    total = _gather_sum_bcast(x.to(torch.float32).contiguous(), group)
    r = total + residual.float()
    out_residual.copy_(r)
    out_norm.copy_(_norm(r, weight, eps))
