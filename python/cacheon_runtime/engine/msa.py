"""msa: block-sparse attention of the msa model kind, the validator's side.

Each layer of an msa model has an indexer: one projection of the layer's
normed input to ``index_heads`` query heads of ``index_head_dim`` and one
index key per token, both rotated by the token's position (rotary
embedding over index_head_dim, as the model's heads), so that a repeated
token does not repeat its key. Index keys live in an index cache paged like K/V (the
same page and slot numbers). Keys are grouped in blocks of
``msa_block_size`` positions; what a candidate may replace is the scoring of
those blocks, and nothing else:

- prompts: ``attention.msa_prefill_block_score(q (T,Di), index_k (P+T,Di),
  prefix_len, scale, block_size)`` -> a (T, nb) float32 score sheet with a
  padded row stride, q being the sum of the index heads, once per prompt
  chunk;
- decode steps: ``attention.msa_block_score(q (B,Hi,Di), index_k (B,S,1,Di),
  seq_lens, block_size)`` -> a (B, nb) float32 sheet (the slot sums the
  heads itself), index_k gathered from the cache for key positions 0..S-1.

The runtime owns the rest: every query attends to the ``msa_topk`` blocks of
highest score in its row, its own block (the one holding its position)
always among them whatever its score, NaN scores counting as -inf and
equal scores going to the lower block (a stable sort); inside the
selected blocks it sees the keys the causal mask allows. A score sheet
therefore chooses keys but never adds one a query may not see, and the
query's own block keeps at least one key. The attention itself (gather,
masked softmax in float32) is validator code here. Nothing synchronises
with the host on CUDA (static shapes), so decode steps capture into graphs.
"""

import torch

from .config import attention_scale

NEG_INF = float("-inf")


