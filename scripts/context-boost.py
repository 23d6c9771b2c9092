# Does a GPU process get faster after another process's CUDA context has
# lived and ended beside it? (docs/performance.md, session 9.) A graph-replayed
# decode-like step, timed in chunks, alone, while a child holds a context
# (idle), and after it ends. Trusted developer tool: python3 scripts/context-boost.py
import subprocess, sys, time, torch
dev = "cuda"
torch.manual_seed(0)
L, B, H, F = 16, 64, 2048, 8192
W1 = [torch.randn(H, 2 * F, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(L)]
W2 = [torch.randn(F, H, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(L)]
x0 = torch.randn(B, H, device=dev, dtype=torch.bfloat16)
def step(x):
    for i in range(L):
        h = x @ W1[i]
        a, g = h.chunk(2, dim=-1)
        x = x + (torch.nn.functional.silu(a) * g) @ W2[i]
    return x
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    for _ in range(3): y = step(x0)
torch.cuda.synchronize()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g): y = step(x0)
def chunk(n=40):
    t = time.perf_counter()
    for _ in range(n): g.replay()
    torch.cuda.synchronize()
    return n / (time.perf_counter() - t)
for _ in range(8): chunk()
child = "import torch,time; x=torch.empty(20<<30,dtype=torch.uint8,device='cuda'); x.fill_(1); torch.cuda.synchronize(); print('child ctx up', flush=True); time.sleep(4.5)"
phases = {}
def run(label, secs):
    end = time.time() + secs
    while time.time() < end:
        phases.setdefault(label, []).append(chunk())
run("alone", 6)
p = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
import select
while not select.select([p.stdout], [], [], 0)[0]:
    run("child importing", 0.25)
p.stdout.readline()
run("child ctx alive", 4)
p.wait()
run("after child exit", 6)
base = sum(phases["alone"]) / len(phases["alone"])
for k, v in phases.items():
    v = v[2:] if len(v) > 4 else v
    print("%-18s %3d chunks  steps/s %.2f  rel %.4f  min %.2f max %.2f" % (k, len(v), sum(v) / len(v), sum(v) / len(v) / base, min(v), max(v)))
