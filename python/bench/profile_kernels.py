"""Kernel-level profile of the arena runtime (a developer aid, not part of
the runtime and never believed by Go). Builds the engine in this process
from an arena file, runs warm-up waves, then profiles one wave with
torch.profiler and prints the kernels that take the device's time, for the
whole wave and for a prefill-only wave (max_new_tokens = 1):

    python3 python/bench/profile_kernels.py arenas/h200-dense-1b.toml --batch 64

The decode share is the whole wave minus the prefill-only wave. Graphs are
off (profiling launches eagerly); kernel durations are the same as under
graph replay, launch gaps are not. Other modes:

    --ab 1,64       graphs on: decode ms/step of each VARIANTS entry (PDL,
                    loads before the PDL wait, the skinny GEMM, its L2 prefetch, sampling in the
                    lm_head GEMM, prefill graphs), each variant in a fresh
                    engine; --only NAME,... runs just those and the default
    --split 1,64    the --ab timing, then each batch's decode-step kernel
                    time by region (attention, mlp, norm, sampling, other)
                    and each slot's share of the step
    --ab 64 --ablate  the --ab timing with each stock Triton kernel of the
                    step left out in turn: what it costs in the graph
    --ab 64 --configs the --ab timing of launch configurations (skinny GEMM
                    shapes, paged decode tiling) in the engine's chain
    --host 1        cProfile of the host side of a prefill-only wave, its
                    device timeline, the compiled kernels' resources
    --waves 64      whole waves one by one, each split into host and device
                    time of prefill and decode (where a slow wave loses time)
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from cacheon_runtime import wire  # noqa: E402
from cacheon_runtime.engine import decode_gemm, kernels, main as engine_main, runner  # noqa: E402


def load_arena(path):
    import tomllib
    with open(path, "rb") as f:
        return tomllib.load(f)


def wave(batch, prompt, new, seed, vocab):
    g = torch.Generator().manual_seed(seed)
    return {"requests": [{"rid": "r%d" % i, "prompt": torch.randint(1, min(1000, vocab), (prompt,), generator=g).tolist(),
                          "max_new_tokens": new, "ignore_eos": True} for i in range(batch)]}


def table(prof, rows):
    ka = prof.key_averages()
    key = "self_device_time_total" if hasattr(ka[0], "self_device_time_total") else "self_cuda_time_total"
    evs = sorted((e for e in ka if getattr(e, key, 0) > 0), key=lambda e: -getattr(e, key))
    total = sum(getattr(e, key) for e in evs)
    print("  device total %.2f ms" % (total / 1e3))
    for e in evs[:rows]:
        t = getattr(e, key)
        print("  %6.2f%% %9.3f ms %6d  %s" % (100 * t / total, t / 1e3, e.count, e.key[:110]))


def timed(eng, w, reps=3):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        out = eng.generate(w)
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2], out


def ab(arena, batches, prompt, new, only=None, variants=None):
    """Graphs on; time each entry of variants (VARIANTS by default;
    ABLATIONS with --ablate), or only those named in only besides
    "default", each in a fresh engine with its SWITCHES set."""
    v = int(arena["model"]["vocab_size"])
    first, steps = {}, {}
    defaults = {k: getattr(mod, k) for k, mod in SWITCHES.items()}
    for name, switches in variants or VARIANTS:
        if only and name not in only and name != "default":
            continue
        for k, mod in SWITCHES.items():
            setattr(mod, k, switches.get(k, defaults[k]))
        try:
            eng = runner.Engine({"arena": arena, "graphs": True})
            for b in batches:
                full, pre = wave(b, prompt, new, 1, v), wave(b, prompt, 1, 1, v)
                for w in (full, pre):
                    eng.generate(w)
                tw, out = timed(eng, full, 5)
                tp, _ = timed(eng, pre, 5)
                toks = [r["tokens"] for r in out["results"]]
                with open(os.devnull, "wb") as null:
                    t0 = time.perf_counter()
                    rep = engine_main.generate_reply({"results": [dict(r) for r in out["results"]],
                                                      "steps": out["steps"]})
                    wire.send_line(null.fileno(), dict(rep, id="x", ok=True))
                    enc = time.perf_counter() - t0
                same = first.setdefault(b, toks)
                agree = sum(x == y for a, c in zip(toks, same) for x, y in zip(a, c)) / sum(len(a) for a in toks)
                steps.setdefault(b, (tw - tp) / (new - 1) * 1e3)
                print("%-20s batch %2d: wave %7.1f ms (%6.0f tok/s), prefill-only %5.1f ms, decode %.3f ms/step,"
                      " reply line %.1f ms, tokens equal to the first variant %.1f%%"
                      % (name, b, tw * 1e3, b * new / tw, tp * 1e3, (tw - tp) / (new - 1) * 1e3, enc * 1e3,
                         100 * agree))
                sys.stdout.flush()
            del eng
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001
            print("%s failed: %s: %s" % (name, type(e).__name__, str(e)[:300]))
    for k, v in defaults.items():
        setattr(SWITCHES[k], k, v)
    return steps


# Developer switches that --ab varies (name: its module): programmatic
# dependent launch, the loads before the PDL wait, the skinny split-K GEMM, its L2 weight prefetch, the
# lm_head GEMM doing sampling's first pass, the single-prompt prefill
# graphs' token buckets; --ablate also swaps stock kernels for no-ops.
SWITCHES = {"PDL": kernels, "EARLY": kernels, "SKINNY": decode_gemm, "PREFETCH": decode_gemm,
            "SAMPLE_IN_GEMM": decode_gemm, "PREFILL_GRAPH_TOKENS": runner,
            "TMA": decode_gemm, "CONFIGS": decode_gemm, "DECODE_TUNING": kernels,
            "rmsnorm": kernels, "silu_and_mul": kernels, "rope_store": kernels, "attention_decode": kernels}
# (name, switches that differ from the module's defaults); the first is the
# default configuration, whose step time --split reads.
VARIANTS = (("default", {}),
            ("no early loads", {"EARLY": False}),
            ("no TMA", {"TMA": False}),
            ("no L2 prefetch", {"PREFETCH": False}),
            ("sampling after lm_head", {"SAMPLE_IN_GEMM": False}),
            ("no prefill graphs", {"PREFILL_GRAPH_TOKENS": ()}),
            ("neither pdl nor skinny", {"PDL": False, "SKINNY": False}))
# --configs: launch configurations inside the engine's chain, where each
# kernel follows a different one (kernel_sweep.py times 16 copies of one
# kernel); the first is the default configuration.
CONFIG_VARIANTS = (("default", {}),
                   ("o 2 stages", {"CONFIGS": {(2048, 2048): (32, 256, 2, 4, 2)}}),
                   ("o bk128", {"CONFIGS": {(2048, 2048): (32, 128, 2, 4, 3)}}),
                   ("qkv 2 stages", {"CONFIGS": {(3072, 2048): (32, 256, 1, 4, 2)}}),
                   ("down 3 stages", {"CONFIGS": {(2048, 8192): (64, 128, 4, 4, 3)}}),
                   ("down split 8", {"CONFIGS": {(2048, 8192): (64, 128, 8, 4, 3)}}),
                   ("attn 64-position tiles", {"DECODE_TUNING": dict(kernels.DECODE_TUNING, block_n=64)}),
                   ("attn 1 stage", {"DECODE_TUNING": dict(kernels.DECODE_TUNING, stages=1)}),
                   ("attn 8 warps", {"DECODE_TUNING": dict(kernels.DECODE_TUNING, warps=8)}))


def _skip(*_args, **_kw):
    return None


# --ablate: each stock Triton kernel of the step left out in turn (its
# output is whatever the buffer held; the tokens are garbage, the timing is
# what the chain costs without that kernel).
ABLATIONS = (("default", {}),
             ("without rmsnorm", {"rmsnorm": _skip}),
             ("without silu_and_mul", {"silu_and_mul": _skip}),
             ("without rope_store", {"rope_store": _skip}),
             ("without decode attention", {"attention_decode": _skip}))


def device_by_kind(prof, m):
    """Device microseconds by (region, part) of one profiled run: Triton
    kernels by name, cuBLAS GEMMs by their weight shape (aten ops' self
    device time, so nothing counts twice), copies and the rest as other."""
    hq, hkv, d, h, inter, vocab = (int(m[k]) for k in ("num_heads", "num_kv_heads", "head_dim", "hidden_size",
                                                          "intermediate_size", "vocab_size"))
    names = {"_rmsnorm_kernel": ("norm", "norm.rmsnorm"), "_silu_mul_kernel": ("mlp", "activation.silu_and_mul"),
             "_decode_kernel": ("attention", "attention.decode"), "_rope_store_kernel": ("attention", "rope"),
             "_qkv_rope_kernel": ("attention", "qkv+rope"), "_sample_partial_kernel": ("sampling", "greedy"),
             "_sample_final_kernel": ("sampling", "greedy"), "_gemv_kernel": ("?", "gemv"),
             "_skinny_kernel": ("?", "skinny")}
    out = {}
    for e in prof.key_averages(group_by_input_shape=True):
        t = getattr(e, "self_device_time_total", None)
        if t is None:
            t = e.self_cuda_time_total
        if t <= 0:
            continue
        key = e.key
        if key in names:
            kind = names[key]
        elif key in ("aten::mm", "aten::addmm_", "aten::addmm"):
            shp = [x for x in (e.input_shapes or []) if x]
            n = shp[-1][-1] if shp else -1
            k = shp[-1][0] if shp else -1
            if n == (hq + 2 * hkv) * d:
                kind = ("attention", "qkv projection")
            elif n == h and k == hq * d:
                kind = ("attention", "o projection")
            elif n == 2 * inter:
                kind = ("mlp", "gate_up projection")
            elif k == inter:
                kind = ("mlp", "down projection")
            elif n == vocab:
                kind = ("sampling", "lm_head")
            else:
                kind = ("other", "gemm %s" % (shp,))
        elif key.startswith("aten::") and ("attention" in key or "sdpa" in key):
            kind = ("attention", "attention.sdpa")
        elif key.startswith("aten::") or key.startswith("Memcpy") or key.startswith("Memset"):
            kind = ("other", key)
        else:
            continue
        out[kind] = out.get(kind, 0.0) + t
    return out


def split_report(arena, batch, prompt, new, step_ms):
    """Profile a whole wave and a prefill-only wave with cuBLAS for every
    GEMM (so each can be told apart by shape) and print the decode step's
    device time by region and part, and each slot's share of the step."""
    v = int(arena["model"]["vocab_size"])
    full, pre = wave(batch, prompt, new, 1, v), wave(batch, prompt, 1, 1, v)
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    res = {}
    decode_gemm.SKINNY, decode_gemm.GEMV = False, False
    try:
        eng = runner.Engine({"arena": arena, "graphs": False})
        for w in (full, pre):
            eng.generate(w)
        torch.cuda.synchronize()
        for name, w in (("full", full), ("pre", pre)):
            with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
                eng.generate(w)
                torch.cuda.synchronize()
            res[name] = device_by_kind(prof, arena["model"])
        del eng
    finally:
        decode_gemm.SKINNY, decode_gemm.GEMV = True, True
    steps = new - 1
    dec = {k: (res["full"].get(k, 0.0) - res["pre"].get(k, 0.0)) / steps / 1e3 for k in res["full"]}
    dec = {k: x for k, x in dec.items() if x > 0.0005}
    total = sum(dec.values())
    gap = step_ms - total
    print("decode step, batch %d: %.3f ms of kernels (eager, cuBLAS GEMMs) against %.3f ms host-timed "
          "with graphs (stock kernels); %s" % (batch, total, step_ms,
                                             "launch gaps and host %.3f ms" % gap if gap >= 0 else
                                             "the graph step is the shorter: its stock GEMMs beat cuBLAS here"))
    regions = {}
    for (r, part), x in dec.items():
        regions.setdefault(r, []).append((part, x))
    for r, parts in sorted(regions.items(), key=lambda kv: -sum(x for _p, x in kv[1])):
        rt = sum(x for _p, x in parts)
        detail = ", ".join("%s %.1f%%" % (p_, 100 * x / total) for p_, x in sorted(parts, key=lambda px: -px[1])[:6])
        print("  %-9s %5.1f%%  %.3f ms  (%s)" % (r, 100 * rt / total, rt, detail))
    slots = {}
    for (_r, part), x in dec.items():
        if part.startswith(("norm.", "activation.", "attention.", "moe.")):
            slots[part] = slots.get(part, 0.0) + x
    print("  slot share of the step: " + ", ".join("%s %.1f%%" % (k, 100 * x / total)
                                                   for k, x in sorted(slots.items(), key=lambda kv: -kv[1])))
    torch.cuda.empty_cache()


