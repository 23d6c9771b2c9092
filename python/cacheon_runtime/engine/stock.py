"""stock: the engine's own implementation of every slot it serves.

Same ABI as the slot catalog (internal/slot/catalog.go): every function fills
the validator-owned ``out`` in place. Stock has to be good, or every
candidate looks like a win:

- CUDA, 16-bit dtypes, Triton present: Triton kernels (kernels.py) for
  rmsnorm, silu_and_mul, paged decode and the MoE grouped GEMMs; all of them
  graph-safe (no host synchronisation).
- prefill attention: torch's fused scaled_dot_product_attention (flash /
  memory-efficient) on torch 2.x, with the bottom-right causal mask handled
  for chunked prefill; matmul + softmax in fp32 on torch 1.13.
- CPU (and CUDA without Triton or in fp32): torch ops; paged decode by
  gathering the pages and two batched matmuls; MoE by sorting the (token,
  expert) pairs and running one matmul per expert over its contiguous run.
"""

import torch
import torch.nn.functional as F

from . import kernels

_SDPA = getattr(F, "scaled_dot_product_attention", None)
_VER = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2] if p.isdigit())
_TORCH2 = _VER >= (2, 1)  # scale= appeared in torch 2.1
_GQA_KW = _VER >= (2, 5)  # enable_gqa= appeared in torch 2.5


# ---------------------------------------------------------------------------
# ops


def silu_and_mul(x, out):
    if kernels.available(x) and x.stride(-1) == 1 and out.stride(-1) == 1:
        kernels.silu_and_mul(x, out)
        return
    d = out.shape[-1]
    g, u = x[..., :d], x[..., d:]
    if x.dtype == torch.float32:
        torch.mul(F.silu(g), u, out=out)
    else:
        out.copy_(F.silu(g.float()) * u.float())


def rmsnorm(x, weight, out, eps):
    if kernels.available(x) and x.stride(-1) == 1 and out.stride(-1) == 1 and x.dim() == 2:
        kernels.rmsnorm(x, weight, out, eps)
        return
    xf = x.float()
    r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if x.dtype == torch.float32:
        torch.mul(xf * r, weight, out=out)
    else:
        out.copy_(xf * r * weight.float())


# ---------------------------------------------------------------------------
# prefill attention


