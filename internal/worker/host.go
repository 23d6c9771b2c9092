package worker

import (
	"context"
	"os"
	"os/exec"
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
