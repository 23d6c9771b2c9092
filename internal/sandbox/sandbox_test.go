package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// testPython is the interpreter the tests run: CACHEON_TEST_PYTHON, or
// /usr/bin/python3.
func testPython() string { return cmp.Or(os.Getenv("CACHEON_TEST_PYTHON"), "/usr/bin/python3") }

func TestMain(m *testing.M) {
	MaybeRunChild()
	os.Exit(m.Run())
}

// policy returns a policy whose job directory is a fresh temp dir and which
// may run /usr/bin/python3.
func policy(t *testing.T) Policy {
	t.Helper()
	if _, err := os.Stat(testPython()); err != nil {
		t.Skipf("%s not available: %v", testPython(), err)
	}
	paths, err := PythonPaths(context.Background(), testPython())
	if err != nil {
		t.Fatal(err)
	}
	return Policy{Dir: t.TempDir(), Exec: paths, CPUSeconds: 30}
}

type result struct {
	stdout, stderr string
	err            error
	report         Report
	elapsed        time.Duration
}

// run runs name args under p with a wall-clock timeout, failing the test if
// Start fails.
func run(t *testing.T, p Policy, timeout time.Duration, tweak func(*Cmd), name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := Command(ctx, p, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(c)
	}
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	start := time.Now()
	if err := c.Start(); err != nil {
		t.Fatalf("Start: %v\nreport:\n%s", err, c.Report())
	}
	err = c.Wait()
	return result{out.String(), errb.String(), err, c.Report(), time.Since(start)}
}

func py(t *testing.T, p Policy, script string) result {
	t.Helper()
	return run(t, p, 60*time.Second, nil, testPython(), "-c", script)
}

// requireLayer skips the test (after checking the report says so) when the
// kernel cannot give the layer; it fails if the layer is missing otherwise.
func requireLayer(t *testing.T, r Report, name string, kernelHasIt bool) {
	t.Helper()
	l, ok := r.Layer(name)
	if !ok {
		t.Fatalf("report lacks layer %s:\n%s", name, r)
	}
	if !kernelHasIt {
		if l.Applied {
			t.Fatalf("layer %s reported applied on a kernel without it: %s", name, l.Detail)
		}
		t.Skipf("kernel lacks %s; report says not applied: %s", name, l.Detail)
	}
	if !l.Applied {
		t.Fatalf("layer %s not applied: %s", name, l.Detail)
	}
}

func landlockAvailable() bool {
	v, err := ll.LandlockGetABIVersion()
	return err == nil && v >= 1
}

func TestReportListsEveryLayer(t *testing.T) {
	p := policy(t)
	res := run(t, p, 30*time.Second, nil, "/bin/sh", "-c", "echo hello")
	if res.err != nil || res.stdout != "hello\n" {
		t.Fatalf("err=%v stdout=%q stderr=%q", res.err, res.stdout, res.stderr)
	}
	var names []string
	for _, l := range res.report.Layers {
		names = append(names, l.Name)
		if l.Detail == "" {
			t.Errorf("layer %s has no detail", l.Name)
		}
	}
	if strings.Join(names, ",") != strings.Join(layerOrder(), ",") {
		t.Fatalf("layers %v, want %v", names, layerOrder())
	}
	t.Logf("report on this kernel:\n%s", res.report)
	if os.Getuid() == 0 {
		// As root on Linux every layer is available to this package.
		for _, l := range res.report.Layers {
			if l.Name == LayerLandlock && !landlockAvailable() {
				continue
			}
			if !l.Applied {
				t.Errorf("layer %s not applied as root: %s", l.Name, l.Detail)
			}
		}
	}
}

func TestLandlockConfinesFiles(t *testing.T) {
	t.Run("private-proc", func(t *testing.T) { testLandlockConfinesFiles(t, nil) })
	t.Run("host-proc", func(t *testing.T) { testLandlockConfinesFiles(t, func(c *Cmd) { c.opts.noPIDNS = true }) })
}

