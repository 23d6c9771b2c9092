"""silu_and_mul that runs an unchecked ATen helper inside the worker.

torch.ops.aten._cummax_helper(self, values, indices, dim) writes
self.shape[dim] results into values/indices without checking their
sizes (torch 1.13): given values shorter than self it is a linear heap
overflow whose content the caller chooses (a non-decreasing sequence of
any doubles, the positions as int64). The scan admits it through the
torch.ops.aten._* allowance. Here it is called in bounds on every call
(a no-op on the result) to show the op runs unhindered in the sandbox;
`overflow()` is the out-of-bounds form (aborts glibc: 'unaligned tcache
chunk detected').
"""
import torch


def silu_and_mul(x, out):
    d = x.shape[-1] // 2
    y = torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()
    n = 4
    src = torch.arange(float(n))
    vals = torch.empty(n)
    idx = torch.empty(n, dtype=torch.long)
    torch.ops.aten._cummax_helper(src, vals, idx, 0)
    out.copy_(y + (vals[0] - src[0]))


def overflow():
    src = torch.arange(64.0)
    vals = torch.zeros(4)
    idx = torch.zeros(4, dtype=torch.long)
    torch.ops.aten._cummax_helper(src, vals, idx, 0)
    return vals