def timeline(eng, w):
    """One profiled generate of w: when the device is busy within it (the
    first kernel's start, the last one's end, the union of kernel and copy
    intervals and the longest idle gaps), so host time before, between and
    after the kernels shows."""
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        with torch.profiler.record_function("cacheon_wave"):
            eng.generate(w)
            torch.cuda.synchronize()
    evs = prof.events()
    wave_ev = [e for e in evs if e.name == "cacheon_wave"]
    dev = [e for e in evs if str(getattr(e, "device_type", "")).endswith("CUDA") and e.time_range.end > e.time_range.start]
    if not wave_ev or not dev:
        print("timeline: no wave range or no device events in the trace")
        return
    t0, t1 = wave_ev[0].time_range.start, wave_ev[0].time_range.end
    iv = sorted((e.time_range.start, e.time_range.end) for e in dev)
    busy, gaps, cur_s, cur_e = 0.0, [], iv[0][0], iv[0][1]
    for a, b in iv[1:]:
        if a > cur_e:
            busy += cur_e - cur_s
            gaps.append((a - cur_e, cur_e - t0))
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    busy += cur_e - cur_s
    print("timeline: wave %.2f ms; device work from +%.2f to +%.2f ms (%d kernels and copies), busy %.2f ms;"
          " host alone before the first %.2f ms, after the last %.2f ms"
          % ((t1 - t0) / 1e3, (iv[0][0] - t0) / 1e3, (cur_e - t0) / 1e3, len(iv), busy / 1e3,
             (iv[0][0] - t0) / 1e3, (t1 - cur_e) / 1e3))
    for g, at in sorted(gaps, reverse=True)[:6]:
        print("  device idle %.3f ms at +%.2f ms" % (g / 1e3, at / 1e3))


