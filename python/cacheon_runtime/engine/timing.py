"""timing: the optional per-step time split (load option "profile": true).

Regions are timed with CUDA events on the GPU (perf_counter on the CPU) and
summed per (phase, name) when the runner collects them, once per generate.
It is a documentation aid: the numbers come from inside the hostile process
and nobody grades on them; Go times every request itself.

Untimed regions are NULL_REGION (a disabled Timer's, and NullTimer's, the
timer of a Dispatch made without one).
"""

import time

import torch


class _NullRegion:
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


NULL_REGION = _NullRegion()


class NullTimer:
    """A timer that never times (a Dispatch made without a timer): every
    region is NULL_REGION."""
    enabled = False

    def region(self, name):
        return NULL_REGION


class _Region:
    __slots__ = ("t", "name", "start")

    def __init__(self, timer, name):
        self.t, self.name = timer, name

    def __enter__(self):
        if self.t.cuda:
            self.start = torch.cuda.Event(enable_timing=True)
            self.start.record()
        else:
            self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        t = self.t
        if t.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            t.pending.append((t.phase, self.name, self.start, end))
        else:
            t.add(t.phase, self.name, time.perf_counter() - self.start)
        return False


class Timer:
    CATEGORIES = ("attention", "mlp", "norm", "sampling", "collective", "other")

    def __init__(self, device, enabled):
        self.enabled = bool(enabled)
        self.cuda = device.type == "cuda"
        self.phase = "prefill"
        self.pending = []
        self.totals = {}
        self.host = {}
        self.counts = {}

    def region(self, name):
        return _Region(self, name) if self.enabled else NULL_REGION

    def add(self, phase, name, seconds):
        key = (phase, name)
        self.totals[key] = self.totals.get(key, 0.0) + seconds

    def host_add(self, phase, seconds):
        self.host[phase] = self.host.get(phase, 0.0) + seconds
        self.counts[phase] = self.counts.get(phase, 0) + 1

    def collect(self):
        if not self.pending:
            return
        torch.cuda.synchronize()
        for phase, name, s, e in self.pending:
            self.add(phase, name, s.elapsed_time(e) / 1000.0)
        self.pending = []

    def report(self, mode):
        """{"mode", per phase: {"count", "device_ms", "host_ms", "split_ms": {...}, "slots_ms": {...}}}."""
        self.collect()
        out = {"mode": mode}
        for phase in ("prefill", "decode"):
            tot = self.totals.get((phase, "step"), 0.0)
            split = {c: round(self.totals.get((phase, c), 0.0) * 1e3, 4) for c in self.CATEGORIES}
            split["unattributed"] = round(max(0.0, tot * 1e3 - sum(split.values())), 4)
            slots = {n[5:]: round(v * 1e3, 4) for (p, n), v in sorted(self.totals.items())
                     if p == phase and n.startswith("slot:")}
            out[phase] = {"count": self.counts.get(phase, 0), "device_ms": round(tot * 1e3, 4),
                          "host_ms": round(self.host.get(phase, 0.0) * 1e3, 4),
                          "split_ms": split, "slots_ms": slots}
        return out
