package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestMemoryLimit(t *testing.T) {
	for _, cuda := range []bool{false, true} {
		t.Run(map[bool]string{false: "cpu-rlimit-as", true: "cuda-rlimit-data"}[cuda], func(t *testing.T) {
			p := policy(t)
			p.CUDA = cuda
			p.MemoryBytes = 2 << 30
			res := py(t, p, "b = bytearray(8 << 30)\nprint('allocated')")
			requireLayer(t, res.report, LayerMemory, true)
			if strings.Contains(res.stdout, "allocated") || res.err == nil {
				t.Fatalf("memory bomb not stopped: err=%v stdout=%q", res.err, res.stdout)
			}
			if !strings.Contains(res.stderr, "MemoryError") {
				var ee *exec.ExitError
				if !errors.As(res.err, &ee) || ee.ExitCode() != -1 {
					t.Fatalf("neither MemoryError nor killed: err=%v stderr=%s", res.err, res.stderr)
				}
			}
		})
	}
}

func TestForkBombBounded(t *testing.T) {
	bomb := `
import os, time
n = 0
try:
    for i in range(100000):
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
    print("unbounded", n)
except OSError as e:
    print("blocked after", n)
`
	t.Run("cgroup-or-rlimit", func(t *testing.T) {
		p := policy(t)
		p.MaxProcs = 32
		res := run(t, p, 60*time.Second, nil, testPython(), "-c", bomb)
		l, _ := res.report.Layer(LayerProcs)
		if !l.Applied {
			t.Fatalf("procs layer not applied: %s", l.Detail)
		}
		if strings.HasPrefix(l.Detail, "watchdog") {
			t.Skipf("no cgroup or rlimit here (%s); covered by the watchdog subtest", l.Detail)
		}
		if !strings.Contains(res.stdout, "blocked after") {
			t.Fatalf("fork bomb not bounded: err=%v stdout=%q stderr=%s", res.err, res.stdout, res.stderr)
		}
		if res.elapsed > 20*time.Second {
			t.Fatalf("took %v: sleeping children were not killed at exit", res.elapsed)
		}
	})
	t.Run("watchdog", func(t *testing.T) {
		p := policy(t)
		p.MaxProcs = 32
		noCgroups := func(c *Cmd) { c.opts.cgroupRoot = t.TempDir() }
		res := run(t, p, 60*time.Second, noCgroups, testPython(), "-c", bomb)
		l, _ := res.report.Layer(LayerProcs)
		if os.Getuid() == 0 && !strings.HasPrefix(l.Detail, "watchdog") {
			t.Fatalf("expected the watchdog as root without cgroups: %s", l.Detail)
		}
		if strings.Contains(res.stdout, "unbounded") || res.err == nil {
			t.Fatalf("fork bomb not stopped: err=%v stdout=%q", res.err, res.stdout)
		}
		if os.Getuid() == 0 && !strings.Contains(res.err.Error(), "process limit exceeded") {
			t.Fatalf("err = %v, want the watchdog's reason", res.err)
		}
	})
}

func TestCPULimitKillsBusyLoop(t *testing.T) {
	p := policy(t)
	p.CPUSeconds = 1
	res := py(t, p, "while True: pass")
	var ee *exec.ExitError
	if !errors.As(res.err, &ee) {
		t.Fatalf("busy loop not killed: %v", res.err)
	}
	if res.elapsed > 15*time.Second {
		t.Fatalf("CPU limit of 1 s took %v", res.elapsed)
	}
	t.Logf("busy loop ended after %v: %v", res.elapsed, res.err)
}

// TestTimeoutKillsGrandchildren checks that no descendant survives a
// timeout or Kill, with every combination of the mechanisms that ensure it.
func TestTimeoutKillsGrandchildren(t *testing.T) {
	cases := []struct {
		name  string
		kill  bool // Kill instead of a context timeout
		tweak func(t *testing.T) func(*Cmd)
	}{
		{"timeout", false, func(*testing.T) func(*Cmd) { return nil }},
		{"kill", true, func(*testing.T) func(*Cmd) { return nil }},
		{"timeout-pgid-only", false, func(t *testing.T) func(*Cmd) {
			dir := t.TempDir()
			return func(c *Cmd) { c.opts.noPIDNS = true; c.opts.cgroupRoot = dir }
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := policy(t)
			marker := "98" + string(rune('1'+i)) + ".654"
			script := `
import subprocess, sys, time
subprocess.Popen(["/bin/sleep", sys.argv[1]])
print("spawned", flush=True)
time.sleep(120)
`
			ctx, cancel := context.WithTimeout(context.Background(), map[bool]time.Duration{false: 2 * time.Second, true: time.Minute}[tc.kill])
			defer cancel()
			c, err := Command(ctx, p, testPython(), "-c", script, marker)
			if err != nil {
				t.Fatal(err)
			}
			if tw := tc.tweak(t); tw != nil {
				tw(c)
			}
			out, err := c.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			line := make([]byte, 8)
			if _, err := out.Read(line); err != nil || string(line[:7]) != "spawned" {
				t.Fatalf("read %q: %v", line, err)
			}
			if len(findProcs(marker)) == 0 {
				t.Fatal("grandchild not found before the kill")
			}
			if tc.kill {
				c.Kill()
			}
			start := time.Now()
			err = c.Wait()
			if err == nil {
				t.Fatal("Wait returned nil for a killed sandbox")
			}
			if !tc.kill && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait error %v does not wrap DeadlineExceeded", err)
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("Wait took %v", time.Since(start))
			}
			deadline := time.Now().Add(3 * time.Second)
			for len(findProcs(marker)) > 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if left := findProcs(marker); len(left) > 0 {
				t.Fatalf("grandchild survived: pids %v", left)
			}
		})
	}
}

// findProcs returns live (non-zombie) processes whose command line contains
// marker.
func findProcs(marker string) []string {
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(marker)) {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		pids = append(pids, e.Name())
	}
	return pids
}
