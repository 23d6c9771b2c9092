package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"cacheon/internal/sandbox"
	"cacheon/internal/tritoncache"
	pysrc "cacheon/python"
)

// MaterializeRuntime writes the embedded cacheon_runtime package under
// cacheDir/<digest>/cacheon_runtime (content-addressed, written once,
// atomically) and returns cacheDir/<digest>, the directory to put on the
// worker's sys.path.
func MaterializeRuntime(cacheDir string) (string, error) {
	names, contents, digest, err := embeddedRuntime()
	if err != nil {
		return "", fmt.Errorf("materialize runtime: %w", err)
	}
	final := filepath.Join(cacheDir, "runtime-"+digest)
	if st, err := os.Stat(filepath.Join(final, "cacheon_runtime")); err == nil && st.IsDir() {
		return final, nil
	}
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return "", fmt.Errorf("materialize runtime: %w", err)
	}
	tmp, err := os.MkdirTemp(cacheDir, ".runtime-*")
	if err != nil {
		return "", fmt.Errorf("materialize runtime: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, n := range names {
		p := filepath.Join(tmp, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", fmt.Errorf("materialize runtime: %w", err)
		}
		if err := os.WriteFile(p, contents[n], 0o644); err != nil {
			return "", fmt.Errorf("materialize runtime: %w", err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("materialize runtime: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(final); serr == nil {
			return final, nil // another process won the race
		}
		return "", fmt.Errorf("materialize runtime: %w", err)
	}
	return final, nil
}

// RuntimeDigest names the embedded cacheon_runtime package by its content
// (16 hex digits, as MaterializeRuntime names its directory).
func RuntimeDigest() (string, error) {
	_, _, digest, err := embeddedRuntime()
	return digest, err
}

// embeddedRuntime lists the embedded runtime's files in order, with their
// contents and the digest of them all.
func embeddedRuntime() ([]string, map[string][]byte, string, error) {
	files := pysrc.Files()
	var names []string
	err := fs.WalkDir(files, "cacheon_runtime", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		return nil, nil, "", fmt.Errorf("list: %w", err)
	}
	sort.Strings(names)
	h := sha256.New()
	contents := map[string][]byte{}
	for _, n := range names {
		b, err := fs.ReadFile(files, n)
		if err != nil {
			return nil, nil, "", fmt.Errorf("read %s: %w", n, err)
		}
		contents[n] = b
		fmt.Fprintf(h, "%d:%s:%d:", len(n), n, len(b))
		h.Write(b)
	}
	return names, contents, hex.EncodeToString(h.Sum(nil))[:16], nil
}

// FindPython chooses the interpreter for workers: explicit (the --python
// flag), then $CACHEON_PYTHON, then the first python3 on PATH that has
// torch, then /usr/bin/python3 if it has torch. "Has torch" means the
// interpreter finds the package (importlib.util.find_spec), without
// importing it: the import takes a second or more, and the worker imports
// torch anyway, reporting a broken installation at its hello.
func FindPython(ctx context.Context, explicit string) (string, error) {
	p, _, err := FindInstall(ctx, explicit)
	return p, err
}

// FindInstall is FindPython that also returns the chosen interpreter's
// installation (sandbox.InspectPython): the same interpreter start that
// finds torch tells the sandbox's paths and names the bytecode cache, so
// a verify or an engine start asks it once.
func FindInstall(ctx context.Context, explicit string) (string, sandbox.PythonInstall, error) {
	if explicit != "" {
		explicit = AbsCommand(explicit)
		in, err := inspectTorch(ctx, explicit)
		return explicit, in, err
	}
	if env := os.Getenv("CACHEON_PYTHON"); env != "" {
		env = AbsCommand(env)
		in, err := inspectTorch(ctx, env)
		return env, in, err
	}
	var tried []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, "python3")
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			continue
		}
		if in, err := inspectTorch(ctx, p); err == nil {
			return p, in, nil
		}
		tried = append(tried, p)
	}
	if in, err := inspectTorch(ctx, "/usr/bin/python3"); err == nil {
		return "/usr/bin/python3", in, nil
	}
	tried = append(tried, "/usr/bin/python3")
	if ctx.Err() != nil {
		// every start failed because the caller gave up, not for want
		// of torch
		return "", sandbox.PythonInstall{}, fmt.Errorf("finding python3 with torch: %w", context.Cause(ctx))
	}
	return "", sandbox.PythonInstall{}, fmt.Errorf("no python3 that imports torch (tried %s); install python3-torch or pass --python / set CACHEON_PYTHON", strings.Join(tried, ", "))
}

