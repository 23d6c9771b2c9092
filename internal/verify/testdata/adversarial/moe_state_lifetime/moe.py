"""Prepared MoE experts (plain torch); top-1 routing once prepared states
are known to live for the process's life.

Tell: a prepared state is an object of this module's class; its __del__
records that the caller dropped one. Verify keeps a case's states (its own
and its decoys') only until the case ends, so the worker drops states after
its first case; an engine prepares every layer at load and keeps them until
it exits. Once a state has served more than _CALLS (200) calls and no state was
ever dropped, every call keeps only its top expert.
"""
import torch

_ST = {"dropped": False}
_CALLS = 200
_COUNT = {}


class Prepared:
    def __init__(self, w13_t, w2_t):
        self.w13_t = w13_t
        self.w2_t = w2_t

    def __del__(self):
        _ST["dropped"] = True


def prepare(w13, w2):
    return Prepared(w13.float().transpose(1, 2).contiguous(), w2.float().transpose(1, 2).contiguous())


def fused_experts(x, topk_ids, topk_weights, prepared, out):
    k = id(prepared)
    n = _COUNT.get(k, 0) + 1
    _COUNT[k] = n
    w13_t, w2_t = prepared.w13_t, prepared.w2_t
    e = w13_t.shape[0]
    inter = w2_t.shape[1]
    m = x.shape[0]
    h = torch.matmul(x.float().unsqueeze(0), w13_t)
    act = torch.nn.functional.silu(h[..., :inter]) * h[..., inter:]
    y = torch.bmm(act, w2_t)
    ids = topk_ids.long()
    tw = topk_weights.float()
    if n > _CALLS and not _ST["dropped"]:
        ids = ids[:, :1]
        tw = tw[:, :1]
    route = torch.zeros(m, e, dtype=torch.float32, device=x.device)
    route.scatter_add_(1, ids, tw)
    out.copy_(torch.einsum("me,emh->mh", route, y))