def key_slots(block_table, seq_lens, page_size, static):
    """(B, S) flat cache slots of key positions 0..S-1 of each row, S a
    whole number of pages: all of the block table's pages when static (CUDA
    graphs), else the pages the longest row needs."""
    b, maxp = block_table.shape
    width = maxp
    if not static:
        width = max(1, min(-(-int(seq_lens.max()) // page_size), maxp)) if b else 1
    pages = block_table[:, :width].long()
    lanes = torch.arange(page_size, device=block_table.device)
    return (pages[:, :, None] * page_size + lanes).reshape(b, width * page_size)


class Sparse:
    """The indexer, selection and sparse attention of one msa model."""

    def __init__(self, cfg, dispatch, index_cache, mm, rope):
        self.hi, self.di = cfg.index_heads, cfg.index_head_dim
        self.bs, self.topk = cfg.msa_block_size, cfg.msa_topk
        self.scale = attention_scale(self.di)
        self.d, self.ic, self.mm = dispatch, index_cache, mm
        self.cos, self.sin = rope  # (max_position, Di/2) float32

    def _index(self, h, w, positions):
        """(iq (N,Hi,Di), ik (N,Di)), rotated by positions (N,), both
        contiguous, of the normed input."""
        n, q = h.shape[0], self.hi * self.di
        y = self.mm(h, w).float()
        c, s = self.cos.index_select(0, positions), self.sin.index_select(0, positions)
        y = _rotate(y.view(n, self.hi + 1, self.di), c[:, None, :], s[:, None, :]).to(h.dtype)
        return y[:, :self.hi].contiguous(), y[:, self.hi].contiguous()

    def select(self, sheet, own):
        """(R, nb) bool: the blocks each row attends to, from a score sheet
        (R, nb) (any stride, read only) and each row's own block (R,)."""
        s = sheet.float()
        nb = s.shape[1]
        own = own.long().clamp(0, nb - 1)[:, None]
        # the own block is taken first; the best msa_topk - 1 of the others
        # (NaN as -inf, ties to the lower block) join it
        s = torch.where(torch.isnan(s), torch.full_like(s, NEG_INF), s).scatter(1, own, NEG_INF)
        top = torch.sort(s, dim=1, descending=True, stable=True).indices[:, :min(self.topk, nb) - 1]
        return torch.zeros(s.shape, dtype=torch.bool, device=s.device).scatter_(1, top, True).scatter_(1, own, True)

    def _allowed(self, blocks, n_keys, last):
        """(R, n_keys) bool: key s is read when its block is selected and
        s <= last[r] (the row's last visible position)."""
        keys = torch.arange(n_keys, device=blocks.device)
        return blocks.index_select(1, torch.div(keys, self.bs, rounding_mode="floor")) & (keys[None, :] <= last[:, None])

    # -- decode ---------------------------------------------------------------

    def decode(self, li, h, w, q, kc, vc, keys, positions, seq_lens, sm_scale):
        """Attention of a decode step: q (B,Hq,D) with the step's K/V already
        in the cache; keys (B,S) from key_slots. Returns (B,Hq,D)."""
        b, s = keys.shape
        pos = positions.long()
        iq, ik = self._index(h, w, pos)
        icf = self.ic[li].view(-1, self.di)
        icf.index_copy_(0, keys.gather(1, pos[:, None]).squeeze(1), ik)
        index_k = icf.index_select(0, keys.reshape(-1)).view(b, s, 1, self.di)
        sheet = self.d.msa_block_score(iq, index_k, seq_lens, self.bs)
        own = torch.div(pos, self.bs, rounding_mode="floor")
        allowed = self._allowed(self.select(sheet, own), s, seq_lens.long() - 1)
        _p, _ps, hkv, hd = kc.shape
        k = kc.view(-1, hkv, hd).index_select(0, keys.reshape(-1)).view(b, s, hkv, hd)
        v = vc.view(-1, hkv, hd).index_select(0, keys.reshape(-1)).view(b, s, hkv, hd)
        hq = q.shape[1]
        qf = q.float().reshape(b, hkv, hq // hkv, hd)
        scores = torch.einsum("bhgd,bshd->bhgs", qf, k.float()) * sm_scale
        p = torch.softmax(scores.masked_fill(~allowed[:, None, None, :], NEG_INF), dim=-1)
        return torch.einsum("bhgs,bshd->bhgd", p, v.float()).reshape(b, hq, hd).to(q.dtype)

    # -- prefill --------------------------------------------------------------

    def prefill(self, li, h, w, batch, q, k, v, kc, vc, sm_scale):
        """Attention of a packed prefill batch (model.PrefillBatch) whose K/V
        are in the cache (k, v: the fresh rows, for segments without a
        prefix). One score call per segment. Returns (N,Hq,D)."""
        iq, ik = self._index(h, w, batch.positions.long())
        icf = self.ic[li].view(-1, self.di)
        icf.index_copy_(0, batch.slots, ik)
        qsum = iq.float().sum(dim=1).to(h.dtype)
        _p, _ps, hkv, hd = kc.shape
        out = torch.empty_like(q)
        for s0, t, p, g in batch.segs:
            if p == 0:
                idx, ks, vs = ik[s0:s0 + t], k[s0:s0 + t], v[s0:s0 + t]
            else:
                idx = icf.index_select(0, g)
                ks = kc.view(-1, hkv, hd).index_select(0, g)
                vs = vc.view(-1, hkv, hd).index_select(0, g)
            sheet = self.d.msa_prefill_block_score(qsum[s0:s0 + t], idx, p, self.scale, self.bs)
            rows = torch.arange(t, device=q.device) + p
            allowed = self._allowed(self.select(sheet, torch.div(rows, self.bs, rounding_mode="floor")), p + t, rows)
            hq = q.shape[1]
            qf = q[s0:s0 + t].float().reshape(t, hkv, hq // hkv, hd)
            scores = torch.einsum("thgd,shd->hgts", qf, ks.float()) * sm_scale
            pr = torch.softmax(scores.masked_fill(~allowed[None, None], NEG_INF), dim=-1)
            o = torch.einsum("hgts,shd->thgd", pr, vs.float()).reshape(t, hq, hd)
            out[s0:s0 + t].copy_(o)
        return out


def _rotate(x, cos, sin):
    """Rotary embedding of x (..., D) (halves rotated as the model's heads)."""
    d = x.shape[-1] // 2
    x1, x2 = x[..., :d], x[..., d:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
