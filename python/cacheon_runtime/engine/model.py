"""model: the forward passes of the Llama-style dense, Mixtral-style MoE and
msa (Llama with block-sparse attention, msa.py) models over a paged KV
cache.

Validator-owned code (projections, rotary embedding, cache writes, router,
residual adds, lm_head, sampling) runs here; every registered slot
(rmsnorm, silu_and_mul, prefill attention, paged decode attention, MoE
experts, msa block scores) is reached only through ``self.d`` (dispatch). Residual adds are
fused into the o_proj / down_proj GEMMs (``addmm_``), q/k/v come from one
fused projection, gate/up from another.

Two entry points:

- ``prefill(batch)``: a packed batch of prompt chunks (several requests,
  each a run of consecutive positions), K/V written into the cache, one
  attention.sdpa call per chunk (bottom-right causal over the request's
  cached prefix plus the chunk); returns the final hidden states.
- ``decode_step(state, B)``: one token for each of the first B rows of the
  static decode state; graph-capturable (no host synchronisation, no
  allocation that depends on data). Samples greedily, records the token and
  its logprob into the state's history ring and advances the state on the
  device (next input = sampled token, position and length + 1 for active
  rows).
"""

import math

import torch
import torch.nn.functional as F

from . import decode_gemm, kernels, msa, stock
from .config import attention_scale


def rope_tables(cfg, max_len, device, dim=None):
    """cos, sin (max_len, dim/2) float32 of rotary embeddings over dim
    (default the head dim) channels, with the model's theta and scaling."""
    d = dim or cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    rs = cfg.rope_scaling
    if rs:
        # Llama 3: scale low frequencies by 1/factor, keep high ones, blend between.
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position"]
        wavelen = 2 * math.pi / inv
        smooth = (old / wavelen - lo) / (hi - lo)
        scaled = torch.where(wavelen > old / lo, inv / factor, inv)
        mid = (wavelen <= old / lo) & (wavelen >= old / hi)
        inv = torch.where(mid, (1 - smooth) * inv / factor + smooth * inv, scaled)
    t = torch.arange(max_len, dtype=torch.float64)
    freqs = torch.outer(t, inv)
    return (torch.cos(freqs).to(device=device, dtype=torch.float32).contiguous(),
            torch.sin(freqs).to(device=device, dtype=torch.float32).contiguous())


class PrefillBatch:
    """A packed prefill forward: flat ids/positions/slots (N,) on the device
    and segments (start, length, prefix, gather) where gather (prefix+length,)
    holds the flat cache slots of the request's positions 0..prefix+length-1
    (None when prefix == 0)."""
    __slots__ = ("ids", "positions", "slots", "segs")

    def __init__(self, ids, positions, slots, segs):
        self.ids, self.positions, self.slots, self.segs = ids, positions, slots, segs


class DecodeState:
    """Static device buffers of the decode step (sized for max_rows rows);
    CUDA graphs capture views of their first B rows."""

    HISTORY = 1024

    def __init__(self, max_rows, max_pages, device):
        z = dict(device=device)
        self.ids = torch.zeros(max_rows, dtype=torch.long, **z)
        self.positions = torch.zeros(max_rows, dtype=torch.long, **z)
        self.seq_lens = torch.ones(max_rows, dtype=torch.int32, **z)
        self.active = torch.zeros(max_rows, dtype=torch.int32, **z)
        self.block_table = torch.zeros((max_rows, max_pages), dtype=torch.int32, **z)
        self.out_tok = torch.zeros(max_rows, dtype=torch.long, **z)
        self.out_lp = torch.zeros(max_rows, dtype=torch.float32, **z)
        self.hist_tok = torch.zeros((self.HISTORY, max_rows), dtype=torch.long, **z)
        self.hist_lp = torch.zeros((self.HISTORY, max_rows), dtype=torch.float32, **z)
        self.hist_ctr = torch.zeros(1, dtype=torch.long, **z)
        self.max_rows = max_rows