def kernel_meta():
    """Registers, spills and shared memory of every Triton kernel compiled
    in this process (what bounds how many programs an SM holds)."""
    import triton
    for mod in (kernels, decode_gemm):
        for name in sorted(vars(mod)):
            fn = getattr(mod, name)
            if not isinstance(fn, triton.runtime.jit.JITFunction):
                continue
            for cache in getattr(fn, "device_caches", {}).values():
                compiled = cache[0] if isinstance(cache, tuple) else cache
                for key, k in compiled.items():
                    try:
                        md = k.metadata
                        print("%-22s regs %3s spills %3s shared %6s warps %s stages %s"
                              % (name, getattr(k, "n_regs", "?"), getattr(k, "n_spills", "?"),
                                 getattr(md, "shared", "?"), getattr(md, "num_warps", "?"),
                                 getattr(md, "num_stages", "?")))
                    except Exception as e:  # noqa: BLE001
                        print("%s: %s" % (name, e))


def wave_split(arena, batch, prompt, new, waves=12):
    """Whole waves one by one, each split into the host's time to its first
    decode step, the device's prefill (CUDA events), the decode steps' host
    loop (and its time blocked in replay calls) and device time, and the
    Python garbage collections during the wave: which side a slow wave
    loses its time on."""
    import gc
    v = int(arena["model"]["vocab_size"])
    eng = runner.Engine({"arena": arena, "graphs": True})
    w = wave(batch, prompt, new, 1, v)
    log, t0 = [], [0.0]

    def cb(phase, info):
        if phase == "start":
            t0[0] = time.perf_counter()
        else:
            log.append((info["generation"], (time.perf_counter() - t0[0]) * 1e3))
    inner, st = eng._decode, {}

    def decode(nrows, bucket):
        if "ev0" not in st:
            st["ev0"] = torch.cuda.Event(enable_timing=True)
            st["ev0"].record()
            st["h0"] = time.perf_counter()
        t = time.perf_counter()
        inner(nrows, bucket)
        st["in"] = st.get("in", 0.0) + time.perf_counter() - t
        st["h1"] = time.perf_counter()
    eng._decode = decode
    gc.callbacks.append(cb)
    try:
        for i in range(waves):
            del log[:]
            st.clear()
            evs, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t = time.perf_counter()
            evs.record()
            out = eng.generate(w)
            ev1.record()
            engine_main.generate_reply(out)
            torch.cuda.synchronize()
            print("wave %2d: %6.1f ms; host to first decode step %.1f ms, device prefill %.1f ms; decode: host loop"
                  " %.1f ms (%.1f in replay), device %.1f ms; collections %s"
                  % (i, (time.perf_counter() - t) * 1e3, (st["h0"] - t) * 1e3, evs.elapsed_time(st["ev0"]),
                     (st["h1"] - st["h0"]) * 1e3, st["in"] * 1e3, st["ev0"].elapsed_time(ev1),
                     ", ".join("gen%d %.1f ms" % c for c in log) or "none"))
            sys.stdout.flush()
    finally:
        gc.callbacks.remove(cb)
        eng._decode = inner


