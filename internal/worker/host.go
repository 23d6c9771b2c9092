package worker

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ScratchRoot is where job directories go: $CACHEON_SCRATCH, else
// /dev/shm when it is a writable directory (worker files are written and
// read once per call, and tmpfs makes that several times cheaper) on a
// host without NVIDIA devices, else "" (the system temp directory). Where
// there are NVIDIA devices, collective ranks are granted /dev/shm (NCCL's
// shared-memory transport), so job directories must not be there.
func ScratchRoot() string {
	if d := os.Getenv("CACHEON_SCRATCH"); d != "" {
		return d
	}
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		return ""
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", ".cacheon-probe-*"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return ""
}

// VisibleGPUs counts the NVIDIA devices a worker would see: the entries of
// CUDA_VISIBLE_DEVICES up to the first that cannot name a device ("-1",
// empty), else the /dev/nvidiaN nodes.
func VisibleGPUs() int {
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		n := 0
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if f == "" || strings.HasPrefix(f, "-") {
				break
			}
			n++
		}
		return n
	}
	nodes, _ := filepath.Glob("/dev/nvidia[0-9]*")
	return len(nodes)
}

// DetectDevice picks cuda when an NVIDIA device node exists, the
// interpreter's torch was built with CUDA and the CUDA driver sees a
// device, else cpu. It does not import torch (3.6 s on the H200 without a
// bytecode cache, paid by every verify that did not name its device): the
// probe reads torch's version file and asks the driver through ctypes.
func DetectDevice(ctx context.Context, python string) string {
	if _, err := os.Stat("/dev/nvidiactl"); err != nil {
		return "cpu"
	}
	out, err := probe(ctx, python, deviceProbe)
	if err != nil {
		return "cpu"
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || lines[0] == "" {
		return "cpu"
	}
	if n, err := strconv.Atoi(strings.TrimSpace(lines[1])); err != nil || n < 1 {
		return "cpu"
	}
	f, err := os.Open(lines[0])
	if err != nil {
		return "cpu"
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil || !torchBuiltWithCUDA(src) {
		return "cpu"
	}
	return "cuda"
}

// deviceProbe prints where torch's version file lies ("" without torch)
// and how many devices the CUDA driver sees (0 without a driver), without
// importing torch.
const deviceProbe = `
import ctypes, importlib.util, os
spec = importlib.util.find_spec("torch")
print(os.path.join(os.path.dirname(spec.origin), "version.py") if spec is not None and spec.origin else "")
n = ctypes.c_int(0)
try:
    cu = ctypes.CDLL("libcuda.so.1")
    if cu.cuInit(0) != 0 or cu.cuDeviceGetCount(ctypes.byref(n)) != 0:
        n.value = 0
except OSError:
    n.value = 0
print(n.value)
`

// probe runs a short trusted script (no candidate code) in the
// interpreter, isolated (-I), from /, for at most a minute, and returns
// what it printed.
func probe(ctx context.Context, python, script string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-I", "-c", script)
	cmd.Dir = "/"
	return cmd.Output()
}

// CUDAArchitecture names the compute capability of the first CUDA device
// the driver shows this process ("sm90" for 9.0), as the engine names it
// in a live binding's context, asking the driver through ctypes (no torch,
// no candidate code). The error says why it could not be had.
func CUDAArchitecture(ctx context.Context, python string) (string, error) {
	out, err := probe(ctx, python, archProbe)
	if err != nil {
		return "", fmt.Errorf("cuda architecture probe: %w", err)
	}
	arch := strings.TrimSpace(string(out))
	if !archName.MatchString(arch) {
		return "", fmt.Errorf("cuda architecture probe: the driver gave %q", arch)
	}
	return arch, nil
}

var archName = regexp.MustCompile(`^sm[0-9]{2,3}$`)

// archProbe prints sm<major><minor> of device 0, or what failed.
const archProbe = `
import ctypes
cu = ctypes.CDLL("libcuda.so.1")
dev, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
if cu.cuInit(0) != 0 or cu.cuDeviceGet(ctypes.byref(dev), 0) != 0:
    print("no device")
elif cu.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) != 0 or cu.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev) != 0:
    print("no compute capability")
else:
    print("sm%d%d" % (major.value, minor.value))
`

// cudaBuild matches torch's version file's CUDA line when it names a
// version ("cuda = '12.1'", "cuda: Optional[str] = '13.0'"); a CPU build
// says "cuda = None".
var cudaBuild = regexp.MustCompile(`(?m)^cuda\s*(?::[^=\n]*)?=\s*['"][0-9][^'"]*['"]`)

// torchBuiltWithCUDA reports whether torch's version.py names a CUDA
// version.
func torchBuiltWithCUDA(versionPy []byte) bool { return cudaBuild.Match(versionPy) }
