"""Triton MoE experts: one program per routed (token, expert) pair and
block of the intermediate width, then one per token and block of the
hidden width.

prepare(w13, w2) keeps the weights as they are laid out (contiguous).
fused_experts runs two kernels:
  1. gate/up: for pair p = m*K + k with expert e = topk_ids[m, k], a block
     of the intermediate width: g = x[m] . w13[e, i], u = x[m] . w13[e, I+i]
     accumulated in fp32 over blocks of H; act[p, i] = silu(g) * u, kept in
     fp32.
  2. down and combine: for token m and a block of H:
     out[m, h] = sum_k topk_weights[m, k] * (act[m*K+k] . w2[e_k, h]), in
     fp32, rounded once to out's dtype. No atomics: every output element
     is written by one program, so the result does not depend on the
     order programs run in.
Grids depend on the shapes only and nothing syncs with the host, so the
call is CUDA-graph safe. CUDA only (see metadata/cuda.json).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _gate_up_kernel(x_ptr, ids_ptr, w13_ptr, act_ptr, H, I, K, sx, sid, swe, swr,
                    BI: tl.constexpr, BH: tl.constexpr):
    pair = tl.program_id(0)
    m = pair // K
    k = pair % K
    e = tl.load(ids_ptr + m * sid + k).to(tl.int64)
    rows = tl.program_id(1) * BI + tl.arange(0, BI)
    rmask = rows < I
    acc_g = tl.zeros([BI], dtype=tl.float32)
    acc_u = tl.zeros([BI], dtype=tl.float32)
    base = w13_ptr + e * swe
    for h0 in range(0, H, BH):
        cols = h0 + tl.arange(0, BH)
        cmask = cols < H
        xv = tl.load(x_ptr + m * sx + cols, mask=cmask, other=0.0).to(tl.float32)
        wmask = rmask[:, None] & cmask[None, :]
        wg = tl.load(base + rows[:, None] * swr + cols[None, :], mask=wmask, other=0.0).to(tl.float32)
        wu = tl.load(base + (rows[:, None] + I) * swr + cols[None, :], mask=wmask, other=0.0).to(tl.float32)
        acc_g += tl.sum(wg * xv[None, :], axis=1)
        acc_u += tl.sum(wu * xv[None, :], axis=1)
    act = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    tl.store(act_ptr + pair * I + rows, act, mask=rmask)


@triton.jit
def _down_kernel(act_ptr, ids_ptr, wts_ptr, w2_ptr, out_ptr, H, I, K, sid, swt, swe, swr, so,
                 BH: tl.constexpr, BI: tl.constexpr):
    m = tl.program_id(0)
    rows = tl.program_id(1) * BH + tl.arange(0, BH)
    rmask = rows < H
    total = tl.zeros([BH], dtype=tl.float32)
    for k in range(0, K):
        pair = m * K + k
        e = tl.load(ids_ptr + m * sid + k).to(tl.int64)
        wt = tl.load(wts_ptr + m * swt + k).to(tl.float32)
        base = w2_ptr + e * swe
        acc = tl.zeros([BH], dtype=tl.float32)
        for i0 in range(0, I, BI):
            cols = i0 + tl.arange(0, BI)
            cmask = cols < I
            a = tl.load(act_ptr + pair * I + cols, mask=cmask, other=0.0)
            w = tl.load(base + rows[:, None] * swr + cols[None, :],
                        mask=rmask[:, None] & cmask[None, :], other=0.0).to(tl.float32)
            acc += tl.sum(w * a[None, :], axis=1)
        total += wt * acc
    tl.store(out_ptr + m * so + rows, total.to(out_ptr.dtype.element_ty), mask=rmask)


def prepare(w13, w2):
    # w13: (E, 2I, H) = [gate; up]; w2: (E, H, I)
    return (w13.contiguous(), w2.contiguous())


def fused_experts(x, topk_ids, topk_weights, prepared, out):
    w13, w2 = prepared
    m, h = x.shape
    k = topk_ids.shape[1]
    inter = w2.shape[2]
    if m == 0:
        return
    x = x.contiguous()
    act = torch.empty((m * k, inter), dtype=torch.float32, device=x.device)
    bi, bh = 32, 64
    _gate_up_kernel[(m * k, triton.cdiv(inter, bi))](
        x, topk_ids, w13, act, h, inter, k, x.stride(0), topk_ids.stride(0),
        w13.stride(0), w13.stride(1), BI=bi, BH=bh)
    _down_kernel[(m, triton.cdiv(h, bh))](
        act, topk_ids, topk_weights, w2, out, h, inter, k, topk_ids.stride(0),
        topk_weights.stride(0), w2.stride(0), w2.stride(1), out.stride(0), BH=bh, BI=64)