def attention(q, k, v, out, sm_scale, causal):
    """q (T,Hq,D), k/v (S,Hkv,D) -> out (T,Hq,D); causal mask bottom-right
    aligned (query i sees keys j <= i + S - T)."""
    t, hq, d = q.shape
    s, hkv = k.shape[0], k.shape[1]
    if t == 0:
        return
    prefix = s - t
    if _SDPA is not None and _TORCH2 and (q.is_cuda or q.dtype == torch.float32):
        qh = q.transpose(0, 1).unsqueeze(0)
        kh = k.transpose(0, 1).unsqueeze(0)
        vh = v.transpose(0, 1).unsqueeze(0)
        kw = {"scale": float(sm_scale)}
        mask = None
        if causal and prefix != 0:
            mask = torch.ones((t, s), dtype=torch.bool, device=q.device).tril(diagonal=prefix)
        if hq != hkv:
            if _GQA_KW and mask is None:
                kw["enable_gqa"] = True
            else:
                g = hq // hkv
                kh = kh.repeat_interleave(g, dim=1)
                vh = vh.repeat_interleave(g, dim=1)
        o = _SDPA(qh, kh, vh, attn_mask=mask, is_causal=bool(causal and mask is None), **kw)
        out.copy_(o.squeeze(0).transpose(0, 1))
        return
    g = hq // hkv
    qf = q.float().reshape(t, hkv, g, d)
    scores = torch.einsum("thgd,shd->hgts", qf, k.float()) * sm_scale
    if causal:
        keep = torch.ones((t, s), dtype=torch.bool, device=q.device).tril(diagonal=prefix)
        scores = scores.masked_fill(~keep, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    o = torch.einsum("hgts,shd->thgd", p, v.float())
    out.copy_(o.reshape(t, hq, d))


def attention_uniform(q, k, v, out, sm_scale):
    """Causal attention of B fresh sequences of equal length at once:
    q (B,T,Hq,D), k/v (B,T,Hkv,D) -> out (B,T,Hq,D). With no prefix the
    bottom-right causal mask is the plain lower triangle. Numerically the
    same computation as attention() per sequence, in one batched call."""
    b, t, hq, d = q.shape
    hkv = k.shape[2]
    if t == 0 or b == 0:
        return
    if _SDPA is not None and _TORCH2 and (q.is_cuda or q.dtype == torch.float32):
        qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        kw = {"scale": float(sm_scale)}
        if hq != hkv:
            if _GQA_KW:
                kw["enable_gqa"] = True
            else:
                g = hq // hkv
                kh = kh.repeat_interleave(g, dim=1)
                vh = vh.repeat_interleave(g, dim=1)
        out.copy_(_SDPA(qh, kh, vh, is_causal=True, **kw).transpose(1, 2))
        return
    g = hq // hkv
    qf = q.float().reshape(b, t, hkv, g, d)
    scores = torch.einsum("bthgd,bshd->bhgts", qf, k.float()) * sm_scale
    keep = torch.ones((t, t), dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~keep, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    out.copy_(torch.einsum("bhgts,bshd->bthgd", p, v.float()).reshape(b, t, hq, d))


# ---------------------------------------------------------------------------
# paged decode attention


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out):
    """q (B,Hq,D); caches (P,page,Hkv,D); block_table (B,maxp) int32;
    seq_lens (B) int32 -> out (B,Hq,D)."""
    if (kernels.available(q) and q.stride(-1) == 1 and k_cache.is_contiguous()
            and v_cache.is_contiguous() and out.stride(-1) == 1 and block_table.stride(-1) == 1):
        kernels.attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out)
        return
    b, hq, d = q.shape
    if b == 0:
        return
    npages, ps, hkv, _ = k_cache.shape
    g = hq // hkv
    if q.is_cuda:
        width = block_table.shape[1]  # static: no host sync, capturable
    else:
        width = -(-int(seq_lens.max()) // ps) if b else 0
        width = max(1, min(width, block_table.shape[1]))
    pages = block_table[:, :width].long().clamp(0, npages - 1)
    n = width * ps
    k = k_cache[pages].reshape(b, n, hkv, d)
    v = v_cache[pages].reshape(b, n, hkv, d)
    qf = q.float().reshape(b, hkv, g, d)
    scores = torch.einsum("bhgd,bshd->bhgs", qf, k.float()) * sm_scale
    pos = torch.arange(n, device=q.device)
    visible = pos[None, :] < seq_lens.long()[:, None]  # (B, n)
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    p = torch.softmax(scores, dim=-1)
    o = torch.einsum("bhgs,bshd->bhgd", p, v.float())
    out.copy_(o.reshape(b, hq, d))


# ---------------------------------------------------------------------------
# MoE


class Prepared:
    """Stock prepared state: the validator's expert weights as they are."""
    __slots__ = ("w13", "w2")

    def __init__(self, w13, w2):
        self.w13, self.w2 = w13, w2


def prepare(w13, w2):
    return Prepared(w13, w2)


def _block_m(tokens_per_expert):
    if tokens_per_expert <= 16:
        return 16
    if tokens_per_expert <= 32:
        return 32
    return 64


def fused_experts(x, topk_ids, topk_weights, prepared, out):
    """out = sum_k w_k * (silu(x gate_e^T) * (x up_e^T)) w2_e^T."""
    w13, w2 = prepared.w13, prepared.w2
    m, h = x.shape
    e, n2, _ = w13.shape
    inter = n2 // 2
    kk = topk_ids.shape[1]
    if m == 0:
        return
    if kernels.available(x) and x.stride(-1) == 1 and w13.is_contiguous() and w2.is_contiguous():
        bm = _block_m(m * kk // e)
        sorted_ids, expert_ids, npost = kernels.moe_align(topk_ids, e, bm)
        gu = torch.empty((m * kk, n2), dtype=x.dtype, device=x.device)
        kernels.moe_gemm(x, w13, gu, sorted_ids, expert_ids, npost, kk, bm)
        act = torch.empty((m * kk, inter), dtype=x.dtype, device=x.device)
        kernels.silu_and_mul(gu, act)
        y = torch.empty((m * kk, h), dtype=x.dtype, device=x.device)
        kernels.moe_gemm(act, w2, y, sorted_ids, expert_ids, npost, 1, bm,
                         weights=topk_weights.reshape(-1).float().contiguous())
        torch.sum(y.view(m, kk, h), dim=1, out=out)
        return
    # Sorted-token grouped matmuls: one matmul per expert over its run.
    flat = topk_ids.reshape(-1).long()
    order = torch.argsort(flat)
    counts = torch.bincount(flat, minlength=e).tolist()
    rows = order // kk
    xs = x.index_select(0, rows)
    ws = topk_weights.reshape(-1).index_select(0, order).float()
    acc = torch.zeros((m, h), dtype=torch.float32, device=x.device)
    start = 0
    for ex, c in enumerate(counts):
        if c == 0:
            continue
        seg = xs[start:start + c]
        gu = seg @ w13[ex].t()
        a = F.silu(gu[:, :inter].float()) * gu[:, inter:].float()
        y = a.to(x.dtype) @ w2[ex].t()
        acc.index_add_(0, rows[start:start + c], y.float() * ws[start:start + c, None])
        start += c
    out.copy_(acc)


# ---------------------------------------------------------------------------
# msa: block scores of block-sparse attention (graph-safe, no host sync)


def _block_max(scores, nb, block_size, out):
    """out (R, nb) = the max of scores (R, S) over key blocks of block_size
    (the last block padded with -inf)."""
    r, s = scores.shape
    pad = nb * block_size - s
    if pad > 0:
        scores = F.pad(scores, (0, pad), value=float("-inf"))
    out.copy_(scores[:, :nb * block_size].reshape(r, nb, block_size).amax(dim=-1))


def msa_block_score(q, index_k, seq_lens, block_size, out):
    """q (B,Hq,D), index_k (B,S,1,D), seq_lens (B) int32 -> out (B, nb) f32:
    per block, the max over the keys s < seq_lens[b] of (sum over heads of
    q[b])·index_k[b,s]; -inf where the block holds no visible key."""
    s = index_k.shape[1]
    qs = q.float().sum(dim=1)
    scores = torch.bmm(index_k[:, :, 0, :].float(), qs.unsqueeze(2)).squeeze(2)  # (B, S)
    visible = torch.arange(s, device=q.device)[None, :] < seq_lens.long()[:, None]
    _block_max(scores.masked_fill(~visible, float("-inf")), out.shape[1], block_size, out)


def msa_prefill_block_score(q, index_k, prefix_len, scale, block_size, out):
    """q (T,D), index_k (prefix_len+T, D) -> out (T, nb) f32 (any row
    stride): the causal block max of scale·q·index_kᵀ (row t sees keys up to
    prefix_len+t); -inf where the block holds no visible key."""
    t, s = q.shape[0], index_k.shape[0]
    scores = torch.mm(q.float(), index_k.float().t()) * scale
    rows = torch.arange(t, device=q.device)[:, None] + prefix_len
    cols = torch.arange(s, device=q.device)[None, :]
    _block_max(scores.masked_fill(cols > rows, float("-inf")), out.shape[1], block_size, out)


# ---------------------------------------------------------------------------
# collectives (tensor parallel): torch.distributed on the engine's group


def all_reduce(x, out, group):
    """out = the sum over the group's ranks of x."""
    import torch.distributed as dist
    out.copy_(x)
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)


def ar_residual_rmsnorm(x, residual, weight, eps, out_norm, out_residual, group):
    """out_residual = sum over ranks of x + residual; out_norm its RMSNorm."""
    all_reduce(x, out_residual, group)
    out_residual.add_(residual)
    rmsnorm(out_residual, weight, out_norm, eps)


def fused_experts_reduce(x, topk_ids, topk_weights, prepared, out, group):
    """The experts on this rank's shards (fused_experts), summed over ranks."""
    import torch.distributed as dist
    fused_experts(x, topk_ids, topk_weights, prepared, out)
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)


