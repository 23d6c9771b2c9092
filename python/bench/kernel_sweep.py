"""Sweep launch configurations of the stock Triton kernels on the GPU (a
developer aid; not part of the runtime). Every candidate is timed inside a
CUDA graph over 16 per-layer copies of its operands, so the weights do not
sit in L2 and launch gaps are those of graph replay:

    python3 python/bench/kernel_sweep.py [gemm|attn|uniform|prefetch|pfgemm|lm_head|tma|gemv|qkv ...]

Prints, per shape, cuBLAS (where it applies) and the fastest configurations
in microseconds per call and GB/s of compulsory traffic.
"""
import itertools
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from cacheon_runtime.engine import decode_gemm, kernels, stock  # noqa: E402

DEV = torch.device("cuda")
BF = torch.bfloat16
LAYERS = 16


def graph_us(calls, reps=20):
    """Mean microseconds per call of calls (a list of thunks) replayed in one graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            for c in calls:
                c()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        g.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) * 1e3 / reps / len(calls)


def report(title, nbytes, results, top=5):
    results = sorted(results, key=lambda r: r[1])
    print("%s (%.1f MB):" % (title, nbytes / 1e6))
    for name, us, _cfg in results[:top]:
        print("  %8.2f us %7.0f GB/s  %s" % (us, nbytes / us / 1e3, name))
    sys.stdout.flush()
    return results


def try_time(name, calls, out, cfg=None):
    """Append (name, microseconds per call, cfg) to out; say so if it fails."""
    try:
        out.append((name, graph_us(calls), cfg))
    except Exception as e:  # noqa: BLE001
        print("  %s failed: %s" % (name, str(e).splitlines()[0][:120]))


GEMMS = {"qkv": (3072, 2048, False), "o": (2048, 2048, True), "gate_up": (16384, 2048, False),
         "down": (2048, 8192, True)}


def sweep_gemm(m, prior=None):
    """Sweep at m rows; with prior (shape -> configs) time only those."""
    found = {}
    for name, (n, k, add) in GEMMS.items():
        ws = [torch.randn(n, k, device=DEV, dtype=BF) * 0.02 for _ in range(LAYERS)]
        x = torch.randn(m, k, device=DEV, dtype=BF)
        outs = [torch.zeros(m, n, device=DEV, dtype=BF) for _ in range(LAYERS)]
        nbytes = n * k * 2
        res = []
        if add:
            try_time("cublas addmm_", [lambda o=o, w=w: o.addmm_(x, w.t()) for o, w in zip(outs, ws)], res)
        else:
            try_time("cublas mm", [lambda o=o, w=w: torch.mm(x, w.t(), out=o) for o, w in zip(outs, ws)], res)
        cands = []
        for (bn, bk, warps), split in [] if prior else itertools.product(
                [(32, 128, 4), (32, 256, 4), (64, 128, 4), (64, 256, 4), (64, 128, 8), (128, 128, 8), (128, 64, 4)],
                [1, 2, 4, 8]):
            if k // split < bk:
                continue
            cands.append((bn, bk, split, warps, 4))
        for cfg in prior[name] if prior else cands:
            try_time("skinny %s" % (cfg,), [lambda o=o, w=w: decode_gemm.skinny(x, w, o, add=add, config=cfg)
                                            for o, w in zip(outs, ws)], res, cfg)
        best = sorted((r for r in res if r[2] is not None), key=lambda r: r[1])[:3]
        for _name, _us, cfg in [] if prior else best:
            for st in (3, 5, 6):
                c2 = cfg[:4] + (st,)
                try_time("skinny %s" % (c2,), [lambda o=o, w=w, c2=c2: decode_gemm.skinny(x, w, o, add=add, config=c2)
                                               for o, w in zip(outs, ws)], res, c2)
        auto = decode_gemm.skinny_config(n, k)
        try_time("skinny auto %s" % (auto,), [lambda o=o, w=w: decode_gemm.skinny(x, w, o, add=add)
                                              for o, w in zip(outs, ws)], res)
        found[name] = [r[2] for r in sorted((r for r in res if r[2] is not None), key=lambda r: r[1])[:4]]
        report("gemm %s M=%d N=%d K=%d add=%s" % (name, m, n, k, add), nbytes, res, top=6)
        # correctness of the automatic choice
        o = torch.zeros(m, n, device=DEV, dtype=BF)
        decode_gemm.skinny(x, ws[0], o, add=False)
        ref = (x.float() @ ws[0].float().t())
        print("  auto max abs err %.3g (ref max %.3g)" % ((o.float() - ref).abs().max().item(), ref.abs().max().item()))
        del ws, outs
        torch.cuda.empty_cache()
    return found


def attn_case(b, uniform=0):
    """A 16-layer paged-decode case at batch b: caches, block table (pages
    in random order), lengths (129..384), q, outs.
    uniform=L: every sequence has L positions and the pages lie as the
    engine's allocator leaves them after 128-token prompts (each prompt's 8
    pages in a row, later pages taken in turn by the rows)."""
    ps, hkv, hq, d, pages = 16, 8, 32, 64, 4096
    kcs = [torch.randn(pages, ps, hkv, d, device=DEV, dtype=BF) for _ in range(LAYERS)]
    vcs = [torch.randn(pages, ps, hkv, d, device=DEV, dtype=BF) for _ in range(LAYERS)]
    g = torch.Generator().manual_seed(0)
    lens = torch.randint(129, 385, (b,), generator=g) if b > 1 else torch.tensor([256])
    maxp = 512
    bt = torch.zeros(b, maxp, dtype=torch.int32)
    perm = torch.randperm(pages - 1, generator=g) + 1
    used = 0
    for i in range(b):
        np_ = -(-int(lens[i]) // ps)
        bt[i, :np_] = perm[used:used + np_].to(torch.int32)
        used += np_
    if uniform:
        lens = torch.full((b,), uniform)
        np_ = -(-uniform // ps)
        for i in range(b):
            for j in range(np_):
                bt[i, j] = 1 + (i * 8 + j if j < 8 else b * 8 + (j - 8) * b + i)
    bt, sl = bt.to(DEV), lens.to(torch.int32).to(DEV)
    q = torch.randn(b, hq, d, device=DEV, dtype=BF)
    outs = [torch.empty(b, hq, d, device=DEV, dtype=BF) for _ in range(LAYERS)]
    nbytes = int(lens.sum()) * hkv * d * 2 * 2
    return kcs, vcs, bt, sl, q, outs, nbytes, lens


def sweep_attn(b):
    kcs, vcs, bt, sl, q, outs, nbytes, lens = attn_case(b)
    res = []
    for splits, bn, stages, warps in itertools.product([2, 4, 8, 9, 12, 16] if b == 1 else [1, 2, 3, 4],
                                                       [32, 64, 128], [2, 3] if b == 1 else [2, 3, 4], [4, 8]):
        if warps == 8 and (b == 1 or bn < 128):
            continue  # eight warps only pay off on the largest tiles
        t = {"waves": 0.5, "block_n": bn, "warps": warps, "stages": stages, "splits": splits}
        try_time("decode %s" % (t,), [lambda o=o, kc=kc, vc=vc, t=t: kernels.attention_decode(q, kc, vc, bt, sl, 0.125, o, t)
                                      for o, kc, vc in zip(outs, kcs, vcs)], res, t)
    try_time("decode default", [lambda o=o, kc=kc, vc=vc: kernels.attention_decode(q, kc, vc, bt, sl, 0.125, o)
                                for o, kc, vc in zip(outs, kcs, vcs)], res)
    report("paged decode B=%d mean len %.0f" % (b, lens.float().mean()), nbytes, res, top=8)
    o = torch.empty(b, hq, d, device=DEV, dtype=BF)
    ref = torch.empty(b, hq, d, device=DEV, dtype=BF)
    best = sorted(res, key=lambda r: r[1])[0][2] if res else None
    if isinstance(best, dict):
        kernels.attention_decode(q, kcs[0], vcs[0], bt, sl, 0.125, o, best)
        stock.attention_decode(q, kcs[0], vcs[0], bt, sl, 0.125, ref)
        print("  best vs stock max abs diff %.3g" % (o.float() - ref.float()).abs().max().item())


def torch_decode(q, kc, vc, bt, sl, scale):
    """fp32 reference of paged decode (one sequence at a time)."""
    b, hq, d = q.shape
    ps, hkv = kc.shape[1], kc.shape[2]
    out = torch.empty(b, hq, d, device=q.device, dtype=torch.float32)
    for i in range(b):
        n = int(sl[i])
        pages = bt[i, :-(-n // ps)].long()
        k = kc[pages].reshape(-1, hkv, d)[:n].float().repeat_interleave(hq // hkv, 1)
        v = vc[pages].reshape(-1, hkv, d)[:n].float().repeat_interleave(hq // hkv, 1)
        s = torch.einsum("hd,nhd->hn", q[i].float(), k) * scale
        out[i] = torch.einsum("hn,nhd->hd", torch.softmax(s, -1), v)
    return out


def sweep_prefetch():
    """The skinny GEMM's L2 prefetch (0, 1, 2, 4 tiles) at the decode shapes."""
    for m in (64, 16):
        for name, (n, k, add) in GEMMS.items():
            ws = [torch.randn(n, k, device=DEV, dtype=BF) * 0.02 for _ in range(LAYERS)]
            x = torch.randn(m, k, device=DEV, dtype=BF)
            outs = [torch.zeros(m, n, device=DEV, dtype=BF) for _ in range(LAYERS)]
            res = []
            for pf in (0, 1, 2, 4, 0, 1, 2):
                try_time("skinny auto prefetch=%s" % pf, [lambda o=o, w=w, pf=pf: decode_gemm.skinny(x, w, o, add=add, prefetch=pf)
                                                         for o, w in zip(outs, ws)], res)
            report("gemm %s M=%d N=%d K=%d" % (name, m, n, k), n * k * 2, res, top=7)
            del ws, outs


