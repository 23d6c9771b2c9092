"""kernels: Triton kernels of the stock CUDA path (imported only with Triton)
and the helpers every Triton kernel of the runtime shares.

Small, graph-safe kernels (no host synchronisation, shapes fixed by the
launch) for the hot path:

- rmsnorm            one program per row, fp32 accumulation;
- silu_and_mul       silu(x[:, :d]) * x[:, d:], fp32 math;
- rope_store         rotary embedding of q and k (rotate-half convention) from
                     the fused qkv projection, q into a contiguous buffer, k and
                     v scattered into the paged KV cache (optionally also into
                     contiguous k/v buffers for prefill attention);
- paged decode       split-KV ("flash decoding") over (batch, kv head, split),
                     all query heads of a GQA group in one tile, then a
                     log-sum-exp reduce over the splits;
- moe grouped GEMM   tokens sorted by expert and padded per expert to the
                     block size (sync-free alignment in torch ops), one
                     expert per row block (fused_moe style);
- sampling           greedy token and its logprob in two passes.

The decode GEMMs live in decode_gemm. On sm90+ every kernel except the MoE
GEMM is launched with programmatic dependent launch (pdl_options): it waits
for the previous kernel in the stream before touching memory that kernels
write, and lets the next kernel's programs become resident early; what no
kernel of the current forward writes (weights, tables, positions, lengths)
is loaded before the wait (EARLY). The PDL and EARLY switches exist for
side-by-side timing in python/bench/.

Every launcher takes the same tensors the torch paths take; callers check
``available(t)`` first.
"""

import math

import torch

try:  # pragma: no cover - exercised on the GPU machine only
    import triton
    import triton.language as tl
    HAVE_TRITON = True
except Exception:  # noqa: BLE001 - no triton, or a broken install
    triton = None
    tl = None
    HAVE_TRITON = False

_SM_COUNT = {}


def available(t):
    """True when the Triton path can serve tensor t (CUDA, 16-bit float)."""
    return HAVE_TRITON and t.is_cuda and t.dtype in (torch.float16, torch.bfloat16)


def _sm_count(dev):
    i = dev.index if dev.index is not None else torch.cuda.current_device()
    n = _SM_COUNT.get(i)
    if n is None:
        n = _SM_COUNT[i] = torch.cuda.get_device_properties(i).multi_processor_count
    return n


