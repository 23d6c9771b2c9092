"""auditsites: the referee's audit of candidate calls replayed from CUDA
graphs (a mixin of dispatch.Dispatch, beside auditcalls).

A graph replays the kernels its capture recorded; the host never sees the
calls again, and a kernel that behaves one way while it is being captured
(or from its n-th capture on) and another when called eagerly would show
an eager audit only its eager behaviour. With ``audit.graph`` the audit
engine captures, at every candidate call of a graph, copies of the call's
inputs before it, of its outputs and of its inputs after it into buffers
of its own (a *site*). The copies run in every replay. A position the
referee drew (audit_calls) that falls inside a replay is dumped from its
site's buffers right after that replay, in the same format as an eager
dump (auditdump.write), so Go regrades replayed calls exactly as eager
ones.

Positions number a slot's selected calls as the engine counts them
(``counts[slot]["selected"]``): a replay adds its capture's selected calls
in capture order, which is the order of the sites.

The paged decode caches are too large for a copy per site. Each cache
tensor has one *shadow* of its size instead, shared by the sites of every
graph: a site copies the cache into it right before the call. A replay
makes one call per layer (a capture that passes one cache to several
calls gets a shadow per call), so a layer's shadow still holds what its
call read when the replay ends, and the cache itself what the call left (the
engine writes a layer's new keys and values before its call). The dump
takes the referenced pages before the call from the shadow and after it
from the cache, as an eager dump does, so a candidate that writes into a
decode cache during a replayed call fails Go's input check. The MoE
weights are not copied: a candidate gets copies of them at load and never
the validator's own.
"""

import torch

from .. import wire
from . import auditdump, enginestate, harness

# Inputs read live after the replay, their state before it kept in a
# shadow (see above).
_LIVE = ("k_cache", "v_cache")


class _Out:
    """An output as auditdump.write reads it (.contract)."""

    def __init__(self, t):
        self.contract = t


class Site:
    """One candidate call captured into a graph, with its copies."""

    def __init__(self, slot, variant, desc, scalars, experts, decode):
        self.slot, self.variant, self.desc = slot, variant, dict(desc)
        self.scalars, self.experts, self.decode = dict(scalars), experts, decode
        self.live, self.pre, self.post, self.outs = {}, {}, {}, {}


class AuditSites:
    """The graph audit state of a Dispatch: needs self.ops, self.raw,
    self.counts, self.capture_log, self.audit_calls, self.audit_dir,
    self.auditing, self.audit_dumps, self._rule_pick (auditcalls),
    self.engine_state, self.device and self._count."""

    def _init_sites(self, audit):
        """Parse the load's audit.graph (a bool; anything else is the
        request's error)."""
        self.graph_audit = wire.field(audit or {}, "graph", bool, False, required=False)
        self.capture_sites = None
        self.cache_shadows, self.capture_shadow_uses = {}, {}

    def begin_sites(self):
        """A capture begins: its sites are collected until end_sites."""
        self.capture_sites = {} if self.graph_audit else None
        self.capture_shadow_uses = {}

    def end_sites(self, log):
        """The capture ended: its sites go with its log (log.sites)."""
        log = CaptureLog(log)
        log.sites, self.capture_sites = self.capture_sites or {}, None
        return log

    def site_before(self, slot, var, desc, inputs, scalars, experts, decode):
        """At a candidate call being captured (graph audit only): a site
        whose input copies are captured now, before the call; None when no
        site is kept."""
        if self.capture_sites is None:
            return None
        index = self.capture_log[slot]["selected"] - 1
        s = Site(slot, var.name, desc, scalars, experts, decode)
        for n, t in inputs.items():
            if n in _LIVE:
                s.live[n] = t
                s.pre[n] = self._shadow_copy(t)
            else:
                s.pre[n] = self._site_copy(t)
        self.capture_sites.setdefault(slot, {})[index] = s
        return s

    def site_after(self, site, inputs, outs):
        """Right after the captured call: copies of its outputs and of its
        inputs as they are then."""
        for n, t in inputs.items():
            if n not in _LIVE:
                site.post[n] = self._site_copy(t)
        for n, o in outs.items():
            site.outs[n] = _Out(self._site_copy(o.contract))

    def _site_copy(self, t):
        ops = self.ops
        c = ops.empty(list(ops.size(t)), dtype=ops.dtype_of(t), device=ops.device_of(t))
        ops.copy(c, t)
        return c

    def _shadow_copy(self, t):
        """Copy a decode cache into its shadow (made at its first site). A
        capture that passes one cache to several calls gets a shadow per
        call, so that each still holds its call's state after the replay."""
        ops = self.ops
        key = (ops.data_ptr(t), tuple(ops.size(t)), ops.dtype_of(t))
        nth = self.capture_shadow_uses.get(key, 0)
        self.capture_shadow_uses[key] = nth + 1
        key += (nth,)
        c = self.cache_shadows.get(key)
        if c is None:
            c = self.cache_shadows[key] = ops.empty(list(key[1]), dtype=key[2], device=ops.device_of(t))
        ops.copy(c, t)
        return c

    def replay_plan(self, log):
        """Before a replay of the graph whose capture produced log (its
        counts not added yet): the calls it will make that are dumped, as
        (site, position) pairs: the positions the referee drew
        (audit_calls), and those the every and share rules pick, drawn
        per replayed call as for an eager one (verify's served stage)."""
        sites = getattr(log, "sites", None)
        if not sites or not (self.audit_calls or self.auditing):
            return []
        out = []
        for slot, by_index in sites.items():
            base = self.counts[slot]["selected"]
            drawn = self.audit_calls.get(slot, ())
            for pos in range(base, base + log[slot]["selected"]):
                explicit = pos in drawn
                if not (explicit or self._rule_pick(pos)):
                    continue
                site = by_index.get(pos - base)
                if site is None:
                    continue  # (not dumped: the referee's check names it)
                if not explicit:
                    self.audit_dumps += 1
                out.append((site, pos))
        return out

    def replayed(self, planned, before=None, written=None):
        """After the replay: compare the engine state with before, a copy
        taken before the replay (enginestate; written: the step's own
        slots), and dump the planned calls from their sites. A change is
        the candidate's abort: nothing falls back inside a replay."""
        if not planned:
            return
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        problem = enginestate.changed(before, self.engine_state, written, "the replayed calls")
        if problem:
            site = planned[0][0]
            raise harness.CandidateAbort(site.slot, site.variant, problem)
        for site, pos in planned:
            self._dump_site(site, pos)

    def _dump_site(self, site, n_call):
        inputs = dict(site.post, **site.live)
        before = site.pre
        pages = auditdump.used_pages(self.raw, inputs) if site.decode else None
        before_in = auditdump.snapshot_inputs(self.raw, before, pages)
        auditdump.write(self.raw, self.audit_dir, site.slot, site.variant, n_call, site.desc, inputs, before_in,
                        pages, site.scalars, site.outs, site.experts, decode=site.decode,
                        tp=(self.rank, self.world_size) if self.world_size > 1 else None)
        self.counts[site.slot]["audited"] += 1


class CaptureLog(dict):
    """A capture's counts per slot (a dict, as the runner adds it per
    replay) and its audit sites (.sites: slot -> capture index -> Site)."""

    sites = None


__all__ = ["AuditSites", "CaptureLog", "Site"]
