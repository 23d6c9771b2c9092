"""decode_gemm: the Triton GEMMs of the decode step (imported only with
Triton; callers check kernels.available first).

- gemv            one-row GEMMs (batch-1 decode), the first weight tile
                  loaded before the PDL wait;
- qkv_rope        the one-row q/k/v projection with the rotary embedding and
                  the KV-cache write in its epilogue;
- skinny          2..64-row GEMMs, split-K with the last split of a column
                  block summing the partials, the first weight tiles
                  prefetched into L2 before the PDL wait; operand tiles
                  copied by TMA for wide outputs over a short K;
- lm_head_sample  the skinny GEMM of lm_head reducing its logits to greedy
                  sampling's partials (the logits are never stored), then
                  kernels.sample_finish.

Every kernel is launched with programmatic dependent launch on sm90+
(kernels.pdl_options). Module switches (GEMV, SKINNY, PREFETCH, SAMPLE_IN_GEMM,
TMA, CONFIGS) exist for side-by-side timing in python/bench/.
"""

import torch

from . import kernels
from .kernels import HAVE_TRITON, tl, triton

# Developer switches for side-by-side timing (python/bench/): the one-row
# GEMV and the 2..64-row skinny GEMM against cuBLAS, the skinny GEMM's L2
# prefetch of weights before the PDL wait, and decode's lm_head GEMM doing
# greedy sampling's first pass; rotate-half pairs per qkv_rope program; the
# skinny GEMM's TMA copies.
GEMV = True
SKINNY = True
PREFETCH = True
SAMPLE_IN_GEMM = True
QKV_ROPE_PAIRS = 1
TMA = True  # the skinny GEMM's TMA copies where skinny_uses_tma says
# In-engine A/B overrides (python/bench/profile_kernels.py): (n, k) ->
# skinny config; empty: skinny_config decides.
CONFIGS = {}

