"""capability: a candidate variant's capability domain, the canonical form
of internal/capability.Domain.

A domain is a conjunction of per-field predicates over a live call
descriptor: numeric fields (NUMERIC_FIELDS) take ``{"one_of": [ints]}`` or
``{"min": N, "max": N}``, context fields (CONTEXT_FIELDS) take
``{"one_of": [strings]}``; the vocabulary is closed. ``graph_safe: false``
keeps the variant out of CUDA graphs. Dispatch selects the first variant of
a slot whose domain admits the descriptor.
"""

from ..wire import bad

NUMERIC_FIELDS = frozenset((
    "num_tokens", "hidden_dim", "intermediate_dim", "head_dim", "num_heads", "num_kv_heads",
    "seq_len", "block_size", "page_size", "batch_size", "num_experts", "top_k", "world_size",
    "last_dim"))
CONTEXT_FIELDS = frozenset(("dtype", "architecture", "graph_mode", "phase", "quant", "model", "device"))


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


class Domain:
    """Conjunction of per-field predicates; a field the descriptor lacks is
    a mismatch, never a wildcard (as capability.Domain.Match)."""

    def __init__(self, preds, graph_safe):
        self.preds, self.graph_safe = preds, graph_safe

    @classmethod
    def parse(cls, obj):
        if obj is None:
            return cls({}, None)
        if not isinstance(obj, dict) or not set(obj) <= {"capabilities", "graph_safe"}:
            raise bad("domain must be {\"capabilities\": {...}, \"graph_safe\": bool}")
        gs = obj.get("graph_safe")
        if gs is not None and not isinstance(gs, bool):
            raise bad("domain graph_safe must be a boolean")
        caps = obj.get("capabilities", {})
        if not isinstance(caps, dict):
            raise bad("domain capabilities must be an object")
        preds = {}
        for f, p in caps.items():
            numeric = f in NUMERIC_FIELDS
            if not numeric and f not in CONTEXT_FIELDS:
                raise bad("domain: unknown capability field %r (the vocabulary is closed)" % (f,))
            if not isinstance(p, dict) or not p or not (set(p) == {"one_of"} or set(p) <= {"min", "max"}):
                raise bad("domain field %s: want {\"one_of\": [...]} or {\"min\": N, \"max\": N}" % f)
            if "one_of" in p:
                vals = p["one_of"]
                ok = isinstance(vals, list) and all(_is_int(v) if numeric else isinstance(v, str)
                                                    for v in vals)
                if not ok:
                    raise bad("domain field %s: one_of must list %s" % (f, "integers" if numeric else "strings"))
                preds[f] = ("set", frozenset(vals))
            else:
                if not numeric or not all(_is_int(v) for v in p.values()):
                    raise bad("domain field %s: min/max need a numeric field and integers" % f)
                preds[f] = ("range", p.get("min"), p.get("max"))
        return cls(preds, gs)

    def match(self, desc):
        """(ok, reason) for a descriptor (field -> int or canonical str)."""
        problems = []
        for f in sorted(self.preds):
            p = self.preds[f]
            if f not in desc:
                problems.append("%s: descriptor lacks the field" % f)
                continue
            v = desc[f]
            if p[0] == "set":
                ok = v in p[1]
            else:
                ok = _is_int(v) and (p[1] is None or v >= p[1]) and (p[2] is None or v <= p[2])
            if not ok:
                problems.append("%s: %r is outside the domain" % (f, v))
        return (not problems), "; ".join(problems)
