"""dispatch: the only way the engine's data plane reaches a slot.

For every call the model makes (rmsnorm, silu_and_mul, prefill attention,
paged decode attention, MoE experts; on a tensor-parallel engine also the
collective slots, collectives.py) dispatch

1. builds the live call descriptor from the tensors (capability fields of
   the slot plus the context: device, dtype, model, architecture, phase,
   graph_mode);
2. decides eligibility *before* selection: the first candidate variant of
   the slot whose capability domain admits the descriptor is selected; a
   slot without candidates runs stock (counted ``stock``), a call no
   variant admits runs stock (counted ``ineligible``, never a firing);
3. allocates the outputs itself with the verify output contract
   (contiguous, 16-byte aligned: host.alloc_output), poisons them as verify
   does (NaN for floats, raw memory: rawmem) in every call, hands the
   candidate separate tensor objects (views) of inputs and outputs (of
   the small inputs that outlive the call, KEPT, a copy of its own), calls
   the entry (under no_grad, one intra-op thread: guard.same_conditions);
   the referee's target slot (poison) gets the same outputs and host work
   in its stock calls too (harness.py);
4. revalidates output identity and layout after the call (data pointer,
   storage, offset, shape, stride, dtype, device of the view it handed out,
   and the address of the allocation itself);
5. on a failure after selection (exception, identity/layout violation,
   failed prepare): strict mode raises CandidateAbort (the engine aborts);
   non-strict mode runs stock into fresh outputs and records a fallback
   receipt;
6. counts per slot: selected, completed, fallback, ineligible, audited,
   stock; while a CUDA graph is being captured the counts go to a capture
   log that the runner adds once per replay;
7. in audit mode samples selected calls (the referee's drawn positions,
   every Nth, a seeded random share) and writes their inputs (before and
   after the call) and outputs as safetensors for Go to regrade, read as
   raw bytes; with ``audit.graph`` also calls replayed from CUDA graphs,
   through copies captured beside them (auditsites);
8. around every candidate call asks the runtime guard (guard.Guard.quick:
   modes, tensor types, audit-hook refusals) whether the candidate changed
   how torch runs, and after the load and every request the full check
   (replaced functions, dispatch tables): a finding aborts the engine
   (CandidateAbort, strict or not: a tampered process has no trustworthy
   stock to fall back on).

Candidate modules are imported with host.Loader (the verify worker's
loader), outputs allocated with the verify output contract
(host.output_spec, host.alloc_output) and dumps written by auditdump (stio): nothing
here re-implements them.
"""

import os
import random

import torch

from .. import argplan, guard as guard_mod, host, identity, wire
from ..wire import Failure, bad
from . import auditcalls, auditdump, auditsites, bundlens, collectives, enginestate, harness, msacalls, stock
from .capability import Domain
from .timing import NullTimer

ALIGNMENT = 16

# Where per-call copies sit in their allocation (host.placed_like).
_PLACE = random.SystemRandom()

SILU = "activation.silu_and_mul"
RMSNORM = "norm.rmsnorm"
SDPA = "attention.sdpa"
DECODE = "attention.decode"
MOE = "moe.fused_experts"
SLOTS = (SILU, DECODE, SDPA, MOE, RMSNORM)
# The collective slots, served when the engine runs tensor parallel (a
# process group of more than one rank): every cross-rank reduction of the
# model goes through one of them.
ALL_REDUCE, AR_RMSNORM, MOE_REDUCE = collectives.ALL_REDUCE, collectives.AR_RMSNORM, collectives.MOE_REDUCE
MOE_FINALIZE = collectives.MOE_FINALIZE
COLLECTIVES = (ALL_REDUCE, AR_RMSNORM, MOE_REDUCE, MOE_FINALIZE)
ENTRIES = {SILU: "silu_and_mul", RMSNORM: "rmsnorm", SDPA: "attention",
           DECODE: "attention_decode", MOE: "fused_experts",
           ALL_REDUCE: "all_reduce", AR_RMSNORM: "ar_residual_rmsnorm", MOE_REDUCE: "fused_experts_reduce",
           MOE_FINALIZE: "moe_finalize_ar_rmsnorm", **msacalls.ENTRIES}