def sweep_lm_head(m=64):
    """lm_head at m rows: cuBLAS against the skinny GEMM (two weight copies)."""
    n, k = 128256, 2048
    ws = [torch.randn(n, k, device=DEV, dtype=BF) * 0.02 for _ in range(2)]
    x = torch.randn(m, k, device=DEV, dtype=BF)
    outs = [torch.zeros(m, n, device=DEV, dtype=BF) for _ in range(2)]
    res = []
    try_time("cublas mm", [lambda o=o, w=w: torch.mm(x, w.t(), out=o) for o, w in zip(outs, ws)], res)
    for cfg, pf in itertools.product([(64, 128, 1, 4, 3), (64, 128, 1, 4, 4), (128, 128, 1, 8, 3), (128, 64, 1, 4, 4),
                                      (64, 256, 1, 4, 3), (128, 128, 1, 4, 3), (256, 64, 1, 8, 3)], (0, 1)):
        try_time("skinny %s prefetch=%d" % (cfg, pf), [lambda o=o, w=w, c=cfg, pf=pf: decode_gemm.skinny(
            x, w, o, config=c, prefetch=pf) for o, w in zip(outs, ws)], res, cfg)
    report("lm_head M=%d N=%d K=%d" % (m, n, k), n * k * 2, res, top=8)
    del ws, outs
    torch.cuda.empty_cache()