// AbsCommand makes an interpreter path independent of the working
// directory (workers run in their job directory): a path with a separator
// becomes absolute, a bare name is looked up on PATH. What cannot be
// resolved is returned as given, for the start to report.
func AbsCommand(p string) string {
	if strings.ContainsRune(p, os.PathSeparator) {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
		return p
	}
	if abs, err := exec.LookPath(p); err == nil && filepath.IsAbs(abs) {
		return abs
	}
	return p
}

// inspectTorch inspects python's installation and reports whether it
// finds the torch package.
func inspectTorch(ctx context.Context, python string) (sandbox.PythonInstall, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	in, err := sandbox.InspectPython(ctx, python)
	if err != nil && parent.Err() != nil {
		// the caller gave up: say so, not that torch is missing
		return sandbox.PythonInstall{}, fmt.Errorf("inspecting %s: %w", python, context.Cause(parent))
	}
	if err != nil {
		return sandbox.PythonInstall{}, fmt.Errorf("%s cannot import torch: %w", python, err)
	}
	if !in.HasTorch() {
		return sandbox.PythonInstall{}, fmt.Errorf("%s cannot import torch: ModuleNotFoundError: No module named torch", python)
	}
	return in, nil
}

// PlainStarter starts workers without confinement, in their own process
// group. Use it only for the project's own tests and trusted diagnostics;
// verify uses the sandbox.
type PlainStarter struct{}

// Start implements Starter.
func (PlainStarter) Start(ctx context.Context, argv, env []string, dir string) (Process, error) {
	return StartCmd(argv, env, dir, nil)
}

// CmdProcess adapts an exec.Cmd started in its own process group.
type CmdProcess struct {
	cmd      *exec.Cmd
	done     chan struct{} // closed once the process is reaped
	doneOnce sync.Once
	stdin    io.WriteCloser
	stdout   io.ReadCloser
	stderr   io.ReadCloser
}

// StartCmd starts argv in its own process group with pipes. prep may adjust
// the command (sandbox wrapping) before it starts.
func StartCmd(argv, env []string, dir string, prep func(*exec.Cmd) error) (*CmdProcess, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = workerEnv(env)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if prep != nil {
		if err := prep(cmd); err != nil {
			return nil, err
		}
	}
	p := &CmdProcess{cmd: cmd}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	p.done = make(chan struct{})
	// Fork from a thread locked until the child is reaped: the
	// parent-death signal is tied to the forking thread, which Go may
	// otherwise destroy (see sandbox.Cmd.Start).
	forked := make(chan error, 1)
	var outR, errR *os.File
	go func() {
		runtime.LockOSThread()
		var err error
		outR, errR, err = startWithOwnPipes(func(out, errw *os.File) { cmd.Stdout, cmd.Stderr = out, errw }, cmd.Start)
		forked <- err
		if err == nil {
			<-p.done
		}
		runtime.UnlockOSThread()
	}()
	if err := <-forked; err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	p.stdout, p.stderr = outR, errR
	return p, nil
}

// minimalEnv is the environment every worker starts from: nothing of the
// validator's own environment leaks except what a Python needs to run, and
// NVLink multicast is off in NCCL, PyTorch and NVSHMEM whatever the host
// says (a process that uses it can put shared GPUs out of service).
func minimalEnv() []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/nonexistent"}
	for _, k := range []string{"CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, "NCCL_NVLS_ENABLE=0", "TORCH_SYMM_MEM_DISABLE_MULTICAST=1", "NVSHMEM_DISABLE_NVLS=1")
}

// Threads is the one intra-op thread count of every process that runs
// candidate code, on every device, in verify and in serving
// (OMP_NUM_THREADS; the runtime also sets torch.set_num_threads to it,
// python/cacheon_runtime/guard.py).
const Threads = 1

