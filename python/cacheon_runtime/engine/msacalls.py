"""msacalls: the block-score slots of an msa model, as methods of
dispatch.Dispatch (a mixin, so that they go through the one ``_call``:
descriptor, selection, validator-owned outputs, poison, strict abort,
counters, audit). The runtime selects blocks from the sheets they fill
(msa.py); stock is stock.py's."""

import torch

from . import stock

MSA_DECODE = "attention.msa_block_score"
MSA_PREFILL = "attention.msa_prefill_block_score"
SLOTS = (MSA_DECODE, MSA_PREFILL)
ENTRIES = {MSA_DECODE: "msa_block_score", MSA_PREFILL: "msa_prefill_block_score"}
ORDER = {
    MSA_DECODE: ("q", "index_k", "seq_lens", "block_size", "out"),
    MSA_PREFILL: ("q", "index_k", "prefix_len", "scale", "block_size", "out"),
}
# The prefill sheet's row stride is padded to a multiple of ROW_PAD
# elements (one more than the row at least), as the slot contract says
# (internal/slot/catalog.go, RowPad): a kernel must honour out's stride.
ROW_PAD = 8


class OutShape:
    """An output that is not the call's input dtype or not contiguous:
    shape, dtype and strides (None: contiguous)."""
    __slots__ = ("shape", "dtype", "stride")

    def __init__(self, shape, dtype, stride=None):
        self.shape, self.dtype, self.stride = tuple(shape), dtype, stride


def padded_rows(rows, cols, dtype):
    """The OutShape of a (rows, cols) sheet whose row stride is padded."""
    return OutShape((rows, cols), dtype, (-(-(cols + 1) // ROW_PAD) * ROW_PAD, 1))


class MSACalls:
    """Needs the host class's ``_call`` and ``_desc`` (dispatch.Dispatch)."""

    def msa_block_score(self, q, index_k, seq_lens, block_size):
        """The decode score sheet (B, cdiv(S, block_size)) float32."""
        b, hq, d = q.shape
        s = index_k.shape[1]
        nb = -(-s // block_size)
        desc = self._desc(batch_size=b, num_heads=hq, seq_len=s, head_dim=d, block_size=block_size)
        return self._call(MSA_DECODE, desc, {"q": q, "index_k": index_k, "seq_lens": seq_lens},
                          {"block_size": int(block_size)}, {"out": OutShape((b, nb), torch.float32)},
                          lambda o: stock.msa_block_score(q, index_k, seq_lens, block_size, o["out"]))

    def msa_prefill_block_score(self, q, index_k, prefix_len, scale, block_size):
        """The prompt chunk's score sheet (T, cdiv(prefix_len+T, block_size))
        float32, row-strided."""
        t, d = q.shape
        s = index_k.shape[0]
        desc = self._desc(num_tokens=t, seq_len=s, head_dim=d, block_size=block_size)
        return self._call(MSA_PREFILL, desc, {"q": q, "index_k": index_k},
                          {"prefix_len": int(prefix_len), "scale": float(scale), "block_size": int(block_size)},
                          {"out": padded_rows(t, -(-s // block_size), torch.float32)},
                          lambda o: stock.msa_prefill_block_score(q, index_k, prefix_len, scale, block_size,
                                                                  o["out"]))
