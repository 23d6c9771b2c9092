"""Would a worker forked after `import torch` start faster? (issue 16)

Run on the GPU machine, outside any sandbox, after a verify filled the
bytecode cache:

    python3 -I scripts/fork-import.py [PYCACHE_DIR] [N]

Three ways to get N interpreters that have imported torch and initialised
CUDA (a tiny allocation, synchronised), each timed from the start to the
last one ready:

  alone     one interpreter, N = 1, for reference;
  parallel  N interpreters started at once, each importing torch (what
            verify's lanes do today);
  fork      one interpreter imports torch (and Triton), then forks N
            children, each of which initialises CUDA.

Every interpreter runs as verify's workers do (-I -B, the bytecode cache
through -X pycache_prefix when given). Prints one JSON line per way.
"""
import json
import os
import subprocess
import sys
import time

CUDA_READY = "import torch; x = torch.empty(1, device='cuda'); torch.cuda.synchronize()"

ZYGOTE = r'''
import os, sys, time
t0 = time.perf_counter()
import torch
try:
    import triton, triton.language
except ImportError:
    pass
t1 = time.perf_counter()
n = int(sys.argv[1])
pids = []
for i in range(n):
    pid = os.fork()
    if pid == 0:
        s = time.perf_counter()
        x = torch.empty(1, device="cuda"); torch.cuda.synchronize()
        os.write(1, ("child %d cuda %.3f\n" % (i, time.perf_counter() - s)).encode())
        os._exit(0)
    pids.append(pid)
for p in pids:
    os.waitpid(p, 0)
print("import %.3f" % (t1 - t0))
'''


def argv(prefix, code, *args):
    a = [sys.executable, "-I", "-B"]
    if prefix:
        a += ["-X", "pycache_prefix=" + prefix]
    return a + ["-c", code] + list(args)


def timed(cmds):
    t = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for c in cmds]
    outs = [p.communicate()[0] for p in procs]
    return time.perf_counter() - t, outs


def main():
    prefix = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else ""
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    for rnd in range(2):
        wall, _ = timed([argv(prefix, CUDA_READY)])
        print(json.dumps({"round": rnd, "way": "alone", "n": 1, "wall_s": round(wall, 3)}))
        wall, _ = timed([argv(prefix, CUDA_READY) for _ in range(n)])
        print(json.dumps({"round": rnd, "way": "parallel", "n": n, "wall_s": round(wall, 3)}))
        wall, outs = timed([argv(prefix, ZYGOTE, str(n))])
        print(json.dumps({"round": rnd, "way": "fork", "n": n, "wall_s": round(wall, 3),
                          "detail": outs[0].strip().splitlines()}))


if __name__ == "__main__":
    main()