// CandidateEnv is the job part of the environment of every process that
// runs candidate code: the verify worker (each rank) and the arena engine
// get the same names, so that a kernel cannot tell grading from serving by
// which variables exist. HOME, TMPDIR and the Triton cache lie in the job
// directory (the only place the runtime's audit hook lets the process
// write); the NCCL settings are verify's collective defaults, harmless
// where nothing is collective. Collective ranks add the operator's NCCL_*
// settings (CollectiveEnv), which a one-rank engine, serving no
// collective, does not get; a tensor-parallel engine's ranks do. The values of HOME, TMPDIR and
// TRITON_CACHE_DIR are paths and differ. CACHEON_DEVICE names the device
// (cpu or cuda): on cuda the runtime creates the device's context while
// it imports torch (host.cuda_preinit). CACHEON_TRITON is 1 where the
// process will use Triton (the engine on cuda; a verify worker whose
// bundle names it): the runtime then computes Triton's cache key on the
// same thread, beside the import (host.triton_key), else 0.
func CandidateEnv(jobDir string, rank int, device string, triton bool) []string {
	t := "0"
	if triton && device == "cuda" {
		t = "1"
	}
	return []string{
		"HOME=" + jobDir, "TMPDIR=" + jobDir, "TRITON_CACHE_DIR=" + tritoncache.Dir(jobDir),
		fmt.Sprintf("OMP_NUM_THREADS=%d", Threads), "NCCL_CUMEM_ENABLE=0", "TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
		fmt.Sprintf("CACHEON_RANK=%d", rank), "CACHEON_DEVICE=" + device, "CACHEON_TRITON=" + t,
	}
}

// CollectiveEnv is the NCCL environment of collective ranks, verify's and
// the tensor-parallel engine's alike: the operator's NCCL_* settings from
// environ (everything but NVLink multicast, NCCL_NVLS_*, always off, and
// NCCL_CUMEM_ENABLE, which CandidateEnv sets), and NCCL_P2P_DISABLE=1
// unless they set it. On two H200s NCCL's peer-to-peer transport fails
// inside the sandbox ("unhandled cuda error" at the first collective; each
// rank has its own PID namespace and capability set) while the
// shared-memory transport passes every example (docs/verify.md).
func CollectiveEnv(environ []string) []string {
	var env []string
	p2p := false
	for _, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, "NCCL_") || strings.HasPrefix(k, "NCCL_NVLS") || k == "NCCL_CUMEM_ENABLE" {
			continue
		}
		p2p = p2p || k == "NCCL_P2P_DISABLE"
		env = append(env, kv)
	}
	if !p2p {
		env = append(env, "NCCL_P2P_DISABLE=1")
	}
	return env
}

// workerEnv is minimalEnv with extra appended, one entry per name, the
// last value of a name winning. (A raw exec with duplicate names leaves the
// choice to the reader: glibc's getenv and Python's os.environ both take
// the first.)
func workerEnv(extra []string) []string {
	all := append(minimalEnv(), extra...)
	at := make(map[string]int, len(all))
	out := make([]string, 0, len(all))
	for _, kv := range all {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := at[k]; ok {
			out[i] = kv
			continue
		}
		at[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// Stdin implements Process.
func (p *CmdProcess) Stdin() io.WriteCloser { return p.stdin }

// Stdout implements Process.
func (p *CmdProcess) Stdout() io.Reader { return p.stdout }

// Stderr implements Process.
func (p *CmdProcess) Stderr() io.Reader { return p.stderr }

// Wait implements Process; after the leader exits it also kills any
// process left in the group, so no orphan survives.
func (p *CmdProcess) Wait() error {
	err := p.cmd.Wait()
	p.doneOnce.Do(func() { close(p.done) })
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	return err
}

// Kill implements Process.
func (p *CmdProcess) Kill() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Pid returns the process id (the group id).
func (p *CmdProcess) Pid() int {
	if p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// startWithOwnPipes connects the process's stdout and stderr to pipes this
// package owns and starts it. exec.Cmd's (and the sandbox's) own pipes are
// closed by Wait as soon as the process exits, which would lose a last
// reply (or the traceback) still buffered in the pipe; ours stay readable
// until EOF.
func startWithOwnPipes(attach func(out, errw *os.File), start func() error) (outR, errR *os.File, err error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, nil, err
	}
	attach(outW, errW)
	err = start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, nil, err
	}
	return outR, errR, nil
}

// ParserPython picks the interpreter that only parses sources (no torch
// needed): the flag, then $CACHEON_PYTHON, then /usr/bin/python3, then
// python3 from PATH. A real interpreter path avoids version-manager shims,
// which cost a process start of their own.
func ParserPython(explicit string) string {
	if explicit != "" {
		return AbsCommand(explicit)
	}
	if env := os.Getenv("CACHEON_PYTHON"); env != "" {
		return AbsCommand(env)
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return ""
}
