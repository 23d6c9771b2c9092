package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// cudaScript exercises what the verify worker needs on a GPU: CUDA init,
// a matrix product, a CUDA graph replay and a Triton JIT compile (which runs
// a C compiler, ptxas and ldconfig and writes TRITON_CACHE_DIR).
const cudaScript = `
import os, time
t0 = time.time()
import torch
print("cuda", torch.cuda.is_available(), flush=True)
x = torch.randn(1024, 1024, device="cuda")
print("matmul", float((x @ x).abs().sum()) > 0, flush=True)
static_in = torch.randn(256, device="cuda")
static_out = torch.empty_like(static_in)
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    static_out.copy_(static_in * 2)
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    static_out.copy_(static_in * 2)
static_in.fill_(3.0)
g.replay()
torch.cuda.synchronize()
print("graph", bool((static_out == 6).all()), flush=True)
import triton, triton.language as tl
@triton.jit
def add_one(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)
a = torch.arange(1000, device="cuda", dtype=torch.float32)
b = torch.empty_like(a)
add_one[(4,)](a, b, 1000, BLOCK=256)
torch.cuda.synchronize()
print("triton", bool((b == a + 1).all()) and len(os.listdir(os.environ["TRITON_CACHE_DIR"])) > 0, flush=True)
print("elapsed", round(time.time() - t0, 1))
`

// TestCUDAInSandbox runs only where a GPU and a torch with CUDA exist
// (CACHEON_TEST_PYTHON names the interpreter).
func TestCUDAInSandbox(t *testing.T) {
	if _, err := os.Stat("/dev/nvidiactl"); err != nil {
		t.Skip("no NVIDIA GPU here")
	}
	if err := exec.Command(testPython(), "-c", "import torch, triton; assert torch.cuda.is_available()").Run(); err != nil {
		t.Skipf("%s has no torch with CUDA and triton: %v", testPython(), err)
	}
	var passEnv []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "LD_LIBRARY_PATH" || k == "CUDA_VISIBLE_DEVICES" || k == "CUDA_HOME" ||
			strings.HasPrefix(k, "NCCL_") || strings.HasPrefix(k, "NVSHMEM_") || strings.HasPrefix(k, "TORCH_") {
			passEnv = append(passEnv, kv)
		}
	}
	for name, mem := range map[string]uint64{"default-limit": 0, "2GiB": 2 << 30} {
		t.Run(name, func(t *testing.T) {
			p := policy(t)
			p.CUDA = true
			p.MemoryBytes = mem
			p.CPUSeconds = 300
			p.Env = passEnv
			script := filepath.Join(p.Dir, "cuda_check.py")
			if err := os.WriteFile(script, []byte(cudaScript), 0o644); err != nil {
				t.Fatal(err)
			}
			res := run(t, p, 240*time.Second, nil, testPython(), script)
			t.Logf("report:\n%s\nstdout:\n%s\nstderr:\n%s", res.report, res.stdout, res.stderr)
			if res.err != nil {
				t.Fatalf("CUDA in sandbox failed: %v", res.err)
			}
			for _, want := range []string{"cuda True", "matmul True", "graph True", "triton True"} {
				if !strings.Contains(res.stdout, want) {
					t.Errorf("missing %q", want)
				}
			}
		})
	}
}

// TestCUDALayerBisect (CACHEON_SANDBOX_BISECT=1, GPU only) starts CUDA with
// one layer left out at a time and logs which configurations work.
func TestCUDALayerBisect(t *testing.T) {
	if os.Getenv("CACHEON_SANDBOX_BISECT") == "" {
		t.Skip("set CACHEON_SANDBOX_BISECT=1")
	}
	if _, err := os.Stat("/dev/nvidiactl"); err != nil {
		t.Skip("no NVIDIA GPU here")
	}
	child := []string{LayerRlimits, LayerMemory, LayerNetwork, LayerCapabilities, LayerNoNewPrivs, LayerLandlock, LayerSeccomp}
	only := func(keep ...string) func(*Cmd) {
		return func(c *Cmd) {
			c.opts.noPIDNS = true
			for _, l := range child {
				if !slices.Contains(keep, l) {
					c.opts.skip = append(c.opts.skip, l)
				}
			}
		}
	}
	cases := map[string]func(*Cmd){
		"only-pidns":    func(c *Cmd) { c.opts.skip = child },
		"only-rlimits":  only(LayerRlimits),
		"only-memory":   only(LayerMemory),
		"only-network":  only(LayerNetwork),
		"only-caps":     only(LayerCapabilities),
		"only-nnp":      only(LayerNoNewPrivs),
		"only-seccomp":  only(LayerNoNewPrivs, LayerSeccomp),
		"only-landlock": only(LayerNoNewPrivs, LayerLandlock),
	}
	for name, tweak := range cases {
		p := policy(t)
		p.CUDA = true
		p.Env = []string{"LD_LIBRARY_PATH=" + os.Getenv("LD_LIBRARY_PATH")}
		res := run(t, p, 120*time.Second, tweak, testPython(), "-c", "import torch; torch.zeros(1, device='cuda'); print('cuda-ok')")
		lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
		t.Logf("%-14s ok=%v err=%v last=%q", name, strings.Contains(res.stdout, "cuda-ok"), res.err, lines[len(lines)-1])
	}
}
