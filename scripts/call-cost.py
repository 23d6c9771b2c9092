"""call-cost: where a verify worker's call goes, in milliseconds per call
and phase, on this machine's torch (scripts/gpu-run calls). It drives the
worker's own run handler in process (no sandbox, no Go) on a silu bundle,
for a small and a wide shape, with the runtime's audit hook armed as in
verify, and times each step of runcase._Case.call: the guard's checks, the
poison and refresh, the identity facts, the candidate call, the dump.

Usage: PYTHONPATH=python python3 scripts/call-cost.py BUNDLE_DIR SOURCE ENTRY [cpu|cuda]
(CALLCOST_NOHOOK=1: without the audit hook)
"""
import collections
import os
import shutil
import sys
import tempfile
import time

import torch

from cacheon_runtime import audithook, guard, runcase, stio, worker

SPENT = collections.defaultdict(float)


def timed(name, f):
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            SPENT[name] += time.perf_counter() - t
    return wrapper


def instrument():
    C = runcase._Case
    for name in ("renew", "checked", "poison", "refresh", "dump", "sync"):
        setattr(C, name, timed(name, getattr(C, name)))
    w = worker.Worker
    # identity facts are taken through worker.ops.facts
    return w


def main():
    bundle, source, entry = sys.argv[1:4]
    dev = sys.argv[4] if len(sys.argv) > 4 else ("cuda" if torch.cuda.is_available() else "cpu")
    guard.same_conditions(torch)
    # CALLCOST_NOHOOK=1: no audit hook, to see what the armed hook costs
    hook = None if os.environ.get("CALLCOST_NOHOOK") else audithook.install()
    instrument()
    w = worker.Worker(1, 0, torch, hook)
    w.ops.facts = timed("facts", w.ops.facts)
    w.op_load({"module": "m", "bundle": bundle, "source": source, "entry": entry})
    for dtype, (t, d) in [("bfloat16", (8, 128)), ("bfloat16", (146, 14336)), ("float32", (146, 14336))]:
        tdt = getattr(torch, dtype)
        root = tempfile.mkdtemp()
        base = os.path.join(root, "base")
        os.mkdir(base)
        stio.save(os.path.join(base, "in.safetensors"), {"x": torch.randn(t, 2 * d).to(tdt)})
        names = []
        for i in range(8):
            names.append("r%d.safetensors" % i)
            stio.save(os.path.join(base, names[-1]), {"x": torch.randn(t, 2 * d).to(tdt)})

        def request(n):
            d_ = os.path.join(root, "case%d" % n)
            os.mkdir(d_)
            for f in os.listdir(base):
                os.link(os.path.join(base, f), os.path.join(d_, f))
            return {"op": "run", "module": "m", "device": dev, "entry": entry,
                    "args": [{"name": "x", "kind": "input"}, {"name": "out", "kind": "output"}],
                    "outputs": [{"name": "out", "dtype": dtype, "shape": [t, d], "stride": [d, 1], "alignment": 16}],
                    "inputs": "in.safetensors", "replays": names, "dir": d_, "check_objects": False}
        w.op_run(request(0))  # warm-up: first call, compiles
        SPENT.clear()
        n = 10
        start = time.perf_counter()
        calls = 0
        for i in range(n):
            r = w.op_run(request(i + 1))
            calls += len(r["calls"])
            if r["calls"][0].get("error"):
                print(r["calls"][0]["error"])
        wall = (time.perf_counter() - start) / calls * 1e3
        phases = " ".join("%s=%.3f" % (k, v / calls * 1e3) for k, v in sorted(SPENT.items()))
        print("%s %s %dx%d: %.3f ms/call (%d calls) %s" % (dev, dtype, t, 2 * d, wall, calls, phases), flush=True)
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