def host_profile(arena, batch, prompt):
    """Where the host's time goes in a prefill-only wave (graphs on): the
    functions with the most cumulative time."""
    import cProfile
    import pstats
    v = int(arena["model"]["vocab_size"])
    eng = runner.Engine({"arena": arena, "graphs": True})
    pre = wave(batch, prompt, 1, 1, v)
    for _ in range(3):
        eng.generate(pre)
    torch.cuda.synchronize()
    t, _ = timed(eng, pre, 5)
    print("prefill-only wave, batch %d x %d tokens: %.2f ms (median of 5)" % (batch, prompt, t * 1e3))
    timeline(eng, pre)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(5):
        eng.generate(pre)
    torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("arena")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--rows", type=int, default=25)
    ap.add_argument("--graphs", action="store_true", help="time (not profile) with graphs on as well")
    ap.add_argument("--ab", default="", help="comma-separated batch sizes: time every VARIANTS entry (graphs on)")
    ap.add_argument("--ablate", action="store_true", help="--ab over ABLATIONS (each stock kernel left out in turn)")
    ap.add_argument("--configs", action="store_true", help="--ab over CONFIG_VARIANTS (launch configurations)")
    ap.add_argument("--only", default="", help="comma-separated variant names --ab runs besides the default")
    ap.add_argument("--split", default="", help="comma-separated batch sizes: decode-step split by region and slot")
    ap.add_argument("--host", type=int, default=0, metavar="BATCH",
                    help="cProfile the host side of a prefill-only wave at this batch size (graphs on), its device"
                         " timeline, and the compiled kernels' registers and shared memory")
    ap.add_argument("--waves", type=int, default=0, metavar="BATCH",
                    help="whole waves one by one, each split into host and device time of prefill and decode")
    a = ap.parse_args()
    arena = load_arena(a.arena)
    if a.host:
        host_profile(arena, a.host, a.prompt)
        kernel_meta()
        return
    if a.waves:
        wave_split(arena, a.waves, a.prompt, a.new)
        return
    if a.ab or a.split:
        splits = [int(x) for x in a.split.split(",")] if a.split else []
        steps = ab(arena, [int(x) for x in a.ab.split(",")] if a.ab else splits, a.prompt, a.new,
                   [x for x in a.only.split(",") if x],
                   ABLATIONS if a.ablate else CONFIG_VARIANTS if a.configs else None)
        for b in splits:
            split_report(arena, b, a.prompt, a.new, steps.get(b, 0.0))
        return
    for graphs in ([False, True] if a.graphs else [False]):
        eng = runner.Engine({"arena": arena, "graphs": graphs})
        v = int(arena["model"]["vocab_size"])
        full, pre = wave(a.batch, a.prompt, a.new, 1, v), wave(a.batch, a.prompt, 1, 1, v)
        for w in (full, pre, full):
            eng.generate(w)
        torch.cuda.synchronize()
        times = {}
        for name, w in (("wave", full), ("prefill-only", pre)):
            ts = []
            for _ in range(3):
                t = time.perf_counter()
                eng.generate(w)
                torch.cuda.synchronize()
                ts.append(time.perf_counter() - t)
            times[name] = sorted(ts)[1]
        dec = times["wave"] - times["prefill-only"]
        steps = a.new - 1
        print("graphs=%s batch=%d: wave %.1f ms, prefill-only %.1f ms, decode %.3f ms/step, %.0f tok/s whole wave"
              % (graphs, a.batch, times["wave"] * 1e3, times["prefill-only"] * 1e3, dec / steps * 1e3,
                 a.batch * a.new / times["wave"]))
        if graphs:
            continue
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        for name, w in (("prefill-only wave", pre), ("whole wave", full)):
            with torch.profiler.profile(activities=acts) as prof:
                eng.generate(w)
                torch.cuda.synchronize()
            print("%s (eager):" % name)
            table(prof, a.rows)
        del eng
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