if HAVE_TRITON:  # pragma: no cover - GPU only

    @triton.jit
    def gdc_enter(GDC: tl.constexpr):
        # Programmatic dependent launch (sm90+): wait until the previous
        # kernel in the stream has finished and flushed its memory (every
        # kernel launched with PDL waits before it touches memory another
        # kernel writes), then let the next kernel's programs get resident.
        if GDC:
            tl.extra.cuda.gdc_wait()
            tl.extra.cuda.gdc_launch_dependents()

    @triton.jit
    def gdc_launch(GDC: tl.constexpr):
        if GDC:
            tl.extra.cuda.gdc_launch_dependents()

    @triton.jit
    def gdc_wait(GDC: tl.constexpr):
        if GDC:
            tl.extra.cuda.gdc_wait()

    @triton.jit
    def prefetch_l2(ptrs):
        # A hint: ask L2 for the 128-byte lines at ptrs (no registers held,
        # nothing waited on). Kernels issue it before their PDL wait for
        # memory the previous kernel does not write (weights, cached K/V),
        # so those reads start during the previous kernel's tail.
        tl.inline_asm_elementwise("prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l", [ptrs],
                                  dtype=tl.int32, is_pure=False, pack=1)

    @triton.jit
    def _rmsnorm_kernel(x_ptr, w_ptr, o_ptr, stride_x, stride_o, n_cols, eps,
                        BLOCK: tl.constexpr, EARLY: tl.constexpr,
                        GDC: tl.constexpr):
        if not EARLY:
            gdc_enter(GDC)
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        m = offs < n_cols
        w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)  # weights: no kernel writes them
        if EARLY:
            gdc_enter(GDC)
        x = tl.load(x_ptr + row * stride_x + offs, mask=m, other=0.0).to(tl.float32)
        r = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        tl.store(o_ptr + row * stride_o + offs, (x * r * w).to(o_ptr.dtype.element_ty), mask=m)

    @triton.jit
    def _silu_mul_kernel(x_ptr, o_ptr, stride_x, stride_o, d, BLOCK: tl.constexpr,
                         GDC: tl.constexpr):
        gdc_enter(GDC)
        row = tl.program_id(0).to(tl.int64)
        col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        m = col < d
        g = tl.load(x_ptr + row * stride_x + col, mask=m, other=0.0).to(tl.float32)
        u = tl.load(x_ptr + row * stride_x + d + col, mask=m, other=0.0).to(tl.float32)
        y = g / (1.0 + tl.exp(-g)) * u
        tl.store(o_ptr + row * stride_o + col, y.to(o_ptr.dtype.element_ty), mask=m)

    @triton.jit
    def _rope_store_kernel(qkv_ptr, pos_ptr, slot_ptr, bt_ptr, cos_ptr, sin_ptr,
                           q_ptr, k_ptr, v_ptr, kc_ptr, vc_ptr, stride_qkv, stride_bt,
                           PAGE_SIZE: tl.constexpr, FROM_BT: tl.constexpr,
                           HQ: tl.constexpr, HKV: tl.constexpr, HALF: tl.constexpr, D: tl.constexpr,
                           HQ_PAD: tl.constexpr, HKV_PAD: tl.constexpr, HALF_PAD: tl.constexpr,
                           WRITE_KV: tl.constexpr, EARLY: tl.constexpr,
                           GDC: tl.constexpr):
        if not EARLY:
            gdc_enter(GDC)
        # Positions, slots and block tables come from host copies or from
        # the previous step's sampling kernel, and the rope tables never
        # change: with EARLY their loads precede the PDL wait (see EARLY).
        t = tl.program_id(0).to(tl.int64)
        pos = tl.load(pos_ptr + t).to(tl.int64)
        if FROM_BT:  # decode: row t's page from its block table
            slot = tl.load(bt_ptr + t * stride_bt + pos // PAGE_SIZE).to(tl.int64) * PAGE_SIZE + pos % PAGE_SIZE
        else:
            slot = tl.load(slot_ptr + t).to(tl.int64)
        offs = tl.arange(0, HALF_PAD)
        mh = offs < HALF
        c = tl.load(cos_ptr + pos * HALF + offs, mask=mh, other=0.0)[None, :]
        s = tl.load(sin_ptr + pos * HALF + offs, mask=mh, other=0.0)[None, :]
        if EARLY:
            gdc_enter(GDC)
        row = qkv_ptr + t * stride_qkv
        # q: rotate into the contiguous (T, HQ, D) buffer
        hq = tl.arange(0, HQ_PAD)[:, None]
        mq = (hq < HQ) & mh[None, :]
        src = row + hq * D + offs[None, :]
        x1 = tl.load(src, mask=mq, other=0.0).to(tl.float32)
        x2 = tl.load(src + HALF, mask=mq, other=0.0).to(tl.float32)
        dst = q_ptr + t * (HQ * D) + hq * D + offs[None, :]
        tl.store(dst, (x1 * c - x2 * s).to(q_ptr.dtype.element_ty), mask=mq)
        tl.store(dst + HALF, (x2 * c + x1 * s).to(q_ptr.dtype.element_ty), mask=mq)
        # k: rotate into the cache slot (and the contiguous buffer)
        hk = tl.arange(0, HKV_PAD)[:, None]
        mk = (hk < HKV) & mh[None, :]
        src = row + HQ * D + hk * D + offs[None, :]
        x1 = tl.load(src, mask=mk, other=0.0).to(tl.float32)
        x2 = tl.load(src + HALF, mask=mk, other=0.0).to(tl.float32)
        k1 = (x1 * c - x2 * s).to(kc_ptr.dtype.element_ty)
        k2 = (x2 * c + x1 * s).to(kc_ptr.dtype.element_ty)
        dst = kc_ptr + slot * (HKV * D) + hk * D + offs[None, :]
        tl.store(dst, k1, mask=mk)
        tl.store(dst + HALF, k2, mask=mk)
        # v: copy
        src = row + (HQ + HKV) * D + hk * D + offs[None, :]
        v1 = tl.load(src, mask=mk, other=0.0)
        v2 = tl.load(src + HALF, mask=mk, other=0.0)
        dst = vc_ptr + slot * (HKV * D) + hk * D + offs[None, :]
        tl.store(dst, v1, mask=mk)
        tl.store(dst + HALF, v2, mask=mk)
        if WRITE_KV:
            dst = k_ptr + t * (HKV * D) + hk * D + offs[None, :]
            tl.store(dst, k1, mask=mk)
            tl.store(dst + HALF, k2, mask=mk)
            dst = v_ptr + t * (HKV * D) + hk * D + offs[None, :]
            tl.store(dst, v1, mask=mk)
            tl.store(dst + HALF, v2, mask=mk)

    @triton.jit
    def _decode_kernel(q_ptr, kc_ptr, vc_ptr, bt_ptr, sl_ptr, o_ptr, lse_ptr, sm_scale,
                       stride_qb, stride_qh, stride_kp, stride_ks, stride_kh,
                       stride_vp, stride_vs, stride_vh, stride_bt,
                       stride_ob, stride_oh, stride_os, stride_lb, stride_lh,
                       out_ptr, stride_fb, stride_fh, cnt_ptr,
                       GROUP: tl.constexpr, GROUP_PAD: tl.constexpr,
                       HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                       PAGE_SIZE: tl.constexpr, BLOCK_N: tl.constexpr,
                       NUM_SPLITS: tl.constexpr, DIRECT: tl.constexpr,
                       GROUP_P2: tl.constexpr, SPLIT_PAD: tl.constexpr, EARLY: tl.constexpr,
                       GDC: tl.constexpr):
        if not EARLY:
            gdc_enter(GDC)
        # Sequence lengths and block tables come from host copies or from
        # the previous step's sampling kernel: with EARLY the lengths and
        # the first tile's page numbers load before the PDL wait.
        b = tl.program_id(0).to(tl.int64)
        kvh = tl.program_id(1)
        split = tl.program_id(2)
        seq_len = tl.load(sl_ptr + b)
        per_split = tl.cdiv(tl.cdiv(seq_len, NUM_SPLITS), BLOCK_N) * BLOCK_N
        start = split * per_split
        end = tl.minimum(start + per_split, seq_len)
        offs_n = tl.arange(0, BLOCK_N)
        # The page numbers of the next tile are loaded while this tile's K
        # and V are in flight, so the block-table read is off the critical
        # path; K and V of a tile are requested together.
        pos = start + offs_n
        page = tl.load(bt_ptr + b * stride_bt + pos // PAGE_SIZE, mask=pos < end, other=0).to(tl.int64)
        if EARLY:
            gdc_enter(GDC)
        offs_g = tl.arange(0, GROUP_PAD)
        mg = offs_g < GROUP
        offs_d = tl.arange(0, BLOCK_D)
        md = offs_d < HEAD_DIM
        heads = kvh * GROUP + offs_g
        q = tl.load(q_ptr + b * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
                    mask=mg[:, None] & md[None, :], other=0.0)
        m_i = tl.full([GROUP_PAD], float("-inf"), tl.float32)
        l_i = tl.zeros([GROUP_PAD], tl.float32)
        acc = tl.zeros([GROUP_PAD, BLOCK_D], tl.float32)
        for n0 in range(start, end, BLOCK_N):
            pos = n0 + offs_n
            mn = pos < end
            sl = (pos % PAGE_SIZE).to(tl.int64)
            kmask = mn[:, None] & md[None, :]
            k = tl.load(kc_ptr + (page * stride_kp + sl * stride_ks + kvh * stride_kh)[:, None]
                        + offs_d[None, :], mask=kmask, other=0.0)
            v = tl.load(vc_ptr + (page * stride_vp + sl * stride_vs + kvh * stride_vh)[:, None]
                        + offs_d[None, :], mask=kmask, other=0.0)
            nxt = pos + BLOCK_N
            page = tl.load(bt_ptr + b * stride_bt + nxt // PAGE_SIZE, mask=nxt < end, other=0).to(tl.int64)
            qk = tl.dot(q, tl.trans(k)) * sm_scale
            qk = tl.where(mn[None, :], qk, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(qk - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        omask = mg[:, None] & md[None, :]
        if DIRECT:
            out = acc / l_i[:, None]
            tl.store(o_ptr + b * stride_ob + heads[:, None] * stride_oh + offs_d[None, :],
                     out.to(o_ptr.dtype.element_ty), mask=omask)
        else:
            l_safe = tl.where(l_i > 0, l_i, 1.0)
            out = acc / l_safe[:, None]
            lse = tl.where(l_i > 0, m_i + tl.log(l_safe), float("-inf"))
            tl.store(o_ptr + b * stride_ob + heads[:, None] * stride_oh + split * stride_os
                     + offs_d[None, :], out, mask=omask)
            tl.store(lse_ptr + b * stride_lb + heads * stride_lh + split, lse, mask=mg)
            # The last split of this (row, kv head) to finish merges all
            # splits (acq_rel atomic: the others' partials are visible), then
            # re-arms the counter for the next launch.
            cnt = cnt_ptr + b * tl.num_programs(1) + kvh
            tl.debug_barrier()  # every thread's partial stores precede the release
            if tl.atomic_add(cnt, 1, sem="acq_rel") == NUM_SPLITS - 1:
                tl.debug_barrier()
                hr = kvh * GROUP + tl.arange(0, GROUP_P2)
                mr = tl.arange(0, GROUP_P2) < GROUP
                offs_s = tl.arange(0, SPLIT_PAD)
                msk = mr[:, None] & (offs_s < NUM_SPLITS)[None, :]
                lse_all = tl.load(lse_ptr + b * stride_lb + hr[:, None] * stride_lh + offs_s[None, :],
                                  mask=msk, other=float("-inf"), cache_modifier=".cg")
                m = tl.max(lse_all, 1)
                w = tl.where(msk, tl.exp(lse_all - m[:, None]), 0.0)
                part = tl.load(o_ptr + b * stride_ob + hr[:, None, None] * stride_oh
                               + offs_s[None, :, None] * stride_os + offs_d[None, None, :],
                               mask=msk[:, :, None] & md[None, None, :], other=0.0, cache_modifier=".cg")
                res = tl.sum(w[:, :, None] * part, 1) / tl.sum(w, 1)[:, None]
                tl.store(out_ptr + b * stride_fb + hr[:, None] * stride_fh + offs_d[None, :],
                         res.to(out_ptr.dtype.element_ty), mask=mr[:, None] & md[None, :])
                tl.atomic_xchg(cnt, 0)

    @triton.jit
    def _moe_gemm_kernel(a_ptr, b_ptr, c_ptr, w_ptr, sorted_ptr, expert_ptr, npost_ptr,
                         N, K, num_valid, stride_am, stride_be, stride_bn, stride_cm,
                         TOP_K: tl.constexpr, MUL_WEIGHT: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        npost = tl.load(npost_ptr)
        if pid_m * BLOCK_M >= npost:
            return
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        tok = tl.load(sorted_ptr + offs_m).to(tl.int64)
        mt = tok < num_valid
        e = tl.load(expert_ptr + pid_m).to(tl.int64)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        mn = offs_n < N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + (tok // TOP_K)[:, None] * stride_am + offs_k[None, :]
        b_ptrs = b_ptr + e * stride_be + offs_n[None, :] * stride_bn + offs_k[:, None]
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for k0 in range(0, K, BLOCK_K):
            mk = (k0 + offs_k) < K
            a = tl.load(a_ptrs, mask=mt[:, None] & mk[None, :], other=0.0)
            bb = tl.load(b_ptrs, mask=mk[:, None] & mn[None, :], other=0.0)
            acc += tl.dot(a, bb)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K
        if MUL_WEIGHT:
            w = tl.load(w_ptr + tok, mask=mt, other=0.0)
            acc = acc * w[:, None]
        tl.store(c_ptr + tok[:, None] * stride_cm + offs_n[None, :], acc.to(c_ptr.dtype.element_ty),
                 mask=mt[:, None] & mn[None, :])


    @triton.jit
    def _sample_partial_kernel(x_ptr, max_ptr, idx_ptr, sum_ptr, V, stride_x,
                               CHUNKS: tl.constexpr, BLOCK: tl.constexpr,
                               GDC: tl.constexpr):
        gdc_enter(GDC)
        # Per (row, chunk): max, first argmax and sum(exp(x - max)) of the chunk.
        b = tl.program_id(0).to(tl.int64)
        c = tl.program_id(1)
        offs = c * BLOCK + tl.arange(0, BLOCK)
        m = offs < V
        x = tl.load(x_ptr + b * stride_x + offs, mask=m, other=float("-inf")).to(tl.float32)
        mx = tl.max(x, 0)
        ix = tl.min(tl.where(x == mx, offs, 2147483647), 0)
        sm = tl.sum(tl.where(m, tl.exp(x - mx), 0.0), 0)
        tl.store(max_ptr + b * CHUNKS + c, mx)
        tl.store(idx_ptr + b * CHUNKS + c, ix)
        tl.store(sum_ptr + b * CHUNKS + c, sm)

    @triton.jit
    def _sample_final_kernel(max_ptr, idx_ptr, sum_ptr, tok_ptr, lp_ptr,
                             hist_tok_ptr, hist_lp_ptr, ctr_ptr, ids_ptr, pos_ptr, sl_ptr, act_ptr,
                             V, hist_stride,
                             CHUNKS: tl.constexpr, CPAD: tl.constexpr, ADVANCE: tl.constexpr,
                             GDC: tl.constexpr):
        gdc_enter(GDC)
        # Greedy token and its logprob; with ADVANCE also the decode state
        # (history ring at ctr, next input, position and length + active).
        b = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, CPAD)
        mc = offs < CHUNKS
        mx = tl.load(max_ptr + b * CHUNKS + offs, mask=mc, other=float("-inf"))
        ix = tl.load(idx_ptr + b * CHUNKS + offs, mask=mc, other=2147483647)
        sm = tl.load(sum_ptr + b * CHUNKS + offs, mask=mc, other=0.0)
        g = tl.max(mx, 0)
        tok = tl.minimum(tl.min(tl.where(mx == g, ix, 2147483647), 0), V - 1).to(tl.int64)  # NaN-proof
        total = tl.sum(tl.where(mc, sm * tl.exp(mx - g), 0.0), 0)
        lp = -tl.log(total)
        tl.store(tok_ptr + b, tok)
        tl.store(lp_ptr + b, lp)
        if ADVANCE:
            ctr = tl.load(ctr_ptr)
            tl.store(hist_tok_ptr + ctr * hist_stride + b, tok)
            tl.store(hist_lp_ptr + ctr * hist_stride + b, lp)
            tl.store(ids_ptr + b, tok)
            a = tl.load(act_ptr + b)
            tl.store(pos_ptr + b, tl.load(pos_ptr + b) + a)
            tl.store(sl_ptr + b, tl.load(sl_ptr + b) + a)


# Programmatic dependent launch for the stock kernels on sm90+ (a developer
# switch for A/B timing; the kernels are correct either way).
PDL = True
_PDL_OK = {}


def _triton_has_pdl():
    """Whether this Triton can launch with PDL (gdc_* and launch_pdl came together)."""
    try:
        from triton.language.extra import cuda as tl_cuda
    except Exception:  # noqa: BLE001 - an older or non-CUDA Triton
        return False
    return hasattr(tl_cuda, "gdc_wait") and hasattr(tl_cuda, "gdc_launch_dependents")


def pdl_options(t):
    """Launch options: GDC and launch_pdl together on sm90+ CUDA with a
    Triton that has them; GDC=False alone (no launch_pdl keyword an older
    Triton would refuse) everywhere else."""
    ok = False
    if PDL and t.is_cuda:
        i = t.device.index if t.device.index is not None else torch.cuda.current_device()
        ok = _PDL_OK.get(i)
        if ok is None:
            ok = _PDL_OK[i] = torch.cuda.get_device_capability(i)[0] >= 9 and _triton_has_pdl()
    return {"GDC": True, "launch_pdl": True} if ok else {"GDC": False}


def pow2(n):
    return triton.next_power_of_2(int(n))


def sample(logits, tok, lp, state=None, rows=None):
    """Greedy tok (B,) int64 and its logprob lp (B,) fp32 from logits (B, V)
    (any float dtype) in two launches; with state (a DecodeState) also
    write the history ring and advance the first `rows` rows."""
    b, v = logits.shape
    block = 4096
    chunks = triton.cdiv(v, block)
    mx = torch.empty((b, chunks), dtype=torch.float32, device=logits.device)
    ix = torch.empty((b, chunks), dtype=torch.int32, device=logits.device)
    sm = torch.empty((b, chunks), dtype=torch.float32, device=logits.device)
    _sample_partial_kernel[(b, chunks)](logits, mx, ix, sm, v, logits.stride(0),
                                        CHUNKS=chunks, BLOCK=block, num_warps=8, **pdl_options(logits))
    sample_finish(mx, ix, sm, tok, lp, v, chunks, state)


def sample_finish(mx, ix, sm, tok, lp, v, chunks, state):
    """sample()'s second pass over per-chunk partials (max, first argmax,
    sum of exp), each (B, chunks); also the end of decode_gemm.lm_head_sample."""
    b = mx.shape[0]
    warps = max(1, min(8, pow2(chunks) // 256))
    if state is None:
        _sample_final_kernel[(b,)](mx, ix, sm, tok, lp, tok, lp, tok, tok, tok, tok, tok, v, 0,
                                   CHUNKS=chunks, CPAD=pow2(chunks), ADVANCE=False, num_warps=warps, **pdl_options(mx))
        return
    st = state
    _sample_final_kernel[(b,)](mx, ix, sm, tok, lp, st.hist_tok, st.hist_lp, st.hist_ctr, st.ids,
                               st.positions, st.seq_lens, st.active, v, st.hist_tok.stride(0),
                               CHUNKS=chunks, CPAD=pow2(chunks), ADVANCE=True, num_warps=warps, **pdl_options(mx))


def rmsnorm(x, weight, out, eps):
    n, h = x.shape
    if n == 0:
        return
    block = pow2(h)
    warps = max(1, min(16, block // 256))
    _rmsnorm_kernel[(n,)](x, weight, out, x.stride(0), out.stride(0), h, float(eps),
                          BLOCK=block, EARLY=EARLY, num_warps=warps, **pdl_options(x))


def silu_and_mul(x, out):
    n, d = out.shape
    if n == 0:
        return
    block = min(1024, pow2(d))
    _silu_mul_kernel[(n, triton.cdiv(d, block))](x, out, x.stride(0), out.stride(0), d,
                                                 BLOCK=block, num_warps=4, **pdl_options(x))


def rope_store(qkv, positions, slots, cos, sin, q_out, k_cache, v_cache, hq, hkv, k_out=None, v_out=None,
               block_table=None):
    """q_out (T,HQ,D) <- rope(q); cache[slot] <- rope(k), v; k_out/v_out too
    when given. slots None: row t's slot comes from block_table[t]."""
    t = qkv.shape[0]
    if t == 0:
        return
    half = cos.shape[1]
    write = k_out is not None
    from_bt = slots is None
    _rope_store_kernel[(t,)](qkv, positions, positions if from_bt else slots,
                             block_table if from_bt else positions, cos, sin, q_out,
                             k_out if write else q_out, v_out if write else q_out,
                             k_cache, v_cache, qkv.stride(0), block_table.stride(0) if from_bt else 0,
                             PAGE_SIZE=k_cache.shape[1], FROM_BT=from_bt,
                             HQ=hq, HKV=hkv, HALF=half, D=2 * half, HQ_PAD=pow2(hq), HKV_PAD=pow2(hkv),
                             HALF_PAD=pow2(half), WRITE_KV=write, EARLY=EARLY, num_warps=4, **pdl_options(qkv))


# Paged-decode launch: programs per SM the split count aims for, KV
# positions per tile, warps and pipeline stages.
DECODE_TUNING = {"waves": 0.5, "block_n": None, "warps": 4, "stages": 2}

# Loads issued before the PDL wait (a developer switch for side-by-side
# timing). What is read early is written only before the forward (or
# decode step) the reader belongs to began: weights and rope tables never;
# positions, lengths and block tables by host copies and by the previous
# decode step's sampling kernel. A forward's first kernel is the embedding,
# an ordinary launch, which starts only after all earlier work has
# finished, and no kernel starts before the one ahead of it has: so those
# writes are complete and visible however the kernels in between use PDL
# (candidates included). Early: rmsnorm's weights; rope's positions, slots
# and tables; paged decode's lengths and first page numbers. (Loading paged
# decode's first K/V tile early as well, but for the position rope_store
# has just written, made the batch-64 step 8% slower on the H200.)
EARLY = True


def attention_decode(q, k_cache, v_cache, block_table, seq_lens, sm_scale, out, tuning=None):
    t = tuning or DECODE_TUNING
    b, hq, d = q.shape
    if b == 0:
        return
    _p, ps, hkv, _d = k_cache.shape
    group = hq // hkv
    max_tokens = block_table.shape[1] * ps
    progs = b * hkv
    block_d = max(16, pow2(d))
    cap = max(2, min(64, 16384 // (pow2(group) * block_d)))  # registers of the merge
    want = int(math.ceil(_sm_count(q.device) * t["waves"] / progs))
    splits = t.get("splits") or max(1, min(cap, want, -(-max_tokens // 64)))
    # tiles of 128 positions when every SM already has a program (H200,
    # batch 64: 15 us against 17.6 us with 64), else short tiles over
    # more splits (batch 1: 4.3 us against over 4.8 us)
    block_n = t["block_n"] or (32 if block_d > 64 or progs < _sm_count(q.device) else 128)
    gpad = max(16, pow2(group))
    common = dict(GROUP=group, GROUP_PAD=gpad, HEAD_DIM=d, BLOCK_D=block_d, PAGE_SIZE=ps,
                  BLOCK_N=block_n, NUM_SPLITS=splits, GROUP_P2=pow2(group), SPLIT_PAD=pow2(splits),
                  EARLY=EARLY, num_warps=t["warps"], num_stages=t["stages"], **pdl_options(q))
    ks, vs = k_cache.stride(), v_cache.stride()
    if splits == 1:
        _decode_kernel[(b, hkv, 1)](q, k_cache, v_cache, block_table, seq_lens, out, out, float(sm_scale),
                                    q.stride(0), q.stride(1), ks[0], ks[1], ks[2], vs[0], vs[1], vs[2],
                                    block_table.stride(0), out.stride(0), out.stride(1), 0, 0, 0,
                                    out, 0, 0, seq_lens, DIRECT=True, **common)
        return
    part = torch.empty((b, hq, splits, d), dtype=torch.float32, device=q.device)
    lse = torch.empty((b, hq, splits), dtype=torch.float32, device=q.device)
    _decode_kernel[(b, hkv, splits)](q, k_cache, v_cache, block_table, seq_lens, part, lse, float(sm_scale),
                                     q.stride(0), q.stride(1), ks[0], ks[1], ks[2], vs[0], vs[1], vs[2],
                                     block_table.stride(0), part.stride(0), part.stride(1), part.stride(2),
                                     lse.stride(0), lse.stride(1), out, out.stride(0), out.stride(1),
                                     split_counters(q.device, b * hkv), DIRECT=False, **common)


_COUNTERS = {}
_RETIRED = []  # grown-out counter buffers stay alive: captured graphs may point at them


def split_counters(dev, n):
    """Self-resetting split counters of the paged decode kernel and the
    split-K skinny GEMM (one stream runs them in turn; zeros,
    allocated once per device and grown before any graph capture: the
    runner warms every bucket up eagerly first)."""
    key = (dev.type, dev.index)
    t = _COUNTERS.get(key)
    if t is None or t.numel() < n:
        if t is not None:
            _RETIRED.append(t)
        t = _COUNTERS[key] = torch.zeros(max(n, 4096), dtype=torch.int32, device=dev)
    return t


def moe_align(topk_ids, num_experts, block_m):
    """Sort (token, k) pairs by expert, padding every expert's run to a
    multiple of block_m, with torch ops and no host synchronisation.

    Returns (sorted_ids int32 (L,), expert_ids int32 (L/block_m,),
    num_post int32 (1,)); padding entries hold M*K (invalid)."""
    flat = topk_ids.reshape(-1).to(torch.int64)
    mk = flat.numel()
    dev = flat.device
    nblocks = -(-(mk + num_experts * (block_m - 1)) // block_m)
    counts = torch.zeros(num_experts, dtype=torch.int64, device=dev)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    padded = (counts + block_m - 1) // block_m * block_m
    pad_end = torch.cumsum(padded, 0)
    raw_start = torch.cumsum(counts, 0) - counts
    _sorted, order = torch.sort(flat, stable=True)
    rank = torch.arange(mk, device=dev) - raw_start[_sorted]
    dest = pad_end[_sorted] - padded[_sorted] + rank
    sorted_ids = torch.full((nblocks * block_m,), mk, dtype=torch.int32, device=dev)
    sorted_ids.scatter_(0, dest, order.to(torch.int32))
    starts = torch.arange(nblocks, device=dev, dtype=torch.int64) * block_m
    expert_ids = torch.searchsorted(pad_end, starts, right=True).to(torch.int32)
    num_post = pad_end[-1:].to(torch.int32)
    return sorted_ids, expert_ids, num_post


def moe_gemm(a, w, c, sorted_ids, expert_ids, num_post, top_k, block_m, weights=None):
    """c[row] = a[row // top_k] @ w[expert].T (times weights[row]) for every
    valid row of sorted_ids; a (R,K), w (E,N,K), c (M*top_k, N)."""
    n, k = w.shape[1], w.shape[2]
    block_n = 64 if n >= 64 else max(16, pow2(n))
    block_k = 64 if k >= 64 else max(16, pow2(k))
    grid = (expert_ids.shape[0], triton.cdiv(n, block_n))
    _moe_gemm_kernel[grid](a, w, c, weights if weights is not None else a, sorted_ids, expert_ids, num_post,
                           n, k, c.shape[0], a.stride(0), w.stride(0), w.stride(1), c.stride(0),
                           TOP_K=top_k, MUL_WEIGHT=weights is not None,
                           BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=4, num_stages=3)
