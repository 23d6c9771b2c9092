"""scoring: teacher-forced scoring of whole sequences (the ``score`` request).

The pristine engine T uses it to give the negative log-likelihood of every
token a timed engine generated; Go decides what the numbers mean. Scoring
runs eager prefill forwards over the sequences, as many at once as the KV
page pool holds, and reads the logits of each scored position only.
"""

import math

import torch

from .. import wire
from ..wire import bad, field


# JSON has no NaN or infinity. A non-finite logprob is reported as +1.0 and a
# non-finite NLL as -1.0: values no valid run produces, which Go's range
# checks (logprob <= 0, nll >= 0) reject.
BAD_LOGPROB, BAD_NLL = 1.0, -1.0


def finite(v, bad):
    return v if math.isfinite(v) else bad


def finite_list(vals, bad):
    """vals, with non-finite entries replaced by bad (a copy only when needed)."""
    if all(map(math.isfinite, vals)):
        return vals
    return [finite(x, bad) for x in vals]


class Scoring:
    """The score request, mixed into runner.Engine (which provides the model,
    the page pool, dispatch, the timer and the packed forwards)."""

    def score(self, req):
        seqs = field(req, "sequences", list)
        froms = field(req, "from", list, None, required=False)
        if froms is not None and len(froms) != len(seqs):
            raise bad("from has %d entries for %d sequences" % (len(froms), len(seqs)))
        ps, v = self.ecfg.page_size, self.mcfg.vocab_size
        limit = self.ecfg.max_pages_per_seq * ps
        items = []
        for j, s in enumerate(seqs):
            wire.int_list(s, "sequences[%d]" % j)
            k = froms[j] if froms is not None else 1
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise bad("from[%d] must be an integer >= 1" % j)
            if s and max(s) >= v:
                raise bad("sequences[%d] has a token outside the vocabulary (%d)" % (j, v))
            if len(s) > limit or -(-len(s) // ps) > self.pool.total:
                raise bad("sequences[%d] is longer than the engine holds" % j)
            items.append((s, k))
        out = [[] for _ in items]
        with torch.no_grad():
            self.d.set_mode("prefill", False)
            self.timer.phase = "prefill"
            i = 0
            while i < len(items):
                group, pages = [], []
                while i < len(items) and self.pool.can(-(-len(items[i][0]) // ps)):
                    pages.append(self.pool.alloc(-(-len(items[i][0]) // ps)))
                    group.append(i)
                    i += 1
                try:
                    self._score_group([items[g] for g in group], pages, [out[g] for g in group])
                finally:
                    for p in pages:
                        self.pool.release(p)
        self.timer.collect()
        self.d.check_process()
        return {"nll": [finite_list(o, BAD_NLL) for o in out]}

    def _score_group(self, items, pages, outs):
        parts = [[] for _ in items]
        for x, segs in self._forwards([(s, p) for (s, _k), p in zip(items, pages)]):
            rows, targets, owner = [], [], []
            for j, s0, t, off in segs:
                toks, k = items[j]
                for p in range(max(s0, k - 1), min(s0 + t, len(toks) - 1)):
                    rows.append(off + p - s0)
                    targets.append(toks[p + 1])
                    owner.append(j)
            for c in range(0, len(rows), 256):
                r_idx = self._dev(rows[c:c + 256])
                h = self.model.final_norm(x.index_select(0, r_idx))
                logits = self.model.logits(h).float()
                tgt = self._dev(targets[c:c + 256]).unsqueeze(1)
                nll = torch.logsumexp(logits, dim=-1) - logits.gather(1, tgt).squeeze(1)
                vals = nll.tolist()
                for o, val in zip(owner[c:c + 256], vals):
                    parts[o].append(val)
        for o, p in zip(outs, parts):
            o.extend(p)