PREPARED = (MOE, MOE_REDUCE)  # slots whose entry takes a prepared state (prepare at load)
# Positional ABI of each entry (internal/slot/catalog.go).
ORDER = {
    SILU: ("x", "out"),
    RMSNORM: ("x", "weight", "out", "eps"),
    SDPA: ("q", "k", "v", "out", "sm_scale", "causal"),
    DECODE: ("q", "k_cache", "v_cache", "block_table", "seq_lens", "sm_scale", "out"),
    MOE: ("x", "topk_ids", "topk_weights", "prepared", "out"),
    ALL_REDUCE: ("x", "out", "group"),
    AR_RMSNORM: ("x", "residual", "weight", "eps", "out_norm", "out_residual", "group"),
    MOE_REDUCE: ("x", "topk_ids", "topk_weights", "prepared", "out", "group"),
    MOE_FINALIZE: ("gemm_out", "row_map", "scales", "residual", "weight", "eps", "out_norm", "out_residual", "group"),
    **msacalls.ORDER,
}
# The block-score slots, served when the model is of kind msa (msa.py).
MSA_SLOTS = msacalls.SLOTS
COUNTERS = ("selected", "completed", "fallback", "ineligible", "audited", "stock")
# Small inputs that outlive the call (a layer's norm weight, the decode
# state's block table and lengths): a candidate gets its own copy of them
# in every call, so that one it kept (verify refuses that, but a kernel
# may behave differently when served) cannot be written to in a later call.
# The residual stream and the KV caches are too large to copy per call.
KEPT = {RMSNORM: ("weight",), AR_RMSNORM: ("weight",), MOE_FINALIZE: ("weight",),
        DECODE: ("block_table", "seq_lens"), msacalls.MSA_DECODE: ("seq_lens",)}
# Inputs handed as a view of one sequence's rows of a packed prefill
# batch: a candidate gets its own copy, so that a write past its view (into
# the next sequences' queries, keys or values, which it would then be
# handed, exact on what it had made of them) reaches nothing the engine
# reads.
PACKED = {SDPA: ("q", "k", "v"), msacalls.MSA_PREFILL: ("q", "index_k")}
MAX_RECEIPTS = 256


CandidateAbort = harness.CandidateAbort


# ---------------------------------------------------------------------------
# Stack rows


# Load failures of a candidate itself (not of the request), which
# non-strict mode turns into a stock slot with a receipt.
LOAD_FAILURES = ("import_error", "missing_entry")


class Variant:
    """One candidate implementation of a slot, loaded from its bundle."""

    def __init__(self, slot, index, row, loader, module_ids):
        if not isinstance(row, dict):
            raise bad("stack[%s] rows must be objects" % slot)
        self.slot, self.index = slot, index
        self.bundle = wire.field(row, "bundle", str)
        self.source = wire.field(row, "source", str)
        self.entry_name = wire.field(row, "entry", str, ENTRIES[slot], required=False) or ENTRIES[slot]
        self.prepare_name = wire.field(row, "prepare", str, "", required=False)
        self.name = wire.field(row, "variant", str, "default", required=False) or "default"
        self.domain = Domain.parse(row.get("domain"))
        if slot in PREPARED and not self.prepare_name:
            raise bad("stack[%s]: %s needs a prepare callable" % (slot, slot))
        if slot not in PREPARED and self.prepare_name:
            raise bad("stack[%s]: slot %s has no prepare" % (slot, slot))
        key = (self.bundle, self.source)
        mid = module_ids.setdefault(key, "m%d" % len(module_ids))
        mod = loader.load(mid, self.bundle, self.source, self.entry_name, self.prepare_name)
        self.entry = loader.lookup(mod, self.entry_name, "entry")
        self.prepare = loader.lookup(mod, self.prepare_name, "prepare") if self.prepare_name else None


class Experts:
    """A MoE layer's expert weights as dispatch holds them: the validator's
    tensors, stock's prepared state and each variant's prepared state (None
    where its prepare failed in non-strict mode)."""

    def __init__(self, w13, w2, stock_prepared):
        self.w13, self.w2, self.stock = w13, w2, stock_prepared
        self.cand = {}