def sweep_pf_gemm(m=64):
    """Skinny configurations near the automatic ones, with 0, 1 and 2 tiles prefetched."""
    near = {"qkv": [(32, 256, 1, 4, 4), (32, 128, 1, 4, 4), (32, 128, 2, 4, 4), (64, 128, 1, 4, 4), (16, 256, 1, 4, 4),
                    (32, 256, 2, 4, 4), (64, 256, 2, 4, 3)],
            "o": [(32, 256, 2, 4, 4), (32, 128, 2, 4, 4), (32, 128, 4, 4, 4), (64, 128, 2, 4, 4), (16, 256, 2, 4, 4),
                  (32, 256, 4, 4, 3), (64, 128, 4, 4, 3)],
            "gate_up": [(64, 128, 1, 4, 3), (64, 128, 1, 4, 4), (128, 128, 1, 8, 3), (64, 256, 1, 4, 3),
                        (32, 256, 1, 4, 4)],
            "down": [(64, 128, 4, 4, 5), (64, 128, 8, 4, 4), (32, 256, 4, 4, 4), (64, 256, 4, 4, 3), (32, 128, 8, 4, 5),
                     (128, 128, 4, 8, 3), (64, 128, 2, 4, 5)]}
    for name, (n, k, add) in GEMMS.items():
        ws = [torch.randn(n, k, device=DEV, dtype=BF) * 0.02 for _ in range(LAYERS)]
        x = torch.randn(m, k, device=DEV, dtype=BF)
        outs = [torch.zeros(m, n, device=DEV, dtype=BF) for _ in range(LAYERS)]
        res = []
        for cfg, pf in itertools.product(near[name], (0, 1, 2)):
            try_time("skinny %s prefetch=%d" % (cfg, pf), [lambda o=o, w=w, c=cfg, pf=pf: decode_gemm.skinny(
                x, w, o, add=add, config=c, prefetch=pf) for o, w in zip(outs, ws)], res, cfg)
        report("gemm %s M=%d N=%d K=%d" % (name, m, n, k), n * k * 2, res, top=6)
        del ws, outs
        torch.cuda.empty_cache()


