"""batching: the host-side bookkeeping of continuous batching.

PagePool hands out KV cache pages (page 0 is the scratch page of padding
rows); ForwardPacker builds the ids, positions and cache slots of packed
prefill forwards; Request is one parsed generation request and its
running state (pages, tokens, logprobs, cache length). The scheduler that
uses them is in runner.py.
"""

import torch

from .. import wire
from ..wire import bad, field


class PagePool:
    """KV pages 1..P-1 (page 0 is the scratch page of padding rows)."""

    def __init__(self, num_pages):
        self.total = num_pages - 1
        self.free = list(range(num_pages - 1, 0, -1))

    def can(self, n):
        return n <= len(self.free)

    def alloc(self, n):
        out = [self.free.pop() for _ in range(n)]
        return out

    def release(self, pages):
        self.free.extend(reversed(pages))


class ForwardPacker:
    """Host tensors of packed prefill forwards over seqs [(tokens, pages)]:
    every sequence's tokens in one flat tensor and its pages in one padded
    table, built once, so a forward's ids, positions and cache slots take a
    fixed number of tensor ops however many sequences it packs (with a few
    ops per sequence, a batch-64 prefill's host work before its first
    kernel took ~3.4 ms under torch.profiler on the H200 host)."""

    def __init__(self, seqs, page_size):
        self.ps = page_size
        lens = [len(t) for t, _p in seqs]
        self.tokens = torch.tensor([x for t, _p in seqs for x in t], dtype=torch.long)
        self.first = torch.tensor([0] + lens[:-1], dtype=torch.long).cumsum(0) if seqs else torch.zeros(0, dtype=torch.long)
        width = max([len(p) for _t, p in seqs] + [1])
        self.pages = torch.tensor([p + [0] * (width - len(p)) for _t, p in seqs], dtype=torch.long).view(len(seqs), width)

    def pack(self, segs):
        """(3, N) ids, positions and flat cache slots of segs [(j, start,
        length, offset)], laid out in segs order."""
        lengths = [t for _j, _s, t, _o in segs]
        n = sum(lengths)
        # seg[i]: the segment of packed row i (a cumulative sum of marks at
        # the segments' starts; repeat_interleave would wake the intra-op
        # thread pool)
        starts = torch.tensor([0] + lengths[:-1], dtype=torch.long).cumsum(0)
        marks = torch.zeros(n, dtype=torch.long)
        marks[starts[1:]] = 1
        seg = marks.cumsum(0)
        pos = torch.tensor([s0 for _j, s0, _t, _o in segs], dtype=torch.long)[seg] + torch.arange(n) - starts[seg]
        j = torch.tensor([j for j, _s, _t, _o in segs], dtype=torch.long)[seg]
        ids = self.tokens[self.first[j] + pos]
        slots = self.pages[j, torch.div(pos, self.ps, rounding_mode="floor")] * self.ps + torch.remainder(pos, self.ps)
        return torch.stack([ids, pos, slots])

    def slots(self, j, lo, hi):
        """Flat cache slots of sequence j's positions lo..hi-1."""
        p = torch.arange(lo, hi, dtype=torch.long)
        return self.pages[j, torch.div(p, self.ps, rounding_mode="floor")] * self.ps + torch.remainder(p, self.ps)


class Request:
    __slots__ = ("rid", "prompt", "max_new", "ignore_eos", "arrival", "index", "pages", "tokens",
                 "logprobs", "generated", "cache_len", "eos", "src")

    def __init__(self, index, obj, arrival):
        if not isinstance(obj, dict):
            raise bad("requests[%d] must be an object" % index)
        self.index = index
        self.rid = field(obj, "rid", str)
        self.prompt = wire.int_list(field(obj, "prompt", list), "requests[%d].prompt" % index)
        self.max_new = field(obj, "max_new_tokens", int)
        self.ignore_eos = field(obj, "ignore_eos", bool, False, required=False)
        self.arrival = arrival
        self.pages = []
        self.tokens, self.logprobs = [], []
        self.generated = 0
        self.cache_len = 0
        self.eos = False
        self.src = None
