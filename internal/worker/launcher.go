package worker

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"cacheon/internal/sandbox"
)

// SandboxLauncher starts candidate workers through internal/sandbox: one
// private network namespace per worker (no sockets but AF_UNIX), or one
// shared loopback-only namespace for the ranks of a collective. It
// satisfies verify.Launcher and the engine's launcher.
type SandboxLauncher struct {
	base sandbox.Policy
	cuda bool // collective ranks get /dev/shm
	// bytecode is the trusted bytecode cache workers read, or why there
	// is none (UseBytecode).
	bytecode    string
	bytecodeErr error

	mu       sync.Mutex
	starters []*SandboxStarter
}

// NewSandboxLauncher builds the launcher for workers that run candidate
// code from bundleDir with the runtime package in runtimeParent; readOnly
// names further files or directories they may read (an arena checkpoint).
// The binary running this must call sandbox.MaybeRunChild first thing in
// main (or in TestMain for tests).
func NewSandboxLauncher(bundleDir, runtimeParent, python, device string, readOnly ...string) (*SandboxLauncher, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	install, err := sandbox.InspectPython(ctx, python)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return NewSandboxLauncherFor(install, bundleDir, runtimeParent, device, readOnly...), nil
}

// NewSandboxLauncherFor is NewSandboxLauncher for an interpreter whose
// installation the caller inspected already (sandbox.InspectPython): a
// verify job asks once and hands the answer to the scan and the launcher.
func NewSandboxLauncherFor(install sandbox.PythonInstall, bundleDir, runtimeParent, device string, readOnly ...string) *SandboxLauncher {
	p := sandbox.Policy{
		ReadOnly: append([]string{bundleDir, runtimeParent}, readOnly...),
		Exec:     append([]string(nil), install.Paths...),
		CUDA:     device == "cuda",
		Require:  []string{sandbox.LayerProcessGroup, sandbox.LayerNoNewPrivs},
	}
	if device == "cpu" {
		// A CPU worker starts no program (Triton's compilers and ptxas
		// run only on CUDA): it may execute its interpreter alone.
		p.ExecOnly = interpreterFiles(install.Executable)
	}
	return &SandboxLauncher{base: p, cuda: device == "cuda"}
}

// interpreterFiles are the files exec'ing the interpreter executes: the
// binary and its ELF loader; nil when the loader cannot be read (the
// policy then keeps the installation executable).
func interpreterFiles(executable string) []string {
	loader, err := sandbox.ElfInterpreter(executable)
	if err != nil {
		return nil
	}
	files := []string{executable}
	if loader != "" {
		files = append(files, loader)
	}
	return files
}

func (l *SandboxLauncher) starter(p sandbox.Policy) *SandboxStarter {
	l.mu.Lock()
	s := &SandboxStarter{Base: p, Bytecode: l.bytecode}
	l.starters = append(l.starters, s)
	l.mu.Unlock()
	return s
}

// UseBytecode makes every worker started from now on read compiled
// modules from dir, a cache PrepareBytecode filled; with err (what
// PrepareBytecode said) there is none and Layers says why.
func (l *SandboxLauncher) UseBytecode(dir string, err error) {
	l.mu.Lock()
	l.bytecode, l.bytecodeErr = dir, err
	if err != nil {
		l.bytecode = ""
	}
	l.mu.Unlock()
}

// Single returns a starter for one independent worker.
func (l *SandboxLauncher) Single(context.Context) (Starter, error) {
	p := l.base
	p.Network = sandbox.NetNone
	return l.starter(p), nil
}

// Group returns a starter for collective ranks: they share one private
// namespace whose only interface is loopback; if that cannot be made,
// nothing runs.
func (l *SandboxLauncher) Group(ctx context.Context, worldSize int) (Starter, func(), error) {
	path, cleanup, err := sandbox.NewNetNS(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("shared network namespace for %d ranks: %w", worldSize, err)
	}
	p := l.base
	p.Network = sandbox.NetLoopback
	p.NetNSPath = path
	if l.cuda {
		// NCCL's shared-memory transport between the ranks. Only collective
		// ranks get it, and no job directory lives there on a host with
		// NVIDIA devices (ScratchRoot), so a rank cannot reach another
		// job's files through it.
		p.ReadWrite = append(append([]string(nil), p.ReadWrite...), "/dev/shm")
	}
	p.Require = append(append([]string(nil), p.Require...), sandbox.LayerNetwork)
	return l.starter(p), cleanup, nil
}

// Layers lists every layer, applied or not, as the
// started workers reported them ("name: applied (detail)" or
// "name: NOT APPLIED (why)"); differing reports are all listed.
func (l *SandboxLauncher) Layers() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, s := range l.starters {
		for _, r := range s.Reports() {
			for _, ly := range r.Layers {
				line := ly.Name + ": "
				if ly.Applied {
					line += "applied"
				} else {
					line += "NOT APPLIED"
				}
				if ly.Detail != "" {
					line += " (" + ly.Detail + ")"
				}
				if !seen[line] {
					seen[line] = true
					out = append(out, line)
				}
			}
		}
	}
	if len(out) == 0 {
		return []string{"no worker started"}
	}
	switch {
	case l.bytecode != "":
		out = append(out, "bytecode-cache: read-only ("+l.bytecode+")")
	case l.bytecodeErr != nil:
		out = append(out, "bytecode-cache: not used ("+l.bytecodeErr.Error()+")")
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.SplitN(out[i], ":", 2)[0] < strings.SplitN(out[j], ":", 2)[0]
	})
	return out
}

// FreePort asks the kernel for an unused loopback TCP port for the
// rendezvous of collective ranks. The ranks run in their own network
// namespace when the sandbox provides one; the port only has to be free
// there, and a port free in ours is.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