def sample(logits):
    """Greedy token and its log-softmax value (fp32) of logits (B, V)."""
    if kernels.available(logits):
        b = logits.shape[0]
        tok = torch.empty(b, dtype=torch.long, device=logits.device)
        lp = torch.empty(b, dtype=torch.float32, device=logits.device)
        kernels.sample(logits, tok, lp)
        return tok, lp
    logits = logits.float()
    tok = torch.argmax(logits, dim=-1)
    lp = logits.gather(1, tok.unsqueeze(1)).squeeze(1) - torch.logsumexp(logits, dim=-1)
    return tok, lp


class Model:
    def __init__(self, cfg, ecfg, weights, dispatch, kv, device, timer, index_cache=None):
        self.cfg, self.ecfg, self.w, self.d, self.device = cfg, ecfg, weights, dispatch, device
        self.kc, self.vc = kv
        self.timer = timer
        # Tensor parallel (dispatch.world_size ranks): this rank's heads.
        self.world = dispatch.world_size
        self.deep = ecfg.moe_path == "deep"
        # the deep MoE path's next-layer input (out_norm of the previous
        # layer's moe_finalize_ar_rmsnorm), consumed by the next layer
        self._carry = None
        self.hq, self.hkv, self.hd = cfg.num_heads // self.world, cfg.num_kv_heads // self.world, cfg.head_dim
        self.eps = cfg.rms_norm_eps
        self.scale = attention_scale(cfg.head_dim)
        self.ps = ecfg.page_size
        self.cos, self.sin = rope_tables(cfg, cfg.max_position, device)
        # An msa model's block-sparse attention (msa.py), over index_cache.
        self.msa = None
        if cfg.kind == "msa":
            rope = rope_tables(cfg, cfg.max_position, device, dim=cfg.index_head_dim)
            self.msa = msa.Sparse(cfg, dispatch, index_cache, self._mm, rope)
        if cfg.kind == "mixtral":
            for ly in weights.layers:
                ly.experts = dispatch.prepare_experts(ly.w13, ly.w2)

    # -- layers -------------------------------------------------------------

    @staticmethod
    def _mm(x, w):
        """x @ w.T (decode: the Triton GEMV for one row, the split-K skinny
        GEMM for 2..64 rows; else cuBLAS)."""
        if decode_gemm.gemv_ok(x, w):
            out = torch.empty((1, w.shape[0]), dtype=x.dtype, device=x.device)
            decode_gemm.gemv(x, w, out)
            return out
        if decode_gemm.skinny_ok(x, w):
            out = torch.empty((x.shape[0], w.shape[0]), dtype=x.dtype, device=x.device)
            decode_gemm.skinny(x, w, out)
            return out
        return torch.mm(x, w.t())

    @staticmethod
    def _add_mm(x, a, w):
        """x += a @ w.T in place (the residual add fused into the GEMM)."""
        if decode_gemm.gemv_ok(a, w):
            decode_gemm.gemv(a, w, x, add=True)
        elif decode_gemm.skinny_ok(a, w):
            decode_gemm.skinny(a, w, x, add=True)
        else:
            x.addmm_(a, w.t())

    def _layer(self, li, x, attend):
        if self.world > 1:
            return self._layer_tp(li, x, attend)
        ly, d, r = self.w.layers[li], self.d, self.timer.region
        with r("norm"):
            h = d.rmsnorm(x, ly.attn_norm, self.eps)
        with r("attention"):
            a = attend(li, h, ly.qkv)
            self._add_mm(x, a, ly.o)
        with r("norm"):
            h = d.rmsnorm(x, ly.mlp_norm, self.eps)
        with r("mlp"):
            if ly.experts is None:
                self._add_mm(x, d.silu_and_mul(self._mm(h, ly.gate_up)), ly.down)
            else:
                probs = torch.softmax(self._mm(h, ly.router).float(), dim=-1)
                tw, ti = torch.topk(probs, self.cfg.top_k, dim=-1)
                tw = tw / tw.sum(dim=-1, keepdim=True)
                x.add_(d.fused_experts(h, ti.to(torch.int32), tw, ly.experts))
        return x

    def _layer_tp(self, li, x, attend):
        """One layer on this rank's shards. Attention's o_proj and the MLP's
        down_proj (or the experts) give partial sums; the reductions are
        the collective slots: after attention collective.ar_residual_rmsnorm
        (the sum, the residual add and the MLP's norm in one call), after a
        dense MLP collective.all_reduce (the residual add stays here), and
        the experts are moe.fused_experts_reduce (experts and sum in one
        call), or with engine.moe_path = "deep" validator-owned expert GEMMs
        (one row per (token, k) pair, stock.deep_experts) and then
        collective.moe_finalize_ar_rmsnorm, whose out_norm (with the next
        layer's input norm) is the next layer's input. Every rank holds the
        same x after each reduction."""
        ly, d, r = self.w.layers[li], self.d, self.timer.region
        h, self._carry = self._carry, None
        if h is None:
            with r("norm"):
                h = d.rmsnorm(x, ly.attn_norm, self.eps)
        with r("attention"):
            part = self._mm(attend(li, h, ly.qkv), ly.o)
        with r("collective"):
            h, x = d.ar_residual_rmsnorm(part, x, ly.mlp_norm, self.eps)
        with r("mlp"):
            if ly.experts is None:
                part = self._mm(d.silu_and_mul(self._mm(h, ly.gate_up)), ly.down)
            else:
                probs = torch.softmax(self._mm(h, ly.router).float(), dim=-1)
                tw, ti = torch.topk(probs, self.cfg.top_k, dim=-1)
                tw = tw / tw.sum(dim=-1, keepdim=True)
                if self.deep:
                    deep = stock.deep_experts(h, ti.to(torch.int32), tw, ly.experts.stock)
        with r("collective"):
            if ly.experts is None:
                x.add_(d.all_reduce(part))
            elif self.deep:
                # the next layer's input norm (the final norm after the
                # last layer, whose out_norm the caller recomputes on the
                # rows it samples) rides in the same call
                last = li + 1 == self.cfg.num_layers
                nxt = self.w.final_norm if last else self.w.layers[li + 1].attn_norm
                h_next, x = d.moe_finalize_ar_rmsnorm(*deep, x, nxt, self.eps)
                self._carry = None if last else h_next
            else:
                x.add_(d.fused_experts_reduce(h, ti.to(torch.int32), tw, ly.experts))
        return x

    def final_norm(self, x):
        with self.timer.region("norm"):
            return self.d.rmsnorm(x, self.w.final_norm, self.eps)

    def logits(self, h):
        """Logits in the model dtype (sample() reads them in fp32)."""
        return torch.mm(h, self.w.lm_head.t())

    # -- prefill ------------------------------------------------------------

    def prefill(self, b):
        """Run a packed prefill batch; returns the last layer's hidden states
        (N, H) before the final norm."""
        n = b.ids.shape[0]
        self._carry = None
        with self.timer.region("other"):
            x = F.embedding(b.ids, self.w.embed)
        hq, hkv, hd = self.hq, self.hkv, self.hd
        need_kv = any(p == 0 for _s, _t, p, _g in b.segs)
        single = len(b.segs) == 1 and b.segs[0][2] == 0
        uniform = (not single and self.d.stock_only("attention.sdpa")
                   and all(p == 0 and t == b.segs[0][1] for _s, t, p, _g in b.segs)
                   and all(s == i * b.segs[0][1] for i, (s, _t, _p, _g) in enumerate(b.segs)))

        def attend(li, h, w_qkv):
            kc, vc = self.kc[li], self.vc[li]
            qkv = self._mm(h, w_qkv)
            q = torch.empty((n, hq, hd), dtype=qkv.dtype, device=qkv.device)
            k = v = None
            if need_kv:
                k = torch.empty((n, hkv, hd), dtype=qkv.dtype, device=qkv.device)
                v = torch.empty_like(k)
            stock.rope_store(qkv, b.positions, b.slots, self.cos, self.sin, q, kc, vc, hq, hkv, k, v)
            if self.msa is not None:
                return self.msa.prefill(li, h, self.w.layers[li].index, b, q, k, v, kc, vc, self.scale).view(n, hq * hd)
            if single:
                return self.d.sdpa(q, k, v, self.scale, True).view(n, hq * hd)
            if uniform:
                # Stock attention over equal fresh prompts: one batched
                # call instead of one per sequence (a candidate is still
                # called per sequence, as the slot ABI says).
                return self.d.sdpa_uniform_stock(q, k, v, self.scale, len(b.segs), b.segs[0][1]).view(n, hq * hd)
            out = torch.empty((n, hq, hd), dtype=qkv.dtype, device=qkv.device)
            for s, t, p, g in b.segs:
                if p == 0:
                    ks, vs = k[s:s + t], v[s:s + t]
                else:
                    ks = kc.view(-1, hkv, hd).index_select(0, g)
                    vs = vc.view(-1, hkv, hd).index_select(0, g)
                out[s:s + t].copy_(self.d.sdpa(q[s:s + t], ks, vs, self.scale, True))
            return out.view(n, hq * hd)

        for li in range(self.cfg.num_layers):
            x = self._layer(li, x, attend)
        return x

    # -- decode -------------------------------------------------------------

    def decode_step(self, st, bsz):
        r = self.timer.region
        self._carry = None
        ids, pos = st.ids[:bsz], st.positions[:bsz]
        bt, sl = st.block_table[:bsz], st.seq_lens[:bsz]
        hq, hkv, hd, ps = self.hq, self.hkv, self.hd, self.ps
        with r("other"):
            x = F.embedding(ids, self.w.embed)
            slots = None
            if not kernels.available(x):
                page = bt.gather(1, torch.div(pos, ps, rounding_mode="floor").unsqueeze(1)).squeeze(1)
                slots = page.long() * ps + torch.remainder(pos, ps)
            keys = None if self.msa is None else msa.key_slots(bt, sl, ps, static=x.is_cuda)

        def attend(li, h, w_qkv):
            kc, vc = self.kc[li], self.vc[li]
            q = torch.empty((bsz, hq, hd), dtype=h.dtype, device=h.device)
            if bsz == 1 and decode_gemm.gemv_ok(h, w_qkv) and kc.is_contiguous() and vc.is_contiguous():
                decode_gemm.qkv_rope(h, w_qkv, pos, bt, self.cos, self.sin, q, kc, vc, hq, hkv)
            else:
                qkv = self._mm(h, w_qkv)
                stock.rope_store(qkv, pos, slots, self.cos, self.sin, q, kc, vc, hq, hkv, block_table=bt)
            if self.msa is not None:
                return self.msa.decode(li, h, self.w.layers[li].index, q, kc, vc, keys, pos, sl,
                                       self.scale).view(bsz, hq * hd)
            return self.d.decode(q, kc, vc, bt, sl, self.scale).view(bsz, hq * hd)

        for li in range(self.cfg.num_layers):
            x = self._layer(li, x, attend)
        h = self.final_norm(x)
        with r("sampling"):
            if not decode_gemm.skinny_ok(h, self.w.lm_head):
                logits = torch.mm(h, self.w.lm_head.t())
            elif decode_gemm.SAMPLE_IN_GEMM:
                # 2..64 rows: the skinny GEMM (135 against cuBLAS's 140+ us
                # at 64 rows of Llama-1B's lm_head on the H200, and the PDL
                # chain stays unbroken) reduces its logits to sampling
                # partials instead of storing them.
                decode_gemm.lm_head_sample(h, self.w.lm_head, st.out_tok[:bsz], st.out_lp[:bsz], state=st)
                st.hist_ctr.add_(1)
                return
            else:
                logits = torch.empty((bsz, self.w.lm_head.shape[0]), dtype=h.dtype, device=h.device)
                decode_gemm.skinny(h, self.w.lm_head, logits)
            if kernels.available(logits):
                kernels.sample(logits, st.out_tok[:bsz], st.out_lp[:bsz], state=st)
                st.hist_ctr.add_(1)
                return
            tok, lp = sample(logits.float())
            st.out_tok[:bsz].copy_(tok)
            st.out_lp[:bsz].copy_(lp)
            st.hist_tok.index_copy_(0, st.hist_ctr, st.out_tok.unsqueeze(0))
            st.hist_lp.index_copy_(0, st.hist_ctr, st.out_lp.unsqueeze(0))
        with r("other"):
            st.hist_ctr.add_(1)
            ids.copy_(tok)
            act = st.active[:bsz]
            pos.add_(act)
            sl.add_(act)
