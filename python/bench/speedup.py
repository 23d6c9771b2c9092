"""Side-by-side summary of `scripts/gpu-run engine` (a developer aid): the
Go-timed cacheon waves against the transformers processes of the same run,
as docs/performance.md reports them.

    python3 python/bench/speedup.py OUTDIR

Reads OUTDIR/bench-dense-{default,b64}.json (cacheon engine bench --json),
OUTDIR/hf.jsonl (python/bench/hf_generate.py, one line per process) and
OUTDIR/bandwidth.txt when present.
"""
import json
import os
import statistics
import sys

# Bytes one decode step must read at h200-dense-1b's shapes, ~256 cached
# positions (docs/performance.md): every weight but the embedding table,
# plus the KV cache.
STEP_BYTES = {1: 2.472e9 + 8e6, 64: 2.472e9 + 0.537e9}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "gpu-out"
    hf = {}
    path = os.path.join(out, "hf.jsonl")
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                r = json.loads(line)
                hf.setdefault(r["batch"], []).append(r["tokens_per_s"])
    except OSError as e:
        sys.exit("speedup: %s: %s (run scripts/gpu-run engine first)" % (path, e.strerror))
    except (ValueError, KeyError, TypeError) as e:
        sys.exit("speedup: %s:%d: not a hf_generate.py result line (%s)" % (path, n, e))
    bw = None
    try:
        with open(os.path.join(out, "bandwidth.txt")) as f:
            bw = float(f.read().split()[1]) * 1e9
    except (OSError, IndexError, ValueError):
        pass
    for name, batch in (("default", 1), ("b64", 64)):
        path = os.path.join(out, "bench-dense-%s.json" % name)
        if not os.path.exists(path):
            continue
        try:
            with open(path) as f:
                bench = json.load(f)["bench"]
        except (OSError, ValueError, KeyError) as e:
            sys.exit("speedup: %s: not a `cacheon engine bench --json` result (%s)" % (path, e))
        med = bench["median"]["tokens_per_s"]
        waves = [w["tokens_per_s"] for w in bench["waves"]]
        step_ms = batch / bench["median"]["decode_tokens_per_s"] * 1e3
        print("batch %d: cacheon %.0f tok/s (%.0f-%.0f), decode %.3f ms/step"
              % (batch, med, min(waves), max(waves), step_ms))
        if bw:
            roof = STEP_BYTES[batch] / bw * 1e3
            print("  roofline step %.3f ms at %.0f GB/s: %.0f%%" % (roof, bw / 1e9, 100 * roof / step_ms))
        base = sorted(hf.get(batch, []))
        if base:
            print("  transformers %s tok/s" % " / ".join("%.0f" % x for x in hf[batch]))
            print("  speedup over the median process %.2fx, fastest %.2fx, slowest %.2fx"
                  % (med / statistics.median(base), med / base[-1], med / base[0]))


if __name__ == "__main__":
    main()