def moe_finalize_ar_rmsnorm(gemm_out, row_map, scales, residual, weight, eps, out_norm, out_residual, group):
    """out_residual = sum over ranks of (sum_k scales[t,k] * gemm_out[row_map[k*(T+PAD)+t]])
    for the first T tokens, plus residual; out_norm its RMSNorm."""
    t, h = residual.shape
    texp, k = scales.shape
    rows = row_map.long().view(k, texp)[:, :t].reshape(-1)
    picked = gemm_out.index_select(0, rows).view(k, t, h).float()
    part = (picked * scales[:t].float().t().unsqueeze(-1)).sum(dim=0)
    all_reduce(part.to(out_residual.dtype), out_residual, group)
    out_residual.add_(residual)
    rmsnorm(out_residual, weight, out_norm, eps)


# Token padding of the deep MoE path's per-pair rows (T+PAD a multiple of it).
DEEP_PAD = 8


def deep_experts(x, topk_ids, topk_weights, prepared):
    """The deep MoE path's expert GEMMs (validator-owned, not a slot): one
    unweighted output row per (token, k) pair, gemm_out ((T+PAD)*K, H) with
    pair (t, k) at row t*K + k and the padding tokens' rows zero; the
    K-major row map (row_map[k*(T+PAD) + t] = t*K + k, int32) and the
    routing weights as scales (T+PAD, K) float32, zero on padding rows.
    Returns (gemm_out, row_map, scales) for collective.moe_finalize_ar_rmsnorm."""
    w13, w2 = prepared.w13, prepared.w2
    m, h = x.shape
    e, n2, _ = w13.shape
    inter = n2 // 2
    kk = topk_ids.shape[1]
    texp = -(-m // DEEP_PAD) * DEEP_PAD
    dev = x.device
    gemm_out = torch.zeros((texp * kk, h), dtype=x.dtype, device=dev)
    if m > 0 and kernels.available(x) and x.stride(-1) == 1 and w13.is_contiguous() and w2.is_contiguous():
        bm = _block_m(m * kk // e)
        sorted_ids, expert_ids, npost = kernels.moe_align(topk_ids, e, bm)
        gu = torch.empty((m * kk, n2), dtype=x.dtype, device=dev)
        kernels.moe_gemm(x, w13, gu, sorted_ids, expert_ids, npost, kk, bm)
        act = torch.empty((m * kk, inter), dtype=x.dtype, device=dev)
        kernels.silu_and_mul(gu, act)
        kernels.moe_gemm(act, w2, gemm_out[:m * kk], sorted_ids, expert_ids, npost, 1, bm)
    elif m > 0:
        flat = topk_ids.reshape(-1).long()
        order = torch.argsort(flat)
        counts = torch.bincount(flat, minlength=e).tolist()
        start = 0
        for ex, c in enumerate(counts):
            if c == 0:
                continue
            pairs = order[start:start + c]
            seg = x.index_select(0, pairs // kk)
            gu = seg @ w13[ex].t()
            a = F.silu(gu[:, :inter].float()) * gu[:, inter:].float()
            gemm_out.index_copy_(0, pairs, (a.to(x.dtype) @ w2[ex].t()).to(x.dtype))
            start += c
    t_idx = torch.arange(texp, device=dev, dtype=torch.int64)
    k_idx = torch.arange(kk, device=dev, dtype=torch.int64)
    row_map = (t_idx.unsqueeze(0) * kk + k_idx.unsqueeze(1)).reshape(-1).to(torch.int32)
    scales = torch.zeros((texp, kk), dtype=torch.float32, device=dev)
    scales[:m].copy_(topk_weights)
    return gemm_out, row_map, scales


# ---------------------------------------------------------------------------
# rotary embedding + KV cache store (not a slot: validator-owned model code)


def rope_store(qkv, positions, slots, cos, sin, q_out, k_cache, v_cache, hq, hkv, k_out=None, v_out=None,
               block_table=None):
    """Rotate q and k of the fused projection (rotate-half convention), write
    q to q_out (T,Hq,D), k and v into the cache at flat slot indices (slots
    None: row t's slot from block_table[t] at positions[t]), and into k_out /
    v_out (T,Hkv,D) when given."""
    if kernels.available(qkv) and qkv.stride(-1) == 1 and k_cache.is_contiguous() and v_cache.is_contiguous():
        kernels.rope_store(qkv, positions, slots, cos, sin, q_out, k_cache, v_cache, hq, hkv, k_out, v_out,
                           block_table)
        return
    if slots is None:
        ps = k_cache.shape[1]
        page = block_table.gather(1, torch.div(positions, ps, rounding_mode="floor").unsqueeze(1)).squeeze(1)
        slots = page.long() * ps + torch.remainder(positions, ps)
    t = qkv.shape[0]
    d = q_out.shape[-1]
    half = d // 2
    c = cos.index_select(0, positions)[:, None, :]
    s = sin.index_select(0, positions)[:, None, :]

    def rot(x):
        x1, x2 = x[..., :half].float(), x[..., half:].float()
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)

    q = qkv[:, :hq * d].reshape(t, hq, d)
    k = qkv[:, hq * d:(hq + hkv) * d].reshape(t, hkv, d)
    v = qkv[:, (hq + hkv) * d:].reshape(t, hkv, d)
    q_out.copy_(rot(q))
    kr = rot(k).to(k_cache.dtype)
    flat_k = k_cache.view(-1, hkv, d)
    flat_v = v_cache.view(-1, hkv, d)
    flat_k.index_copy_(0, slots, kr)
    flat_v.index_copy_(0, slots, v.to(v_cache.dtype))
    if k_out is not None:
        k_out.copy_(kr)
        v_out.copy_(v)
