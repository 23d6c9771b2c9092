"""Plain-torch attention core with GQA/MQA and a bottom-right causal mask.

q is (T, Hq, D); k and v are (S, Hkv, D) with S >= T. Query t sees keys
0 .. t + (S - T): the last query sees every key. torch's own `is_causal`
aligns the mask top-left, which is wrong whenever S > T, so the mask is
built here. Query head h reads kv head h // (Hq // Hkv). No host syncs, so the
call is CUDA-graph safe.

Precision: fp32 math for bf16/fp16 inputs. For fp32 inputs the scores
accumulate in fp64: with logits of a few hundred (scaled inputs), fp32
rounding of the logits alone moves the softmax by more than the fp32
tolerance of 1e-5.
"""
import torch


def attention(q, k, v, out, sm_scale, causal):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    g = hq // hkv
    acc = torch.float64 if q.dtype == torch.float32 else torch.float32
    qf = q.to(acc).reshape(t, hkv, g, d)
    scores = torch.einsum("tkgd,skd->kgts", qf, k.to(acc)) * sm_scale
    if causal:
        rows = torch.arange(t, device=q.device).unsqueeze(1)
        cols = torch.arange(s, device=q.device).unsqueeze(0)
        visible = cols <= rows + (s - t)
        scores = scores.masked_fill(~visible, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    o = torch.einsum("kgts,skd->tkgd", probs, v.to(acc))
    out.copy_(o.reshape(t, hq, d))