if HAVE_TRITON:  # pragma: no cover - GPU only
    from .kernels import gdc_enter, gdc_launch, gdc_wait, prefetch_l2

    @triton.jit
    def _gemv_kernel(x_ptr, w_ptr, o_ptr, M, N, K, stride_xm, stride_wn, stride_om,
                     M_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     DOT: tl.constexpr, ADD: tl.constexpr,
                     GDC: tl.constexpr):
        # o[m, n] (+)= sum_k x[m, k] * w[n, k] for a few rows m (decode).
        # The first weight tile is loaded before waiting on the previous
        # kernel (no kernel writes weights), so its latency overlaps
        # that kernel's tail.
        gdc_launch(GDC)
        pid = tl.program_id(0)
        offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        mn = offs_n < N
        offs_m = tl.arange(0, M_PAD)
        mm = offs_m < M
        w_ptrs = w_ptr + offs_n.to(tl.int64)[:, None] * stride_wn
        offs_k = tl.arange(0, BLOCK_K)
        mk = offs_k < K
        w = tl.load(w_ptrs + offs_k[None, :], mask=mn[:, None] & mk[None, :], other=0.0)
        gdc_wait(GDC)
        if DOT:
            x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :],
                        mask=mm[:, None] & mk[None, :], other=0.0)
            acc = tl.dot(x, tl.trans(w), out_dtype=tl.float32)
        else:
            x = tl.load(x_ptr + offs_k, mask=mk, other=0.0)
            acc = tl.sum(w.to(tl.float32) * x.to(tl.float32)[None, :], axis=1)
        for k0 in range(BLOCK_K, K, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            mk = offs_k < K
            w = tl.load(w_ptrs + offs_k[None, :], mask=mn[:, None] & mk[None, :], other=0.0)
            if DOT:
                x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :],
                            mask=mm[:, None] & mk[None, :], other=0.0)
                acc += tl.dot(x, tl.trans(w))
            else:
                x = tl.load(x_ptr + offs_k, mask=mk, other=0.0)
                acc += tl.sum(w.to(tl.float32) * x.to(tl.float32)[None, :], axis=1)
        if DOT:
            o_ptrs = o_ptr + offs_m[:, None] * stride_om + offs_n[None, :]
            om = mm[:, None] & mn[None, :]
        else:
            o_ptrs = o_ptr + offs_n
            om = mn
        if ADD:
            acc += tl.load(o_ptrs, mask=om, other=0.0).to(tl.float32)
        tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=om)

    @triton.jit
    def _skinny_start(w_ptr, K, N, stride_wn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      SPLIT: tl.constexpr, PF_LINES: tl.constexpr, PF_STEP: tl.constexpr, GDC: tl.constexpr):
        # The skinny GEMMs' prologue: this program's column block and K
        # range; the first PF_LINES lines (of PF_STEP elements) of each
        # weight row of the slice are prefetched into L2 before the PDL
        # wait (weights are never written; the prefetch holds nothing).
        pn = tl.program_id(0)
        s = tl.program_id(1)
        per = tl.cdiv(tl.cdiv(K, SPLIT), BLOCK_K) * BLOCK_K
        k_lo = s * per
        k_hi = tl.minimum(k_lo + per, K)
        offs_n = pn * BLOCK_N + tl.arange(0, BLOCK_N)
        mn = offs_n < N
        if PF_LINES > 0:
            offs_l = k_lo + tl.arange(0, PF_LINES) * PF_STEP
            ok = mn[:, None] & (offs_l < k_hi)[None, :]
            prefetch_l2(w_ptr + tl.where(ok, offs_n.to(tl.int64)[:, None] * stride_wn + offs_l[None, :], 0))
        gdc_enter(GDC)
        return pn, s, k_lo, k_hi, offs_n, mn

    @triton.jit
    def _skinny_finish(acc, o_ptr, ws_ptr, cnt_ptr, max_ptr, idx_ptr, sum_ptr, stride_s, M, N, stride_om,
                       pn, s, offs_n, mn,
                       M_PAD: tl.constexpr, SPLIT: tl.constexpr, ADD: tl.constexpr, SAMPLE: tl.constexpr):
        # The skinny GEMMs' epilogue. With SPLIT > 1 each split stores its
        # fp32 partial and the last split of a column block to finish sums
        # them (acq_rel counter, re-armed).
        offs_m = tl.arange(0, M_PAD)
        mm = offs_m < M
        om = mm[:, None] & mn[None, :]
        o_ptrs = o_ptr + offs_m[:, None] * stride_om + offs_n[None, :]
        if SAMPLE:
            # lm_head with greedy sampling's first pass (SPLIT == 1): per
            # (row, column block) the max, first argmax and sum(exp(x - max))
            # of the logits as the model dtype (o_ptr's) rounds them; the
            # logits themselves are never stored.
            lg = acc.to(o_ptr.dtype.element_ty).to(tl.float32)
            lg = tl.where(mn[None, :], lg, float("-inf"))
            mx = tl.max(lg, 1)
            ix = tl.min(tl.where(lg == mx[:, None], offs_n[None, :], 2147483647), 1)
            sm = tl.sum(tl.where(mn[None, :], tl.exp(lg - mx[:, None]), 0.0), 1)
            tl.store(max_ptr + offs_m * stride_s + pn, mx, mask=mm)
            tl.store(idx_ptr + offs_m * stride_s + pn, ix, mask=mm)
            tl.store(sum_ptr + offs_m * stride_s + pn, sm, mask=mm)
        elif SPLIT == 1:
            if ADD:
                acc += tl.load(o_ptrs, mask=om, other=0.0).to(tl.float32)
            tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=om)
        else:
            ws = ws_ptr + offs_m[:, None] * N + offs_n[None, :]
            tl.store(ws + s * (M_PAD * N), acc, mask=om)
            cnt = cnt_ptr + pn
            tl.debug_barrier()  # every thread's partial stores precede the release
            if tl.atomic_add(cnt, 1, sem="acq_rel") == SPLIT - 1:
                tl.debug_barrier()
                tot = tl.zeros_like(acc)
                for j in range(SPLIT):
                    tot += tl.load(ws + j * (M_PAD * N), mask=om, other=0.0, cache_modifier=".cg")
                if ADD:
                    tot += tl.load(o_ptrs, mask=om, other=0.0).to(tl.float32)
                tl.store(o_ptrs, tot.to(o_ptr.dtype.element_ty), mask=om)
                tl.atomic_xchg(cnt, 0)

    @triton.jit
    def _skinny_kernel(x_ptr, w_ptr, o_ptr, ws_ptr, cnt_ptr, M, N, K, stride_xm, stride_wn, stride_om,
                       max_ptr, idx_ptr, sum_ptr, stride_s,
                       M_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       SPLIT: tl.constexpr, ADD: tl.constexpr, SAMPLE: tl.constexpr,
                       PF_LINES: tl.constexpr, PF_STEP: tl.constexpr,
                       GDC: tl.constexpr):
        # o[m, n] (+)= sum_k x[m, k] * w[n, k] for a few rows (decode at
        # batch 2..64): one program per (column block, K split). Loading
        # the first weight tile before the PDL wait, as gemv does, measured
        # slower here (it costs a pipeline stage of shared memory); the L2
        # prefetch holds nothing instead.
        pn, s, k_lo, k_hi, offs_n, mn = _skinny_start(w_ptr, K, N, stride_wn, BLOCK_N, BLOCK_K, SPLIT,
                                                      PF_LINES, PF_STEP, GDC)
        offs_m = tl.arange(0, M_PAD)
        mm = offs_m < M
        w_ptrs = w_ptr + offs_n.to(tl.int64)[:, None] * stride_wn
        x_ptrs = x_ptr + offs_m[:, None] * stride_xm
        acc = tl.zeros([M_PAD, BLOCK_N], tl.float32)
        for k0 in range(k_lo, k_hi, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            mk = offs_k < k_hi
            w = tl.load(w_ptrs + offs_k[None, :], mask=mn[:, None] & mk[None, :], other=0.0)
            x = tl.load(x_ptrs + offs_k[None, :], mask=mm[:, None] & mk[None, :], other=0.0)
            acc += tl.dot(x, tl.trans(w))
        _skinny_finish(acc, o_ptr, ws_ptr, cnt_ptr, max_ptr, idx_ptr, sum_ptr, stride_s, M, N, stride_om,
                       pn, s, offs_n, mn, M_PAD, SPLIT, ADD, SAMPLE)

    @triton.jit
    def _skinny_tma_kernel(x_desc, w_desc, w_ptr, o_ptr, ws_ptr, cnt_ptr, M, N, K, stride_wn, stride_om,
                           max_ptr, idx_ptr, sum_ptr, stride_s,
                           M_PAD: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           SPLIT: tl.constexpr, ADD: tl.constexpr, SAMPLE: tl.constexpr, STAGES: tl.constexpr,
                           PF_LINES: tl.constexpr, PF_STEP: tl.constexpr,
                           GDC: tl.constexpr):
        # _skinny_kernel with both operands' tiles copied by the tensor
        # memory accelerator (TMA; rows past M and columns past K read as
        # zero, and a K split's range is a whole number of tiles).
        pn, s, k_lo, k_hi, offs_n, mn = _skinny_start(w_ptr, K, N, stride_wn, BLOCK_N, BLOCK_K, SPLIT,
                                                      PF_LINES, PF_STEP, GDC)
        acc = tl.zeros([M_PAD, BLOCK_N], tl.float32)
        for k0 in tl.range(k_lo, k_hi, BLOCK_K, num_stages=STAGES):
            w = w_desc.load([pn * BLOCK_N, k0])
            x = x_desc.load([0, k0])
            acc += tl.dot(x, tl.trans(w))
        _skinny_finish(acc, o_ptr, ws_ptr, cnt_ptr, max_ptr, idx_ptr, sum_ptr, stride_s, M, N, stride_om,
                       pn, s, offs_n, mn, M_PAD, SPLIT, ADD, SAMPLE)

    @triton.jit
    def _qkv_rope_kernel(x_ptr, w_ptr, pos_ptr, bt_ptr, cos_ptr, sin_ptr, q_ptr, kc_ptr, vc_ptr,
                         K, stride_wn, HQ: tl.constexpr, HKV: tl.constexpr, HALF: tl.constexpr,
                         PAGE_SIZE: tl.constexpr, BLOCK_K: tl.constexpr, PAIRS: tl.constexpr,
                         GDC: tl.constexpr):
        # One-row decode: the fused q/k/v projection, PAIRS rotate-half
        # pairs (rows j and j + D/2 of one head) per program, rotary
        # embedding on the fp32 accumulators, q to its buffer, k and v into
        # the cache slot. The first weight tiles precede the PDL wait.
        gdc_launch(GDC)
        p = tl.program_id(0)
        per_head = HALF // PAIRS
        head = p // per_head
        j = (p % per_head) * PAIRS + tl.arange(0, PAIRS)
        rows = (head * 2 * HALF + j).to(tl.int64)
        w1_ptrs = w_ptr + rows[:, None] * stride_wn
        w2_ptrs = w1_ptrs + HALF * stride_wn
        offs_k = tl.arange(0, BLOCK_K)
        mk = offs_k < K
        w1 = tl.load(w1_ptrs + offs_k[None, :], mask=mk[None, :], other=0.0)
        w2 = tl.load(w2_ptrs + offs_k[None, :], mask=mk[None, :], other=0.0)
        gdc_wait(GDC)
        x = tl.load(x_ptr + offs_k, mask=mk, other=0.0).to(tl.float32)[None, :]
        a1 = tl.sum(w1.to(tl.float32) * x, axis=1)
        a2 = tl.sum(w2.to(tl.float32) * x, axis=1)
        for k0 in range(BLOCK_K, K, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            mk = offs_k < K
            x = tl.load(x_ptr + offs_k, mask=mk, other=0.0).to(tl.float32)[None, :]
            w1 = tl.load(w1_ptrs + offs_k[None, :], mask=mk[None, :], other=0.0)
            w2 = tl.load(w2_ptrs + offs_k[None, :], mask=mk[None, :], other=0.0)
            a1 += tl.sum(w1.to(tl.float32) * x, axis=1)
            a2 += tl.sum(w2.to(tl.float32) * x, axis=1)
        pos = tl.load(pos_ptr).to(tl.int64)
        if head < HQ + HKV:
            c = tl.load(cos_ptr + pos * HALF + j)
            s = tl.load(sin_ptr + pos * HALF + j)
            o1 = a1 * c - a2 * s
            o2 = a2 * c + a1 * s
        else:
            o1 = a1
            o2 = a2
        if head < HQ:
            dst = q_ptr + head * 2 * HALF + j
            tl.store(dst, o1.to(q_ptr.dtype.element_ty))
            tl.store(dst + HALF, o2.to(q_ptr.dtype.element_ty))
        else:
            slot = tl.load(bt_ptr + pos // PAGE_SIZE).to(tl.int64) * PAGE_SIZE + pos % PAGE_SIZE
            if head < HQ + HKV:
                dst = kc_ptr + slot * (HKV * 2 * HALF) + (head - HQ) * 2 * HALF + j
            else:
                dst = vc_ptr + slot * (HKV * 2 * HALF) + (head - HQ - HKV) * 2 * HALF + j
            tl.store(dst, o1.to(kc_ptr.dtype.element_ty))
            tl.store(dst + HALF, o2.to(kc_ptr.dtype.element_ty))


def gemv_ok(x, w):
    """Whether gemv() beats cuBLAS here: one row (batch-1 decode), 16-bit,
    row-major weights (measured on an H200 at Llama-1B shapes: 5-20% faster
    than cuBLAS for one row, slower from four rows on)."""
    return (GEMV and kernels.available(x) and x.shape[0] == 1 and x.stride(-1) == 1 and w.stride(-1) == 1
            and w.dtype == x.dtype and w.shape[1] >= 256)


def gemv(x, w, out, add=False, block_n=None, block_k=None, warps=None, stages=3, dot=None):
    """out (+)= x @ w.T for a few rows of x (decode); w (N, K) row-major."""
    m, k = x.shape
    n = w.shape[0]
    if dot is None:
        dot = m > 1
    if block_n is None and not dot:
        # One row: two weight rows x 2048 columns per program, 8 warps (an
        # H200 sweep at the Llama-1B shapes: 3.3-3.9 TB/s for the 8-67 MB
        # matrices, 5-25% faster than cuBLAS).
        block_n, block_k, warps, stages = 2, min(2048, max(256, kernels.pow2(k))), 8, 3
    bn = block_n or (16 if dot else 8)
    bk = block_k or (128 if dot else 512)
    warps = warps or 4
    _gemv_kernel[(triton.cdiv(n, bn),)](x, w, out, m, n, k, x.stride(0), w.stride(0), out.stride(0),
                                        M_PAD=16 if dot else 1, BLOCK_N=bn, BLOCK_K=bk, DOT=dot, ADD=add,
                                        num_warps=warps, num_stages=stages, **kernels.pdl_options(x))


def skinny_ok(x, w):
    """Whether skinny() serves x @ w.T: 2..64 rows (decode at batch > 1),
    16-bit, row-major, K a multiple of 16, at least 256 outputs."""
    return (SKINNY and kernels.available(x) and 2 <= x.shape[0] <= 64 and w.shape[0] >= 256 and x.stride(-1) == 1 and w.stride(-1) == 1
            and w.dtype == x.dtype and w.shape[1] % 16 == 0 and w.shape[1] >= 256)


def skinny_config(n, k):
    """(block_n, block_k, split, warps, stages) for a (rows x k) @ (k x n)
    decode GEMM, from an H200 sweep at the Llama-1B shapes, 16-64 rows
    (python/bench/kernel_sweep.py): wide outputs stream whole 64-column
    blocks; deep K splits in four; the rest uses 32-column blocks."""
    if n >= 8192:
        return 64, 128, 1, 4, 3
    if k >= 4096:
        return 64, 128, max(2, min(8, k // 2048)), 4, 5
    return 32, 256, 1 if n >= 3072 else 2, 4, 4


def skinny_prefetch(m, n, k, split):
    """Weight tiles (of block_k) a skinny program prefetches into L2 before
    its PDL wait. From an H200 sweep at the Llama-1B shapes, in 16-layer
    graphs (python/bench/kernel_sweep.py pfgemm): one tile took 0.2-0.5 us
    off each q/k/v and o projection at 16-64 rows; the 33-67 MB MLP
    weights gained only at 64 rows (one tile, two for a split K) and lost
    up to 0.9 us at 16 and 32, where their programs fill the GPU without it."""
    if n * k * 2 <= 16 << 20:
        return 1
    if m <= 32:
        return 0
    return 2 if split > 1 else 1


def skinny_uses_tma(n, k):
    """Whether the skinny GEMM of an (n x k) weight copies its tiles with TMA
    (where TMA is available). From H200 sweeps at the Llama-1B shapes and
    64 rows (kernel_sweep.py tma): wide outputs over a short K gain (q/k/v
    6.16 -> 5.62 us, gate_up 18.4 -> 17.8 us, lm_head 133.6 -> 130.9 us; the
    engine's batch-64 step 1.194 -> 1.163 ms); o and down are slower with it."""
    return n >= 3072 and k <= 2048


_TMA_OK = {}


def _tma_ok(x):
    """sm90+ and a Triton with host-side tensor descriptors."""
    i = x.device.index if x.device.index is not None else torch.cuda.current_device()
    ok = _TMA_OK.get(i)
    if ok is None:
        try:
            from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401
            ok = torch.cuda.get_device_capability(i)[0] >= 9
        except Exception:  # noqa: BLE001 - an older Triton
            ok = False
        _TMA_OK[i] = ok
    return ok


def skinny(x, w, out, add=False, config=None, prefetch=None, sample=None, tma=None):
    """out (+)= x @ w.T for 2..64 rows of x (callers check skinny_ok);
    prefetch overrides skinny_prefetch's tile count, tma skinny_uses_tma.
    With sample (max, idx, sum), each (rows, column blocks), out is not
    written: the blocks' sampling partials are (see lm_head_sample)."""
    m, k = x.shape
    n = w.shape[0]
    bn, bk, split, warps, stages = config or CONFIGS.get((n, k)) or skinny_config(n, k)
    if sample is not None:
        split = 1
    if tma is None:
        tma = TMA and skinny_uses_tma(n, k)
    # TMA descriptors want 16-byte aligned bases and row strides
    tma = (tma and _tma_ok(x) and x.data_ptr() % 16 == 0 and w.data_ptr() % 16 == 0
           and (x.stride(0) * x.element_size()) % 16 == 0 and (w.stride(0) * w.element_size()) % 16 == 0)
    m_pad = max(16, kernels.pow2(m))
    # shared memory of the pipeline's stages
    while stages > 2 and stages * (m_pad + bn) * bk * x.element_size() > 200 * 1024:
        stages -= 1
    cols = triton.cdiv(n, bn)
    ws = torch.empty((split, m_pad, n), dtype=torch.float32, device=x.device) if split > 1 else out
    cnt = kernels.split_counters(x.device, cols) if split > 1 else out
    pdl = kernels.pdl_options(x)
    tiles = (skinny_prefetch(m, n, k, split) if prefetch is None else prefetch) if PREFETCH and pdl["GDC"] else 0
    step = 128 // w.element_size()  # elements of a 128-byte line
    per = triton.cdiv(triton.cdiv(k, split), bk) * bk
    lines = kernels.pow2(triton.cdiv(min(per, tiles * bk), step)) if tiles else 0
    smax, sidx, ssum = sample if sample is not None else (out, out, out)
    common = dict(M_PAD=m_pad, BLOCK_N=bn, BLOCK_K=bk, SPLIT=split, ADD=add, SAMPLE=sample is not None,
                  PF_LINES=lines, PF_STEP=step, num_warps=warps, num_stages=stages, **pdl)
    tail = (smax, sidx, ssum, smax.stride(0) if sample is not None else 0)
    if tma:
        from triton.tools.tensor_descriptor import TensorDescriptor
        xd = TensorDescriptor(x, [m, k], [x.stride(0), 1], [m_pad, bk])
        wd = TensorDescriptor(w, [n, k], [w.stride(0), 1], [bn, bk])
        _skinny_tma_kernel[(cols, split)](xd, wd, w, out, ws, cnt, m, n, k, w.stride(0), out.stride(0), *tail,
                                          STAGES=stages, **common)
        return
    _skinny_kernel[(cols, split)](x, w, out, ws, cnt, m, n, k, x.stride(0), w.stride(0), out.stride(0), *tail,
                                  **common)


def qkv_rope(h, w, positions, block_table, cos, sin, q_out, k_cache, v_cache, hq, hkv, pairs=None,
             block_k=None, warps=4, stages=3):
    """One-row decode: q_out (1,HQ,D) <- rope(h @ Wq.T); cache[slot] <- rope(h @ Wk.T),
    h @ Wv.T, the slot from block_table[0] at positions[0] (gemv + rope_store
    in one launch). Callers check gemv_ok(h, w) and k_cache.is_contiguous()."""
    half = cos.shape[1]
    k = h.shape[1]
    pairs = pairs or QKV_ROPE_PAIRS
    while half % pairs:
        pairs //= 2
    bk = block_k or min(1024, max(256, kernels.pow2(k)))
    _qkv_rope_kernel[((hq + 2 * hkv) * (half // pairs),)](h, w, positions, block_table, cos, sin, q_out, k_cache,
                                                          v_cache, k, w.stride(0), HQ=hq, HKV=hkv, HALF=half,
                                                          PAGE_SIZE=k_cache.shape[1], BLOCK_K=bk, PAIRS=pairs,
                                                          num_warps=warps, num_stages=stages, **kernels.pdl_options(h))


def lm_head_sample(h, w, tok, lp, state=None):
    """Greedy tok (B,) int64 and its logprob lp (B,) fp32 of the logits
    h @ w.T for 2..64 rows (callers check skinny_ok(h, w)), without
    materialising the logits: the skinny GEMM reduces each column block to
    sampling partials and sample()'s second pass finishes; with state as in
    sample(). Same tokens and logprobs as skinny() then sample()."""
    b = h.shape[0]
    bn = skinny_config(w.shape[0], w.shape[1])[0]
    chunks = triton.cdiv(w.shape[0], bn)
    mx = torch.empty((b, chunks), dtype=torch.float32, device=h.device)
    ix = torch.empty((b, chunks), dtype=torch.int32, device=h.device)
    sm = torch.empty((b, chunks), dtype=torch.float32, device=h.device)
    skinny(h, w, h, sample=(mx, ix, sm))
    kernels.sample_finish(mx, ix, sm, tok, lp, w.shape[0], chunks, state)
