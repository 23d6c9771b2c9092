package referee

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"cacheon/internal/arena"
)

// DeviceOf is the device guard of an arena's device: the GPU through
// nvidia-smi on cuda, the host otherwise. Every place that wires a
// referee (qualify, calibrate, the validator, the devnet) takes it here.
func DeviceOf(a *arena.Arena) Device {
	if a.Device == "cuda" {
		return NvidiaDevice{}
	}
	return HostDevice{}
}

// HostDevice is the device guard of a CPU arena: the host has no device
// contexts to count, and no device memory to give back.
type HostDevice struct{}

// Quiet implements Device.
func (HostDevice) Quiet(context.Context, int) error { return nil }

// MemoryUsed implements Device.
func (HostDevice) MemoryUsed(context.Context) (int64, error) { return 0, nil }

// Describe implements Device: a CPU arena runs on the host's processor,
// named by /proc/cpuinfo's first "model name" and the CPUs this process
// may use ("cpu: Intel(R) Xeon(R) Processor ×16"), or "cpu" where the
// host does not say.
func (HostDevice) Describe(context.Context) (string, error) {
	return describeCPU(readCPUInfo(), runtime.NumCPU()), nil
}

// readCPUInfo is the head of /proc/cpuinfo, "" where there is none.
func readCPUInfo() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 64<<10))
	return string(b)
}

// describeCPU names a processor from cpuinfo's text and a CPU count.
func describeCPU(cpuinfo string, n int) string {
	for _, l := range strings.Split(cpuinfo, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok && strings.TrimSpace(k) == "model name" {
			if v = strings.Join(strings.Fields(v), " "); v != "" {
				return fmt.Sprintf("cpu: %s ×%d", v, n)
			}
		}
	}
	return "cpu"
}

// NvidiaDevice guards one NVIDIA GPU through nvidia-smi: the compute
// processes holding a context on it, and its memory in use.
type NvidiaDevice struct {
	// Index is the GPU's index as nvidia-smi counts them.
	Index int
	// SMI is the nvidia-smi binary ("" = from PATH).
	SMI string
}

func (d NvidiaDevice) query(ctx context.Context, args ...string) (string, error) {
	smi := d.SMI
	if smi == "" {
		smi = "nvidia-smi"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, smi, append([]string{"-i", strconv.Itoa(d.Index)}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w (%s)", smi, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// Quiet fails when more processes than the referee's own allowed engines
// hold a compute context on the GPU.
func (d NvidiaDevice) Quiet(ctx context.Context, allowed int) error {
	out, err := d.query(ctx, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits")
	if err != nil {
		return err
	}
	var procs []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			procs = append(procs, l)
		}
	}
	if len(procs) > allowed {
		return fmt.Errorf("GPU %d: %d process(es) hold a context (pid, MiB: %s), the referee allows its own %d", d.Index, len(procs), strings.Join(procs, "; "), allowed)
	}
	return nil
}

// MemoryUsed is the GPU's memory in use, bytes.
func (d NvidiaDevice) MemoryUsed(ctx context.Context) (int64, error) {
	out, err := d.query(ctx, "--query-gpu=memory.used", "--format=csv,noheader,nounits")
	if err != nil {
		return 0, err
	}
	mib, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("GPU %d memory.used %q: %w", d.Index, strings.TrimSpace(out), err)
	}
	return mib << 20, nil
}

// Describe names the GPU as a calibration records it: its model and the
// driver, e.g. "cuda: NVIDIA H200 (driver 580.159.04)". A calibration made
// on another model or driver does not describe this device's speed.
func (d NvidiaDevice) Describe(ctx context.Context) (string, error) {
	out, err := d.query(ctx, "--query-gpu=name,driver_version", "--format=csv,noheader")
	if err != nil {
		return "", err
	}
	name, driver, ok := strings.Cut(strings.TrimSpace(out), ",")
	name, driver = strings.TrimSpace(name), strings.TrimSpace(driver)
	if !ok || name == "" || driver == "" || strings.Contains(driver, "\n") {
		return "", fmt.Errorf("GPU %d name,driver_version %q: want one line of two fields", d.Index, strings.TrimSpace(out))
	}
	return fmt.Sprintf("cuda: %s (driver %s)", name, driver), nil
}

// nudgeScript creates the CUDA device's primary context in a process of
// the referee's own (no candidate code, no torch: the driver through
// ctypes), allocates and frees one MiB in it, and ends.
const nudgeScript = `import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
def ok(what, rc):
    if rc != 0:
        sys.exit("%s: CUDA driver error %d" % (what, rc))
ok("cuInit", cu.cuInit(0))
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
ok("cuDeviceGet", cu.cuDeviceGet(ctypes.byref(dev), 0))
ok("cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
ok("cuCtxSetCurrent", cu.cuCtxSetCurrent(ctx))
ok("cuMemAlloc", cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20)))
ok("cuMemFree", cu.cuMemFree_v2(ptr))
ok("cuCtxSynchronize", cu.cuCtxSynchronize())
ok("cuDevicePrimaryCtxRelease", cu.cuDevicePrimaryCtxRelease_v2(dev))
`

// Nudge creates and ends one CUDA context on the device (CUDA device 0 of
// this process's visibility, the device the engines use) from a process of
// the referee's own, and returns once that process has ended
// (Referee.nudge says why).
func (d NvidiaDevice) Nudge(ctx context.Context, python string) error {
	if python == "" {
		python = "python3"
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-I", "-B", "-c", nudgeScript)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w (%s)", err, strings.TrimSpace(out.String()))
	}
	return nil
}
