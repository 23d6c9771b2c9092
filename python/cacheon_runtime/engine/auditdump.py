"""auditdump: the engine's audit dumps of sampled candidate calls.

A dump holds the call's inputs before and after it, its outputs (and the
MoE weights), and its scalars, as a safetensors file Go regrades with the
grader verify uses. Every value is read as raw bytes (rawmem), never
through a torch operator a mode or a registered kernel could rewrite. The
paged decode slot's caches are compacted to the pages the block table
references, and the block tables renumbered to match.
"""

import array
import os

import torch

from .. import stio
from ..wire import bad

# The most explicit audit positions one slot may be given (audit_calls).
MAX_CALLS = 4096


def parse_calls(calls, served, audit_dir):
    """The explicit audit positions of an audit_calls request: per slot (of
    served), a frozenset of selected-call numbers. The referee draws them
    after the warm-up over the timed waves it is about to run."""
    if not os.path.isabs(audit_dir):
        raise bad("audit_calls needs an engine loaded with an absolute audit.dir")
    if not isinstance(calls, dict):
        raise bad("audit_calls: calls must be an object of slot: [call numbers]")
    out = {}
    for slot, nums in calls.items():
        if slot not in served:
            raise bad("audit_calls: slot %r is not served here" % (slot,))
        if (not isinstance(nums, list) or len(nums) > MAX_CALLS
                or any(not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < 1 << 40 for n in nums)):
            raise bad("audit_calls: %s: want at most %d call numbers >= 0" % (slot, MAX_CALLS))
        out[slot] = frozenset(nums)
    return out


def write(raw, audit_dir, slot, variant, n_call, desc, inputs, before_in, pages, scalars, outs, experts, decode=False,
          tp=None):
    """Write one call's dump into audit_dir (created when missing). A
    tensor-parallel engine's dumps also name the rank and world size (the
    ranks dump the same calls, each into its own directory)."""
    tensors = dict(before_in)
    for n, t in inputs.items():
        tensors["in." + n] = _snap(raw, t, pages if n in _CACHES else None)
    for n, o in outs.items():
        tensors[n] = stio.raw(o.contract)
    if experts is not None:
        tensors["w13"], tensors["w2"] = stio.raw(experts.w13), stio.raw(experts.w2)
    if decode:
        _remap_tables(tensors, pages, inputs["k_cache"].shape[1])
    meta = {"slot": slot, "call": str(n_call), "variant": variant, "phase": desc["phase"],
            "graph_mode": desc["graph_mode"]}
    for k, v in scalars.items():
        meta["scalar." + k] = repr(v)
    if decode:
        meta["compacted"] = "pages"
    if tp is not None:
        meta["rank"], meta["world_size"] = str(tp[0]), str(tp[1])
    os.makedirs(audit_dir, exist_ok=True)
    stio.save(os.path.join(audit_dir, "%s-%d.safetensors" % (slot, n_call)), tensors, meta)


def snapshot_inputs(raw, inputs, pages=None):
    """Raw snapshots of a call's inputs before it (decode caches: only the
    pages in `pages`)."""
    return {n: _snap(raw, t, pages if n in _CACHES else None) for n, t in inputs.items()}


_CACHES = ("k_cache", "v_cache")


def _snap(raw, t, pages=None):
    """A raw snapshot (stio.RawTensor) of an input for an audit dump (decode
    caches: only the pages in `pages`, in that order)."""
    if pages is None:
        return stio.raw(t)
    dt, shape = raw.dtype_shape(t)
    return stio.RawTensor(dt, [len(pages)] + shape[1:], raw.read_rows(t, pages))


def _ints(rt):
    """The values of an int32/int64 RawTensor as a flat array (row-major)."""
    a = array.array({torch.int32: "i", torch.int64: "q"}[rt.dtype])
    a.frombytes(rt.data)
    return a


def used_pages(raw, inputs):
    """Sorted page ids the block table references within seq_lens."""
    bt_rt, sl_rt = stio.raw(inputs["block_table"]), stio.raw(inputs["seq_lens"])
    bt, sl = _ints(bt_rt), _ints(sl_rt)
    rows, width = bt_rt.shape
    _d, kshape = raw.dtype_shape(inputs["k_cache"])
    npages, ps = kshape[0], kshape[1]
    used = set()
    for b in range(rows):
        n = max(0, min(-(-int(sl[b]) // ps), width))
        used.update(int(p) for p in bt[b * width:b * width + n] if 0 <= p < npages)
    return sorted(used) or [0]


def _remap_tables(tensors, pages, ps):
    """Rewrite block tables to the compacted page numbering (ascending page
    order; entries past a row's seq_len become 0)."""
    remap = {int(p): i for i, p in enumerate(pages)}
    for key, lens in (("block_table", "seq_lens"), ("in.block_table", "in.seq_lens")):
        bt_rt, sl = tensors[key], _ints(tensors[lens])
        bt = _ints(bt_rt)
        rows, width = bt_rt.shape
        new = array.array(bt.typecode, bytes(len(bt_rt.data)))
        for b in range(rows):
            n = max(0, min(-(-int(sl[b]) // ps), width))
            for j in range(n):
                new[b * width + j] = remap.get(int(bt[b * width + j]), 0)
        tensors[key] = stio.RawTensor(bt_rt.dtype, bt_rt.shape, new.tobytes())
