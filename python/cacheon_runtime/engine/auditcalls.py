"""auditcalls: which candidate calls an engine dumps for the referee's
audit, and the dumping itself (a mixin of dispatch.Dispatch).

The load's ``audit`` options set a share and an every-Nth rule, bounded by
``max_dumps``; an ``audit_calls`` request adds explicit positions (the
selected-call numbers the referee draws over its timed waves), which no
bound limits. Here only eager calls are dumped; calls replayed from a CUDA
graph are dumped through the copies auditsites captures beside them. The
dump's format is auditdump's.

An auditing engine does the same work before every counted eager call,
dumped or not (copies of its inputs and of the engine state), so that what
runs before a call (its time on the stream and on the host, which CUDA
events measure) tells no kernel whether the call is dumped. The copies go
into memory made once, apart from the calls' own (copyarena), so that
the addresses around a call's tensors do not tell A from C.
"""

import os
import random

from .. import wire
from ..wire import bad
from . import auditdump, copyarena, enginestate


class AuditCalls:
    """The audit state of a Dispatch: needs self.raw, self.counts,
    self.capture_log, self.rank, self.world_size, self.engine_state,
    self._site_copy (auditsites) and self._count."""

    def _init_audit(self, audit):
        """Parse the load's audit options (every, share, seed, dir,
        max_dumps); a bad value is the request's error."""
        a = audit or {}
        self.audit_every = wire.field(a, "every", int, 0, required=False)
        share = a.get("share", "0")
        try:
            self.audit_share = float(share) if isinstance(share, (str, int, float)) and not isinstance(
                share, bool) else -1.0
        except ValueError:
            self.audit_share = -1.0
        if not 0.0 <= self.audit_share <= 1.0 or self.audit_every < 0:
            raise bad("audit: every must be >= 0 and share a decimal in [0, 1]")
        self.audit_rng = random.Random(wire.field(a, "seed", int, 1, required=False))
        self.audit_dir = wire.field(a, "dir", str, "", required=False)
        self.audit_max = wire.field(a, "max_dumps", int, 0, required=False) or 64
        self.auditing = self.audit_every > 0 or self.audit_share > 0
        if self.auditing and not os.path.isabs(self.audit_dir):
            raise bad("audit.dir must be an absolute path when auditing")
        self.audit_dumps = 0
        # Both kinds of copies are carved from arenas made out of the
        # calls' pools (copyarena: a kernel saw per-call copies in its
        # addresses, rt47d).
        self.state_copies = enginestate.Copies(self.ops)
        self.input_copies = copyarena.Arena(self.ops)
        # Explicit positions (audit_calls): per slot, the selected-call
        # numbers to dump, beside the share and every rules and not bound
        # by their max_dumps.
        self.audit_calls = {}

    def audit_mode(self):
        """Whether this engine dumps calls now (a rule, or drawn positions)."""
        return self.auditing or bool(self.audit_calls)

    def _before_call(self, inputs):
        """Copies of a counted eager call's inputs and of the engine state,
        taken before every such call of an auditing engine (see above); a
        dump reads the inputs as they were before the call from them."""
        return (dict(self.input_copies.copies(inputs.items())),
                self.state_copies.take(self.engine_state))

    def set_audit_calls(self, calls):
        """Dump exactly these selected calls of each slot (numbered as the
        engine counts them, counts[slot]["selected"] from the load on,
        replayed calls included), besides any share or every rule;
        replaces earlier positions (auditdump.parse_calls)."""
        self.audit_calls = auditdump.parse_calls(calls, self.counts, self.audit_dir)
        return sum(len(v) for v in self.audit_calls.values())

    def _audit_pick(self, slot, desc, n_call):
        """The explicit positions of the slot (audit_calls); besides them,
        every Nth selected call of the slot (the first, then every Nth) and
        a seeded random share of them, up to max_dumps of those."""
        if desc["graph_mode"] == "graph" or self.capture_log is not None:
            return False
        if n_call in self.audit_calls.get(slot, ()):
            return True
        return self._rule_pick(n_call)

    def _rule_pick(self, n_call):
        """The every and share rules for one selected call, eager or
        replayed from a graph (auditsites.replayed): one draw per call in
        the order the engine counts them, up to max_dumps."""
        if not self.auditing:
            return False
        draw = self.audit_rng.random()
        pick = (self.audit_every > 0 and n_call % self.audit_every == 0) or draw < self.audit_share
        return pick and self.audit_dumps < self.audit_max

    def _dump(self, slot, var, n_call, desc, inputs, before_in, pages, scalars, outs, experts, decode):
        auditdump.write(self.raw, self.audit_dir, slot, var.name, n_call, desc, inputs, before_in, pages, scalars,
                        outs, experts, decode=decode, tp=(self.rank, self.world_size) if self.world_size > 1 else None)
        if n_call not in self.audit_calls.get(slot, ()):
            self.audit_dumps += 1
        self._count(slot, "audited")
