"""guard-cost: what the runtime guard's checks cost on this machine's
torch, in milliseconds (scripts/gpu-run guard). The full check runs after
every engine request (dispatch.check_process), inside the time Go reads a
wave in; the quick one before and after every candidate call.

Usage: PYTHONPATH=python python3 scripts/guard-cost.py [BUNDLE_SOURCE.py]
"""
import importlib.util
import sys
import time

import torch

from cacheon_runtime import audithook, guard


def per_call_ms(f, n=50):
    f()
    t = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t) / n * 1e3


def report(label, g):
    parts = {"quick": g.quick, "full": g.full, "modes": lambda: g.modes(True),
             "conditions": g.changed_conditions, "identities": g.identities,
             "dispatch_tables": g.dispatch_tables, "abc": g.abc_registrations}
    print(label + ": " + " ".join("%s=%.3f" % (k, per_call_ms(f)) for k, f in parts.items()), flush=True)


def main():
    guard.same_conditions(torch)
    hook = audithook.install()
    g = guard.Safety(torch, hook).guard
    report("torch %s, nothing imported" % torch.__version__, g)
    if len(sys.argv) > 1:
        spec = importlib.util.spec_from_file_location("bundle_probe", sys.argv[1])
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        report("after importing %s" % sys.argv[1], g)


if __name__ == "__main__":
    main()