func testLandlockConfinesFiles(t *testing.T, tweak func(*Cmd)) {
	p := policy(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	roDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(roDir, "data"), []byte("visible"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.ReadOnly = []string{roDir}
	script := `
import os, sys
def attempt(name, f):
    try:
        f()
        print(name, "ok")
    except PermissionError:
        print(name, "denied")
attempt("read-secret", lambda: open(sys.argv[1]).read())
attempt("read-shadow", lambda: open("/etc/shadow").read())
attempt("list-root-home", lambda: os.listdir("/root"))
def host_proc():
    try:
        open("/proc/%s/cmdline" % sys.argv[4]).read()
        print("read-host-proc ok")
    except PermissionError:
        print("read-host-proc denied")
    except FileNotFoundError:
        print("read-host-proc hidden")
host_proc()
attempt("read-ro", lambda: open(sys.argv[2] + "/data").read())
attempt("write-ro", lambda: open(sys.argv[2] + "/new", "w").write("x"))
attempt("write-outside", lambda: open(sys.argv[3] + "/new", "w").write("x"))
attempt("write-tmp", lambda: open("/tmp/cacheon-sandbox-probe", "w").write("x"))
attempt("write-job", lambda: open("job-file", "w").write("x"))
attempt("rename-in-job", lambda: (os.makedirs("a/b"), open("a/f", "w").close(), os.replace("a/f", "a/b/f")))
attempt("read-self", lambda: open("/proc/self/status").read())
`
	res := run(t, p, 60*time.Second, tweak, testPython(), "-c", script, secret, roDir, outside, strconv.Itoa(os.Getpid()))
	requireLayer(t, res.report, LayerLandlock, landlockAvailable())
	if res.err != nil {
		t.Fatalf("err=%v stderr=%s", res.err, res.stderr)
	}
	want := map[string]string{
		"read-secret": "denied", "read-shadow": "denied", "list-root-home": "denied",
		"read-ro": "ok", "write-ro": "denied", "write-outside": "denied", "write-tmp": "denied",
		"write-job": "ok", "rename-in-job": "ok", "read-self": "ok",
	}
	got := probeResults(t, res, want)
	if hp := got["read-host-proc"]; hp != "denied" && hp != "hidden" {
		t.Errorf("read-host-proc: %q: the sandbox read this test's /proc entry", hp)
	}
	if _, err := os.Stat(filepath.Join(p.Dir, "job-file")); err != nil {
		t.Errorf("job file not written: %v", err)
	}
	if _, err := os.Stat("/tmp/cacheon-sandbox-probe"); err == nil {
		os.Remove("/tmp/cacheon-sandbox-probe")
		t.Error("sandbox wrote /tmp")
	}
}

func TestSeccompAndPrivileges(t *testing.T) {
	p := policy(t)
	script := `
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def call(name, f):
    try:
        f()
        print(name, "ok")
    except PermissionError:
        print(name, "EPERM")
    except OSError as e:
        print(name, "errno", e.errno)
def sc(name, *args):
    def f():
        if getattr(libc, name)(*args) == -1:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    return f
call("inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
call("inet6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
call("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))
call("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
call("socketpair", lambda: socket.socketpair())
call("ptrace", sc("ptrace", 0, 0, 0, 0))
call("mount", sc("mount", b"none", b"/mnt", b"tmpfs", 0, None))
call("unshare-user", sc("unshare", 0x10000000))
call("unshare-net", sc("unshare", 0x40000000))
call("setsid", os.setsid)
call("bpf", sc("syscall", 321, 0, 0, 0))
def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
call("fork", fork)
status = open("/proc/self/status").read()
for line in status.splitlines():
    k, _, v = line.partition(":")
    if k in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp"):
        print(k, v.strip())
print("pid", os.getpid())
`
	res := py(t, p, script)
	requireLayer(t, res.report, LayerSeccomp, true)
	if res.err != nil {
		t.Fatalf("err=%v stderr=%s", res.err, res.stderr)
	}
	want := map[string]string{
		"inet": "EPERM", "inet6": "EPERM", "netlink": "EPERM", "unix": "ok", "socketpair": "ok",
		"ptrace": "EPERM", "mount": "EPERM", "unshare-user": "EPERM", "unshare-net": "EPERM",
		"setsid": "EPERM", "bpf": "EPERM", "fork": "ok",
		"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapBnd": "0000000000000000",
		"NoNewPrivs": "1", "Seccomp": "2",
	}
	if l, _ := res.report.Layer(LayerPIDNamespace); l.Applied {
		want["pid"] = "1"
	}
	probeResults(t, res, want)
}

func TestLoopbackNetworkSharedNamespace(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, cleanup, err := NewNetNS(ctx)
	if err != nil {
		if os.Getuid() == 0 {
			t.Fatalf("NewNetNS as root: %v", err)
		}
		t.Skipf("no network namespaces here: %v", err)
	}
	defer cleanup()
	p := policy(t)
	p.Network = NetLoopback
	p.NetNSPath = ns
	server := `
import socket, os
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
open("port.tmp", "w").write(str(s.getsockname()[1]))
os.rename("port.tmp", "port")
c, _ = s.accept()
print("server got", c.recv(16).decode(), "ifaces", [n for _, n in socket.if_nameindex()])
`
	client := `
import socket, time, os
while not os.path.exists("port"):
    time.sleep(0.05)
c = socket.create_connection(("127.0.0.1", int(open("port").read())))
c.sendall(b"hello-rank")
print("client sent")
`
	ctxRun, cancelRun := context.WithTimeout(ctx, 60*time.Second)
	defer cancelRun()
	srv, err := Command(ctxRun, p, testPython(), "-c", server)
	if err != nil {
		t.Fatal(err)
	}
	var srvOut, srvErr bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvErr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	res := run(t, p, 60*time.Second, nil, testPython(), "-c", client)
	srvWait := srv.Wait()
	if res.err != nil || srvWait != nil {
		t.Fatalf("client err=%v stderr=%s; server err=%v stderr=%s", res.err, res.stderr, srvWait, srvErr.String())
	}
	if got := strings.TrimSpace(srvOut.String()); got != "server got hello-rank ifaces ['lo']" {
		t.Fatalf("server output %q", got)
	}
	if l, _ := srv.Report().Layer(LayerNetwork); !l.Applied || !strings.Contains(l.Detail, ns) {
		t.Fatalf("network layer: %+v", l)
	}
}

func TestRequiredLayerFailsClosed(t *testing.T) {
	p := policy(t)
	p.Network = NetLoopback
	p.NetNSPath = "/nonexistent/ns/net"
	p.Require = []string{LayerNetwork}
	c, err := Command(context.Background(), p, "/bin/sh", "-c", "touch ran")
	if err != nil {
		t.Fatal(err)
	}
	err = c.Start()
	if err == nil || !strings.Contains(err.Error(), "required layers not applied: network") {
		t.Fatalf("Start error = %v", err)
	}
	if l, _ := c.Report().Layer(LayerNetwork); l.Applied {
		t.Fatalf("network reported applied: %+v", l)
	}
	if _, err := os.Stat(filepath.Join(p.Dir, "ran")); err == nil {
		t.Fatal("target ran although a required layer failed")
	}
}

func TestPolicyValidation(t *testing.T) {
	for name, p := range map[string]Policy{
		"no dir":         {},
		"relative":       {Dir: "job"},
		"relative ro":    {Dir: "/tmp", ReadOnly: []string{"x"}},
		"netns for none": {Dir: "/tmp", NetNSPath: "/proc/1/ns/net"},
		"unknown layer":  {Dir: "/tmp", Require: []string{"nope"}},
	} {
		if _, err := Command(context.Background(), p, "/bin/true"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestTorchImports(t *testing.T) {
	if testing.Short() {
		t.Skip("imports torch")
	}
	if err := exec.Command(testPython(), "-c", "import torch").Run(); err != nil {
		t.Skipf("%s cannot import torch: %v", testPython(), err)
	}
	p := policy(t)
	res := py(t, p, "import torch\nx = torch.ones(64, 64)\nprint('sum', int((x @ x).sum()))")
	if res.err != nil || strings.TrimSpace(res.stdout) != "sum 262144" {
		t.Fatalf("err=%v stdout=%q stderr=%s\nreport:\n%s", res.err, res.stdout, res.stderr, res.report)
	}
	if strings.TrimSpace(res.stderr) != "" {
		t.Logf("stderr: %s", res.stderr)
	}
}

// TestGlooRanksInSharedNamespace runs a two-rank torch.distributed gloo
// all_reduce, each rank in its own sandbox, joined in one loopback namespace.
func TestGlooRanksInSharedNamespace(t *testing.T) {
	if testing.Short() {
		t.Skip("imports torch twice")
	}
	if err := exec.Command(testPython(), "-c", "import torch.distributed").Run(); err != nil {
		t.Skipf("%s cannot import torch.distributed: %v", testPython(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ns, cleanup, err := NewNetNS(ctx)
	if err != nil {
		t.Skipf("no network namespace: %v", err)
	}
	defer cleanup()
	script := `
import sys, torch, torch.distributed as dist
rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29517", rank=rank, world_size=2)
x = torch.full((4,), float(rank + 1))
dist.all_reduce(x)
print("rank", rank, "sum", x.tolist())
dist.destroy_process_group()
`
	dir := t.TempDir()
	var cmds []*Cmd
	var outs []*bytes.Buffer
	for rank := range 2 {
		p := policy(t)
		p.Dir = dir
		p.Network = NetLoopback
		p.NetNSPath = ns
		c, err := Command(ctx, p, testPython(), "-c", script, string(rune('0'+rank)))
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, c), append(outs, &out)
	}
	for rank, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("rank %d: %v\n%s", rank, err, outs[rank])
		}
		want := "rank " + string(rune('0'+rank)) + " sum [3.0, 3.0, 3.0, 3.0]"
		if !strings.Contains(outs[rank].String(), want) {
			t.Errorf("rank %d output %q, want %q", rank, outs[rank], want)
		}
	}
}

// probeResults reads a probe script's "name result" lines, reports every
// name whose result differs from want, and returns all of them.
func probeResults(t *testing.T, res result, want map[string]string) map[string]string {
	t.Helper()
	t.Logf("stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			got[k] = v
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	return got
}
