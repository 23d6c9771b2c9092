package worker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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

// DetectDevice picks cuda when an NVIDIA device node exists and the
// interpreter's torch sees a GPU, else cpu.
func DetectDevice(ctx context.Context, python string) string {
	if _, err := os.Stat("/dev/nvidiactl"); err != nil {
		return "cpu"
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-I", "-c", "import torch;print(torch.cuda.is_available())")
	cmd.Dir = "/"
	out, err := cmd.Output()
	if err == nil && strings.TrimSpace(string(out)) == "True" {
		return "cuda"
	}
	return "cpu"
}
