package worker

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"cacheon/internal/sandbox"
)

// SandboxStarter starts every worker through the sandbox: a re-exec of
// cacheon that applies process group, PID namespace, rlimits, memory and
// process limits, a private network namespace, dropped capabilities,
// no-new-privileges, Landlock and seccomp before exec'ing Python.
type SandboxStarter struct {
	// Base is the policy every worker gets; Dir and Env are filled per
	// start (the job directory and the worker environment).
	Base sandbox.Policy
	// Bytecode, when set, is a trusted bytecode cache (PrepareBytecode)
	// that the interpreter reads and cannot write: Landlock becomes a
	// required layer. It is left out where the policy lets the process
	// write it.
	Bytecode string

	mu      sync.Mutex
	reports []sandbox.Report
}

// Start implements Starter.
func (s *SandboxStarter) Start(ctx context.Context, argv, env []string, dir string) (Process, error) {
	p := s.Base
	p.Dir = dir
	p.ReadWrite = append(append([]string(nil), s.Base.ReadWrite...), dir)
	p.Env = workerEnv(env)
	if len(p.ExecOnly) > 0 {
		// argv[0] must be the interpreter itself (a symlink to it, as a
		// virtual environment's, is): a launcher script would need more.
		if real, err := filepath.EvalSymlinks(argv[0]); err != nil || real != p.ExecOnly[0] {
			p.ExecOnly = nil
		}
	}
	if s.Bytecode != "" && !writable(p, s.Bytecode) {
		argv = withBytecode(argv, s.Bytecode)
		p.ReadOnly = append(append([]string(nil), p.ReadOnly...), s.Bytecode)
		p.Require = append(append([]string(nil), p.Require...), sandbox.LayerLandlock)
	}
	cmd, err := sandbox.Command(ctx, p, argv[0], argv[1:]...)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outR, errR, err := startWithOwnPipes(func(out, errw *os.File) { cmd.Stdout, cmd.Stderr = out, errw }, cmd.Start)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	s.mu.Lock()
	s.reports = append(s.reports, cmd.Report())
	s.mu.Unlock()
	return &sandboxProcess{cmd: cmd, stdin: stdin, out: outR, err: errR}, nil
}

// writable reports whether the policy lets its process write path.
func writable(p sandbox.Policy, path string) bool {
	for _, rw := range append([]string{p.Dir}, p.ReadWrite...) {
		if under(path, rw) || under(rw, path) {
			return true
		}
	}
	return false
}

// Reports returns the confinement report of every worker started so far.
func (s *SandboxStarter) Reports() []sandbox.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sandbox.Report(nil), s.reports...)
}

type sandboxProcess struct {
	cmd   *sandbox.Cmd
	stdin io.WriteCloser
	out   *os.File
	err   *os.File
}

func (p *sandboxProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *sandboxProcess) Stdout() io.Reader     { return p.out }
func (p *sandboxProcess) Stderr() io.Reader     { return p.err }
func (p *sandboxProcess) Wait() error           { return p.cmd.Wait() }
func (p *sandboxProcess) Kill()                 { p.cmd.Kill() }