def sweep_tma(m=64, wide=True):
    """The skinny GEMM with and without TMA copies at the decode shapes (with
    wide, also configurations near the automatic one), and lm_head's
    sampling pass both ways."""
    for name, (n, k, add) in GEMMS.items():
        ws = [torch.randn(n, k, device=DEV, dtype=BF) * 0.02 for _ in range(LAYERS)]
        x = torch.randn(m, k, device=DEV, dtype=BF)
        outs = [torch.zeros(m, n, device=DEV, dtype=BF) for _ in range(LAYERS)]
        auto = decode_gemm.skinny_config(n, k)
        res = []
        for tma in (False, True):
            try_time("auto %s tma=%s" % (auto, tma), [lambda o=o, w=w, t=tma: decode_gemm.skinny(x, w, o, add=add, tma=t)
                                                      for o, w in zip(outs, ws)], res)
        bn0, bk0, sp0, wp0, st0 = auto
        cfgs = set()
        for bn, bk, sp, wp, st in itertools.product((bn0, 128), (128, 256), (sp0, 2 * sp0), (4,), (3, 5)):
            if wide and k // sp >= bk:
                cfgs.add((bn, bk, sp, wp, st))
        for cfg in sorted(cfgs):
            try_time("tma %s" % (cfg,), [lambda o=o, w=w, c=cfg: decode_gemm.skinny(x, w, o, add=add, config=c, tma=True)
                                         for o, w in zip(outs, ws)], res, cfg)
        report("gemm %s M=%d N=%d K=%d (tma)" % (name, m, n, k), n * k * 2, res, top=8)
        o = torch.zeros(m, n, device=DEV, dtype=BF)
        decode_gemm.skinny(x, ws[0], o, tma=True)
        ref = x.float() @ ws[0].float().t()
        print("  auto tma max abs err %.3g (ref max %.3g)" % ((o.float() - ref).abs().max().item(),
                                                               ref.abs().max().item()))
        del ws, outs
        torch.cuda.empty_cache()
    n, k = 128256, 2048
    ws = [torch.randn(n, k, device=DEV, dtype=BF) * 0.02 for _ in range(2)]
    h = torch.randn(m, k, device=DEV, dtype=BF)
    chunks = -(-n // decode_gemm.skinny_config(n, k)[0])
    part = (torch.empty(m, chunks, device=DEV), torch.empty(m, chunks, device=DEV, dtype=torch.int32),
            torch.empty(m, chunks, device=DEV))
    res = []
    for tma in (False, True):
        try_time("lm_head sampling pass tma=%s" % tma, [lambda w=w, t=tma: decode_gemm.skinny(h, w, h, sample=part, tma=t)
                                                        for w in ws], res)
    report("lm_head M=%d N=%d K=%d" % (m, n, k), n * k * 2, res)
    del ws
    torch.cuda.empty_cache()


def sweep_attn_uniform(b=64, length=256):
    """Paged decode at engine-like equal lengths and page layout (the
    launch configurations of sweep_attn plus the default)."""
    kcs, vcs, bt, sl, q, outs, nbytes, lens = attn_case(b, uniform=length)
    want = torch_decode(q, kcs[0], vcs[0], bt, sl, 0.125)
    res = []
    try_time("decode default", [lambda o=o, kc=kc, vc=vc: kernels.attention_decode(q, kc, vc, bt, sl, 0.125, o)
                                for o, kc, vc in zip(outs, kcs, vcs)], res)
    for splits, bn, stages, warps in itertools.product([1, 2, 3, 4], [32, 64, 128], [2, 3], [4, 8]):
        if warps == 8 and bn < 128:
            continue
        t = {"waves": 0.5, "block_n": bn, "warps": warps, "stages": stages, "splits": splits}
        kernels.attention_decode(q, kcs[0], vcs[0], bt, sl, 0.125, outs[0], t)
        err = (outs[0].float() - want).abs().max().item()
        if err > 0.03:
            print("  %s WRONG: max abs err %.3g" % (t, err))
            continue
        try_time("decode %s" % (t,), [lambda o=o, kc=kc, vc=vc, t=t: kernels.attention_decode(
            q, kc, vc, bt, sl, 0.125, o, t) for o, kc, vc in zip(outs, kcs, vcs)], res, t)
    report("paged decode B=%d, every length %d, engine page layout" % (b, length), nbytes, res, top=10)
    del kcs, vcs
    torch.cuda.empty_cache()


GEMV = {"o": (2048, 2048, True), "gate_up": (16384, 2048, False), "down": (2048, 8192, True),
        "lm_head": (128256, 2048, False)}


def sweep_gemv():
    for name, (n, k, add) in GEMV.items():
        copies = LAYERS if name != "lm_head" else 2
        ws = [torch.randn(n, k, device=DEV, dtype=BF) * 0.02 for _ in range(copies)]
        x = torch.randn(1, k, device=DEV, dtype=BF)
        outs = [torch.zeros(1, n, device=DEV, dtype=BF) for _ in range(copies)]
        res = []
        try_time("cublas", [lambda o=o, w=w: (o.addmm_(x, w.t()) if add else torch.mm(x, w.t(), out=o))
                            for o, w in zip(outs, ws)], res)
        for bn, bk, warps, stages in [(2, 2048, 8, 3), (4, 1024, 8, 3), (4, 2048, 8, 3), (8, 512, 4, 3),
                                      (8, 1024, 8, 3), (2, 1024, 4, 3), (1, 2048, 8, 3), (4, 512, 4, 4),
                                      (16, 256, 4, 4), (2, 2048, 8, 2), (2, 2048, 8, 4), (4, 1024, 4, 4)]:
            try_time("gemv %s" % ((bn, bk, warps, stages),),
                     [lambda o=o, w=w, c=(bn, bk, warps, stages): decode_gemm.gemv(x, w, o, add=add, block_n=c[0], block_k=c[1],
                                                                              warps=c[2], stages=c[3], dot=False)
                      for o, w in zip(outs, ws)], res)
        report("gemv %s N=%d K=%d" % (name, n, k), n * k * 2, res, top=5)
        del ws, outs
        torch.cuda.empty_cache()


def sweep_qkv():
    hq, hkv, d, k, ps = 32, 8, 64, 2048, 16
    n = (hq + 2 * hkv) * d
    ws = [torch.randn(n, k, device=DEV, dtype=BF) * 0.02 for _ in range(LAYERS)]
    h = torch.randn(1, k, device=DEV, dtype=BF)
    kcs = [torch.zeros(64, ps, hkv, d, device=DEV, dtype=BF) for _ in range(LAYERS)]
    vcs = [torch.zeros(64, ps, hkv, d, device=DEV, dtype=BF) for _ in range(LAYERS)]
    cos = torch.randn(8192, d // 2, device=DEV)
    sin = torch.randn(8192, d // 2, device=DEV)
    pos = torch.tensor([200], device=DEV)
    bt = torch.arange(1, 33, dtype=torch.int32, device=DEV).view(1, 32)
    q = torch.empty(1, hq, d, device=DEV, dtype=BF)
    res = []
    for pairs, bk, warps, stages in itertools.product([1, 2, 4, 8], [1024, 2048], [4, 8], [3]):
        try_time("qkv_rope pairs=%d bk=%d warps=%d" % (pairs, bk, warps),
                 [lambda w=w, kc=kc, vc=vc, c=(pairs, bk, warps, stages): decode_gemm.qkv_rope(
                     h, w, pos, bt, cos, sin, q, kc, vc, hq, hkv, pairs=c[0], block_k=c[1], warps=c[2], stages=c[3])
                  for w, kc, vc in zip(ws, kcs, vcs)], res)
    qkv = torch.empty(1, n, device=DEV, dtype=BF)
    try_time("gemv + rope_store", [lambda w=w, kc=kc, vc=vc: (decode_gemm.gemv(h, w, qkv), kernels.rope_store(
        qkv, pos, None, cos, sin, q, kc, vc, hq, hkv, block_table=bt)) for w, kc, vc in zip(ws, kcs, vcs)], res)
    report("qkv_rope N=%d K=%d" % (n, k), n * k * 2, res, top=6)


def main():
    what = sys.argv[1:] or ["gemm", "attn", "gemv", "qkv"]
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), torch.__version__)
    if "gemm" in what:
        found = sweep_gemm(64)
        sweep_gemm(32, found)
        sweep_gemm(16, found)
    if "attn" in what:
        for b in (64, 1):
            sweep_attn(b)
    if "uniform" in what:
        sweep_attn_uniform(64, 256)
        sweep_attn_uniform(64, 384)
    if "lm_head" in what:
        sweep_lm_head()
    if "pfgemm" in what:
        sweep_pf_gemm(64)
        sweep_pf_gemm(32)
    if "prefetch" in what:
        sweep_prefetch()
    if "tma" in what:
        sweep_tma(64)
        sweep_tma(32, wide=False)
        sweep_tma(16, wide=False)
    if "gemv" in what:
        sweep_gemv()
    if "qkv" in what:
        sweep_qkv()


if __name__ == "__main__":
    main()