# ---------------------------------------------------------------------------
# Dispatch


class Dispatch(collectives.CollectiveCalls, msacalls.MSACalls, auditcalls.AuditCalls, auditsites.AuditSites):
    def __init__(self, device, dtype, context, stack, strict=True, audit=None, timer=None, safety=None, poison=(),
                 group=None, world_size=1, rank=0, kind="llama"):
        # The process's runtime guard (built by main before any candidate
        # import; tests that build a Dispatch directly get one built here).
        self.safety = safety if safety is not None else guard_mod.Safety(torch)
        self.raw = self.safety.raw
        self.device = device
        self.dtype = dtype
        self.context = dict(context)  # device, dtype, model, architecture (CUDA)
        # Tensor parallel runs strict whatever the request says: a rank that
        # fell back to stock alone would leave the others waiting in (or
        # pairing the wrong) collectives, so a candidate failing on any rank
        # aborts every rank (no rank-local fallback).
        self.strict = bool(strict) or int(world_size) > 1
        # Tensor parallel: the process group the collective slots reduce
        # over (stock: torch.distributed on it; a candidate gets it as its
        # `group` argument). One rank serves the five slots alone.
        self.group, self.world_size, self.rank = group, int(world_size), int(rank)
        if self.world_size > 1 and group is None:
            raise bad("world_size %d needs a process group; send group before load" % self.world_size)
        # (kind: the model kind; an msa model also scores key blocks)
        self.served = SLOTS + (MSA_SLOTS if kind == "msa" else ()) + (COLLECTIVES if self.world_size > 1 else ())
        # Slots whose stock calls get a candidate's outputs (fresh, aligned,
        # poisoned on raw memory): the referee names the target, so that B
        # and C differ in the kernel alone (see _outputs).
        if not isinstance(poison, (list, tuple)) or any(p not in self.served for p in poison):
            raise bad("poison must be a list of slot names")
        self.poison = frozenset(poison)
        self.timer = timer or NullTimer()
        self.phase = "prefill"
        self.graph_mode = "eager"
        self.counting = True
        self.capture_log = None
        self.graph_disabled = ""
        self.counts = {s: dict.fromkeys(COUNTERS, 0) for s in self.served}
        self.receipts = {}
        self.loader = host.Loader(hook=self.safety.hook, guard=self.safety.guard)
        self.ops = identity.Ops(torch)
        # The scalars candidate calls are handed: one object per value, as
        # the verify worker hands them (argplan.Scalars).
        self.scalars = argplan.Scalars()
        self.variants = {s: [] for s in self.served}
        # The engine state no candidate call may change, compared around
        # every audited call (_state_changed): (name, tensor) pairs, set by
        # the runner once the caches exist.
        self.engine_state = []
        self._load_stack(stack or {})
        # A referee's engine (a poisoned target) arms the audit hook with or
        # without candidate code: armed, it walks the stack at each event it
        # rules on, host time in the waves Go reads, which B pays too.
        if self.poison and self.safety.hook is not None:
            self.safety.hook.arm()
        self._init_audit(audit)
        self._init_sites(audit)

    def _load_stack(self, stack):
        if not isinstance(stack, dict):
            raise bad("stack must be an object")
        module_ids = {}
        by_bundle = {}  # bundle -> [(slot, index, row)], so a bundle's sources import together
        for slot, rows in sorted(stack.items()):
            if slot not in self.variants:
                raise bad("stack names slot %r, which the arena runtime does not serve here (it serves %s%s)"
                          % (slot, ", ".join(self.served),
                             "" if self.world_size > 1 else "; the collective slots need tensor parallelism"))
            if rows is None or rows == "stock":
                continue
            if isinstance(rows, dict):
                rows = [rows]
            if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                raise bad("stack[%s] must be an object or a list of objects" % slot)
            for i, row in enumerate(rows):
                by_bundle.setdefault(wire.field(row, "bundle", str), []).append((slot, i, row))
        loaded = {}
        for bundle, rows in by_bundle.items():
            if not os.path.isabs(bundle):
                raise bad("bundle %r must be an absolute path" % bundle)
            with bundlens.Namespace(bundle, [r.get("source") for _s, _i, r in rows]):
                for slot, i, row in rows:
                    try:
                        loaded[(slot, i)] = Variant(slot, i, row, self.loader, module_ids)
                    except Failure as e:
                        # Non-strict: a candidate that cannot even load
                        # leaves its slot on stock, with a receipt.
                        if self.strict or e.error.get("class") not in LOAD_FAILURES:
                            raise
                        err = e.error
                        name = row.get("variant") if isinstance(row.get("variant"), str) else ""
                        self._receipt(slot, name or "default", "load failed: %s: %s: %s"
                                      % (err.get("class"), err.get("type", ""), err.get("message", "")))
        for key in sorted(loaded):
            self.variants[key[0]].append(loaded[key])

    # -- modes and counters ------------------------------------------------

    def set_mode(self, phase, graph):
        self.phase = phase
        self.graph_mode = "graph" if graph else "eager"

    def begin_capture(self):
        self.capture_log = {s: dict.fromkeys(COUNTERS, 0) for s in self.served}
        self.begin_sites()

    def end_capture(self):
        log, self.capture_log = self.capture_log, None
        return self.end_sites(log)

    def add_log(self, log, planned=None, before=None, written=None):
        """A graph was replayed: dump the positions its replay covered
        (auditsites; planned: replay_plan's, drawn before the replay, None
        to draw now), compare the engine state with before (a copy taken
        before the replay, written the step's own slots: enginestate),
        then add its capture's counts."""
        self.replayed(self.replay_plan(log) if planned is None else planned, before, written)
        for s, c in log.items():
            d = self.counts[s]
            for k, v in c.items():
                d[k] += v

    def disable_in_graphs(self, reason):
        """Non-strict: candidates broke graph capture; in graph mode every
        selection now falls back to stock with this reason."""
        self.graph_disabled = reason

    def _count(self, slot, key):
        if self.capture_log is not None:
            self.capture_log[slot][key] += 1
        elif self.counting:
            self.counts[slot][key] += 1

    def prefill_graphs_off(self, reason):
        """Non-strict: candidates broke the capture of the prefill graphs;
        prefill runs eagerly, and one receipt says why."""
        self._receipt("prefill graphs", "capture", reason)

    def _receipt(self, slot, variant, reason):
        key = (slot, variant, wire.clip(reason, 512))
        if key in self.receipts or len(self.receipts) < MAX_RECEIPTS:
            self.receipts[key] = self.receipts.get(key, 0) + 1

    def stats(self):
        return {"slots": {s: dict(c) for s, c in self.counts.items()},
                "receipts": [{"slot": s, "variant": v, "reason": r, "count": n}
                             for (s, v, r), n in sorted(self.receipts.items())]}

    def has_candidates(self):
        return any(self.variants.values())

    def check_process(self):
        """The full guard check (after the load and after every request):
        CandidateAbort when candidate code changed how torch runs. Run also
        without candidate modules in a referee's engine (a poisoned
        target), so that B's waves pay the millisecond C's do (session 15);
        a finding there is the runtime's own."""
        if not self.loader.modules and not self.poison:
            return
        problem = self.safety.guard.full()
        if problem and self.loader.modules:
            raise CandidateAbort("stack", "any", "runtime guard: " + problem)
        if problem:
            raise RuntimeError("runtime guard, no candidate loaded: " + problem)

    def _guarded(self, slot, var, vis_in, outs, when):
        problem = self.safety.guard.quick(vis_in, {n: o.visible for n, o in outs.items()})
        if problem:
            raise CandidateAbort(slot, var.name, "runtime guard: %s: %s" % (when, problem))

    # -- the slots the model calls ----------------------------------------

    def _desc(self, **fields):
        d = dict(self.context)
        d["phase"] = self.phase
        d["graph_mode"] = self.graph_mode
        d.update(fields)
        return d

    def silu_and_mul(self, x):
        n, d2 = x.shape
        desc = self._desc(num_tokens=n, hidden_dim=d2 // 2, last_dim=d2)
        return self._call(SILU, desc, {"x": x}, {}, {"out": (n, d2 // 2)},
                          lambda o: stock.silu_and_mul(x, o["out"]))

    def rmsnorm(self, x, weight, eps):
        n, h = x.shape
        desc = self._desc(num_tokens=n, hidden_dim=h, last_dim=h)
        return self._call(RMSNORM, desc, {"x": x, "weight": weight}, {"eps": float(eps)}, {"out": (n, h)},
                          lambda o: stock.rmsnorm(x, weight, o["out"], eps))

    def sdpa(self, q, k, v, sm_scale, causal):
        t, hq, d = q.shape
        desc = self._desc(num_tokens=t, seq_len=k.shape[0], num_heads=hq, num_kv_heads=k.shape[1], head_dim=d)
        return self._call(SDPA, desc, {"q": q, "k": k, "v": v},
                          {"sm_scale": float(sm_scale), "causal": bool(causal)}, {"out": (t, hq, d)},
                          lambda o: stock.attention(q, k, v, o["out"], sm_scale, causal))

    def sdpa_uniform_stock(self, q, k, v, sm_scale, nseq, t):
        """Stock fast path for nseq fresh sequences of equal length t packed
        back to back (q (nseq*t,Hq,D)): one batched attention, counted as
        nseq stock calls. Only valid while no candidate variant is
        registered for attention.sdpa: a candidate is always called once
        per sequence, as its ABI says. Returns out (nseq*t,Hq,D)."""
        if self.variants[SDPA]:
            raise RuntimeError("sdpa_uniform_stock with a candidate registered")
        with self.timer.region("slot:" + SDPA):
            for _ in range(nseq):
                self._count(SDPA, "stock")
            n, hq, d = q.shape
            hkv = k.shape[1]
            out = torch.empty_like(q)
            stock.attention_uniform(q.view(nseq, t, hq, d), k.view(nseq, t, hkv, d), v.view(nseq, t, hkv, d),
                                    out.view(nseq, t, hq, d), sm_scale)
            return out

    def stock_only(self, slot):
        """True when no candidate variant is registered for slot."""
        return not self.variants[slot]

    def decode(self, q, k_cache, v_cache, block_table, seq_lens, sm_scale):
        b, hq, d = q.shape
        _p, ps, hkv, _d = k_cache.shape
        desc = self._desc(batch_size=b, num_heads=hq, num_kv_heads=hkv, head_dim=d, page_size=ps,
                          seq_len=block_table.shape[1] * ps)
        return self._call(DECODE, desc, {"q": q, "k_cache": k_cache, "v_cache": v_cache,
                                         "block_table": block_table, "seq_lens": seq_lens},
                          {"sm_scale": float(sm_scale)}, {"out": (b, hq, d)},
                          lambda o: stock.attention_decode(q, k_cache, v_cache, block_table, seq_lens,
                                                           sm_scale, o["out"]))

    def prepare_experts(self, w13, w2):
        """Prepare once at load: stock, then every variant (on copies of the
        validator's weights, so a prepare that writes in place cannot change
        what stock computes). Tensor parallel, w13/w2 are this rank's shards
        and the variants are moe.fused_experts_reduce's."""
        slot = MOE_REDUCE if self.world_size > 1 else MOE
        ex = Experts(w13, w2, stock.prepare(w13, w2))
        for var in self.variants[slot]:
            try:
                with guard_mod.no_grad(torch):
                    ex.cand[var.index] = var.prepare(w13.clone(), w2.clone())
            except BaseException as e:  # noqa: B902 - candidate code
                err = wire.exc_error("candidate_error", e)
                reason = "prepare raised %s: %s" % (err["type"], err["message"])
                if self.strict:
                    raise CandidateAbort(slot, var.name, reason, err["traceback"])
                ex.cand[var.index] = None
                self._receipt(slot, var.name, reason)
        return ex

    def fused_experts(self, x, topk_ids, topk_weights, experts):
        m, h = x.shape
        e, n2, _ = experts.w13.shape
        desc = self._desc(num_tokens=m, hidden_dim=h, intermediate_dim=n2 // 2, num_experts=e,
                          top_k=topk_ids.shape[1], quant="dense")
        return self._call(MOE, desc, {"x": x, "topk_ids": topk_ids, "topk_weights": topk_weights}, {},
                          {"out": (m, h)},
                          lambda o: stock.fused_experts(x, topk_ids, topk_weights, experts.stock, o["out"]),
                          experts=experts)

    # -- the call -----------------------------------------------------------

    def _select(self, slot, desc):
        graph = desc["graph_mode"] == "graph"
        for var in self.variants[slot]:
            if graph and var.domain.graph_safe is False:
                continue
            if var.domain.match(desc)[0]:
                return var
        return None

    def _stock(self, slot, shapes, dtype, fn):
        if slot in self.poison:
            outs = {n: o.contract for n, o in self._outputs(shapes, dtype)[1].items()}
        else:
            outs = {}
            for n, s in shapes.items():
                if not isinstance(s, msacalls.OutShape):
                    s = msacalls.OutShape(s, dtype)
                if s.stride is None:
                    outs[n] = torch.empty(s.shape, dtype=s.dtype, device=self.device)
                else:
                    outs[n] = torch.empty_strided(s.shape, s.stride, dtype=s.dtype, device=self.device)
        fn(outs)
        return outs

    def _outputs(self, shapes, dtype):
        """(specs, outputs) of a candidate call: fresh ABI-aligned
        allocations poisoned through raw memory in every call, as verify
        does, so that its outputs do not tell serving from grading."""
        ops = self.ops
        specs = {n: host.output_spec(ops, harness.out_spec(n, s, dtype, ALIGNMENT)) for n, s in shapes.items()}
        outs = {n: host.alloc_output(ops, sp, self.device) for n, sp in specs.items()}
        cuda_dev = self.device if self.device.type == "cuda" else None
        for o in outs.values():
            self.raw.fill_range(o.addr, o.nbytes, o.pattern, cuda_dev)
        return specs, outs

    def _call(self, slot, desc, inputs, scalars, shapes, stock_fn, experts=None, multi=False):
        """The call's outputs: "out", or with multi every output by name."""
        outs = self._call_outputs(slot, desc, inputs, scalars, shapes, stock_fn, experts)
        return outs if multi else outs["out"]

    def _call_outputs(self, slot, desc, inputs, scalars, shapes, stock_fn, experts):
        with self.timer.region("slot:" + slot):
            dtype = next(iter(inputs.values())).dtype
            var = self._select(slot, desc) if self.variants[slot] else None
            if var is None:
                self._count(slot, "ineligible" if self.variants[slot] else "stock")
                if slot in self.poison:  # B's and C's stock calls of the target alike
                    return self._mirrored(slot, inputs, shapes, dtype, stock_fn)
                return self._stock(slot, shapes, dtype, stock_fn)
            self._count(slot, "selected")
            if self.graph_disabled and desc["graph_mode"] == "graph":
                return self._fail(slot, var, self.graph_disabled, "", shapes, dtype, stock_fn)
            return self._candidate(slot, var, desc, inputs, scalars, shapes, dtype, stock_fn, experts)

    def _candidate(self, slot, var, desc, inputs, scalars, shapes, dtype, stock_fn, experts):
        ops = self.ops
        prepared = None
        if experts is not None:
            prepared = experts.cand.get(var.index)
            if prepared is None:
                return self._fail(slot, var, "prepare failed at load", "", shapes, dtype, stock_fn)
        # The call's number among the slot's selected calls as counted
        # (audit_calls positions); calls being captured or not counted
        # (warm-ups) have none, a captured one gets a site (auditsites).
        capturing = self.capture_log is not None
        n_call = self.counts[slot]["selected"] - 1 if self.counting and not capturing else -1
        audit = n_call >= 0 and self._audit_pick(slot, desc, n_call)
        specs, outs = self._outputs(shapes, dtype)
        copied = KEPT.get(slot, ()) + PACKED.get(slot, ())
        vis_in = {n: ops.detach(self._own_copy(t) if n in copied else t) for n, t in inputs.items()}
        argv = []
        for name in ORDER[slot]:
            if name in vis_in:
                argv.append(vis_in[name])
            elif name in outs:
                argv.append(outs[name].visible)
            elif name == "prepared":
                argv.append(prepared)
            elif name == "group":
                argv.append(self.group)
            else:
                argv.append(self.scalars.get(slot, scalars[name]))
        before = {n: ops.fact(o.visible) for n, o in outs.items()}
        bases = {n: ops.data_ptr(o.contract) for n, o in outs.items()}
        self._guarded(slot, var, vis_in, outs, "before the call")
        site = self.site_before(slot, var, desc, inputs, scalars, experts, slot == DECODE) if capturing else None
        pre = self._before_call(inputs) if n_call >= 0 and self.audit_mode() else None
        try:
            with guard_mod.no_grad(torch):
                var.entry(*argv)
        except BaseException as e:  # noqa: B902 - candidate code
            self._guarded(slot, var, vis_in, outs, "during the call")
            err = wire.exc_error("candidate_error", e)
            return self._fail(slot, var, "raised %s: %s" % (err["type"], err["message"]), err["traceback"],
                              shapes, dtype, stock_fn)
        self._guarded(slot, var, vis_in, outs, "during the call")
        problem = harness.revalidate(ops, outs, specs, before, bases) or enginestate.changed(pre and pre[1], self.engine_state)
        if problem:
            return self._fail(slot, var, problem, "", shapes, dtype, stock_fn)
        self._count(slot, "completed")
        if site is not None:
            self.site_after(site, inputs, outs)
        if audit:
            pages = auditdump.used_pages(self.raw, pre[0]) if slot == DECODE else None
            before_in = auditdump.snapshot_inputs(self.raw, pre[0], pages)
            self._dump(slot, var, n_call, desc, inputs, before_in, pages, scalars, outs, experts, slot == DECODE)
        return {n: o.contract for n, o in outs.items()}

    def _mirrored(self, slot, inputs, shapes, dtype, stock_fn):
        """A stock call of a poisoned target slot through a candidate call's
        host work (views, identity facts, the guard around it,
        revalidation), so that B and C differ in the kernel alone. A finding
        is the candidate's where candidate code is loaded, else the
        runtime's."""
        ops = self.ops
        specs, outs = self._outputs(shapes, dtype)
        vis_in = {n: ops.detach(t) for n, t in inputs.items()}
        visible = {n: o.visible for n, o in outs.items()}
        before = {n: ops.fact(v) for n, v in visible.items()}
        bases = {n: ops.data_ptr(o.contract) for n, o in outs.items()}
        problem = self.safety.guard.quick(vis_in, visible)
        with guard_mod.no_grad(torch):
            stock_fn({n: o.contract for n, o in outs.items()})
        problem = (problem or self.safety.guard.quick(vis_in, visible)
                   or harness.revalidate(ops, outs, specs, before, bases))
        if problem and self.has_candidates():
            raise CandidateAbort(slot, "stock", "runtime guard around a stock call: %s" % problem)
        if problem:
            raise RuntimeError("stock %s, a poisoned target: %s" % (slot, problem))
        return {n: o.contract for n, o in outs.items()}

    def _own_copy(self, t):
        """A copy of t for the candidate alone (KEPT), placed as verify
        places its inputs (host.placed_like), so that the copy's storage
        does not tell serving from verify."""
        ops = self.ops
        c = host.placed_like(ops, t, ops.device_of(t), _PLACE)
        ops.copy(c, t)
        return c

    def _fail(self, slot, var, reason, tb, shapes, dtype, stock_fn):
        if self.strict:
            raise CandidateAbort(slot, var.name, reason, tb)
        self._count(slot, "fallback")
        self._receipt(slot, var.name, reason)
        return self._stock(slot, shapes, dtype, stock_fn)


__all__ = ["Dispatch", "CandidateAbort", "Domain", "Failure", "SLOTS"]
