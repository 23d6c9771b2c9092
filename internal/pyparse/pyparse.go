// Package pyparse runs one of the embedded, stdlib-only parse scripts of
// python/cacheon_runtime (astfacts.py for the scan, astnorm.py for the copy
// fingerprint) over hostile source.
//
// A script only parses: it receives the sources on stdin, calls ast.parse
// and never imports or executes them. Since it reads hostile source it
// still runs in the same sandbox as candidate code (internal/sandbox: no
// network, no writes outside its private job directory, no processes
// beyond its own threads) with limits sized for parsing, and its output is
// bounded here; the caller decodes it strictly, as untrusted input.
package pyparse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"cacheon/internal/sandbox"
	"cacheon/python"
)

// Confinement of a parse script: a source that makes the parser loop or
// balloon ends there.
const (
	cpuSeconds = 30
	memory     = 2 << 30
	procs      = 16
	maxStderr  = 64 << 10
)

// Script names an embedded parse script and the embedded modules it
// imports, as paths in python.Files() ("cacheon_runtime/astfacts.py").
type Script struct {
	Name    string
	Helpers []string
	// Install, when set, is the interpreter's installation as the caller
	// already inspected it (sandbox.InspectPython), so it is not asked again.
	Install *sandbox.PythonInstall
}

// Runner runs one script with one interpreter. Close removes its job
// directory.
type Runner struct {
	python string // resolved interpreter path
	dir    string // private job directory holding the script
	script string
	policy sandbox.Policy
}

// New resolves the interpreter ("" = python3 on PATH, run as what it
// resolves to, so a version manager's shim is not what runs in the
// sandbox), asks it where its installation lives (the sandbox grants
// exactly that) and writes the script and its helpers to a private
// temporary directory, the job directory.
func New(ctx context.Context, interpreter string, s Script) (*Runner, error) {
	name := interpreter
	if name == "" {
		name = "python3"
	}
	py, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("find python interpreter: %w", err)
	}
	if py, err = filepath.Abs(py); err != nil {
		return nil, fmt.Errorf("find python interpreter: %w", err)
	}
	var install sandbox.PythonInstall
	if s.Install != nil {
		install = *s.Install
	} else if install, err = sandbox.InspectPython(ctx, py); err != nil {
		return nil, fmt.Errorf("parser sandbox: %w", err)
	}
	if interpreter == "" {
		py = install.Executable
	}
	dir, err := os.MkdirTemp("", "cacheon-parse-")
	if err != nil {
		return nil, fmt.Errorf("create parse script directory: %w", err)
	}
	for _, name := range append([]string{s.Name}, s.Helpers...) {
		code, err := fs.ReadFile(python.Files(), name)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, filepath.Base(name)), code, 0o600)
		}
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("write parse script: %w", err)
		}
	}
	pol := sandbox.Policy{
		Dir: dir, Exec: append(install.Paths, filepath.Dir(py)), Network: sandbox.NetNone,
		CPUSeconds: cpuSeconds, MemoryBytes: memory, MaxProcs: procs,
		Require: []string{sandbox.LayerProcessGroup, sandbox.LayerNoNewPrivs},
	}
	return &Runner{python: py, dir: dir, script: filepath.Join(dir, filepath.Base(s.Name)), policy: pol}, nil
}

// Python is the interpreter that runs the script.
func (r *Runner) Python() string { return r.python }

// Close deletes the script and its job directory.
func (r *Runner) Close() error {
	if err := os.RemoveAll(r.dir); err != nil {
		return fmt.Errorf("remove parse script: %w", err)
	}
	return nil
}

// Result is one run's output.
type Result struct {
	// Stdout is at most the limit given to Run; Overflow says more was
	// written, and the process was stopped right then.
	Stdout   []byte
	Overflow bool
	// ExitErr is the process's exit error (nil on a clean exit).
	ExitErr error
	// Stderr is a bounded capture of the process's stderr.
	Stderr string
}

// Run starts the interpreter once, inside the sandbox, with stdin as its
// input: "python -I -S -W ignore script". err is for failures to run at
// all and for cancellation; a script that fails reports it in ExitErr.
func (r *Runner) Run(ctx context.Context, stdin []byte, stdoutLimit int) (Result, error) {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	cmd, err := sandbox.Command(runCtx, r.policy, r.python, "-I", "-S", "-W", "ignore", r.script)
	if err != nil {
		return Result{}, fmt.Errorf("start parser %s: %w", r.python, err)
	}
	cmd.Stdin = bytes.NewReader(stdin)
	out := &capWriter{limit: stdoutLimit, onOverflow: stop}
	errOut := &capWriter{limit: maxStderr}
	cmd.Stdout = out
	cmd.Stderr = errOut
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("start parser %s: %w", r.python, err)
	}
	waitErr := cmd.Wait()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return Result{}, fmt.Errorf("run parser: %w", ctxErr)
	}
	if out.over { // stopped by us: whatever Wait says is about the stop
		return Result{Stdout: out.buf.Bytes(), Overflow: true, ExitErr: waitErr, Stderr: errOut.buf.String()}, nil
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return Result{}, fmt.Errorf("run parser %s: %w", r.python, waitErr)
	}
	return Result{Stdout: out.buf.Bytes(), ExitErr: waitErr, Stderr: errOut.buf.String()}, nil
}

// Latin1 maps every byte to the code point of the same value, so a script
// recovers the exact bytes with str.encode("latin-1") and ast.parse
// decodes them as import would (honouring a BOM or a PEP 263 coding
// cookie). Sources travel to the scripts this way inside JSON.
func Latin1(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b) + len(b)/4)
	for _, c := range b {
		sb.WriteRune(rune(c))
	}
	return sb.String()
}

// Tail returns the last part of a stderr capture for an error message.
func Tail(s string) string {
	const n = 2048
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	if s == "" {
		return "empty"
	}
	return s
}

// capWriter keeps the first limit bytes written and silently drops the
// rest, so a chatty child never blocks on a full pipe. onOverflow, if set,
// runs once when the limit is first exceeded.
type capWriter struct {
	buf        bytes.Buffer
	limit      int
	over       bool
	onOverflow func()
}

func (w *capWriter) Write(p []byte) (int, error) {
	room := w.limit - w.buf.Len()
	if len(p) > room {
		if !w.over && w.onOverflow != nil {
			w.onOverflow()
		}
		w.over = true
		if room > 0 {
			w.buf.Write(p[:room])
		}
		return len(p), nil
	}
	w.buf.Write(p)
	return len(p), nil
}
