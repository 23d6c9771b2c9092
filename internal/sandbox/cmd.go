package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Cmd is a program prepared to run in the sandbox. It mirrors the small
// part of exec.Cmd that workers need. Set Stdin, Stdout and Stderr (or call
// the pipe methods) before Start; unset streams are /dev/null.
type Cmd struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer

	ctx    context.Context
	policy Policy
	path   string
	argv   []string
	opts   options

	closeAfterStart []io.Closer
	closeAfterWait  []io.Closer

	mu         sync.Mutex
	cmd        *exec.Cmd
	cgroups    *cgroupSet
	report     Report
	started    bool
	exited     bool // the target has exited and its group has been killed
	killReason error
	done       chan struct{}
	waitOnce   sync.Once
	waitErr    error
}

// options are internal knobs, changed only by tests.
type options struct {
	self             string        // the binary to re-exec
	cgroupRoot       string        // where cgroup hierarchies are mounted
	noPIDNS          bool          // do not ask for CLONE_NEWPID
	watchdogInterval time.Duration // procs watchdog polling period
	skip             []string      // child layers not to apply
}

func defaultOptions() options {
	return options{self: "/proc/self/exe", cgroupRoot: "/sys/fs/cgroup", watchdogInterval: 20 * time.Millisecond}
}

// Command prepares name (looked up in PATH if it has no slash) with args to
// run under policy p. ctx bounds its wall-clock time: when ctx is done the
// whole sandbox (process group, cgroup, PID namespace) is killed.
func Command(ctx context.Context, p Policy, name string, args ...string) (*Cmd, error) {
	rp, err := p.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	path := name
	if filepath.Base(name) == name {
		if path, err = exec.LookPath(name); err != nil {
			return nil, fmt.Errorf("sandbox: look up %s: %w", name, err)
		}
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, fmt.Errorf("sandbox: resolve %s: %w", name, err)
	}
	return &Cmd{
		ctx:    ctx,
		policy: rp,
		path:   path,
		argv:   append([]string{name}, args...),
		opts:   defaultOptions(),
		done:   make(chan struct{}),
	}, nil
}

// StdinPipe returns a pipe connected to the target's standard input; Wait
// closes it.
func (c *Cmd) StdinPipe() (io.WriteCloser, error) {
	if c.Stdin != nil {
		return nil, errors.New("sandbox: Stdin already set")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: stdin pipe: %w", err)
	}
	c.Stdin = r
	c.closeAfterStart = append(c.closeAfterStart, r)
	c.closeAfterWait = append(c.closeAfterWait, w)
	return w, nil
}

// StdoutPipe returns a pipe connected to the target's standard output. Wait
// closes it, so read to EOF before calling Wait.
func (c *Cmd) StdoutPipe() (io.ReadCloser, error) {
	r, w, err := c.outPipe(c.Stdout, "stdout")
	if err == nil {
		c.Stdout = w
	}
	return r, err
}

// StderrPipe is StdoutPipe for standard error.
func (c *Cmd) StderrPipe() (io.ReadCloser, error) {
	r, w, err := c.outPipe(c.Stderr, "stderr")
	if err == nil {
		c.Stderr = w
	}
	return r, err
}

func (c *Cmd) outPipe(cur io.Writer, name string) (io.ReadCloser, *os.File, error) {
	if cur != nil {
		return nil, nil, fmt.Errorf("sandbox: %s already set", name)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: %s pipe: %w", name, err)
	}
	c.closeAfterStart = append(c.closeAfterStart, w)
	c.closeAfterWait = append(c.closeAfterWait, r)
	return r, w, nil
}

// Start creates the sandbox and starts the target in it. It returns once
// the target has been exec'd, with Report filled in; on error nothing is
// left running. A failed layer named in Policy.Require is such an error.
func (c *Cmd) Start() error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return errors.New("sandbox: already started")
	}
	c.started = true
	c.mu.Unlock()
	defer closeAll(c.closeAfterStart)
	if err := c.ctx.Err(); err != nil {
		return fmt.Errorf("sandbox: start %s: %w", c.path, err)
	}
	p := c.policy
	for _, kv := range cacheDirs(p.Dir) {
		if err := os.MkdirAll(kv[1], 0o700); err != nil {
			return fmt.Errorf("sandbox: create %s: %w", kv[0], err)
		}
	}
	c.cgroups = setupCgroups(c.opts.cgroupRoot, p)
	statusR, statusW, err := os.Pipe()
	if err != nil {
		c.cgroups.remove()
		return fmt.Errorf("sandbox: status pipe: %w", err)
	}
	defer statusR.Close()
	spec, err := json.Marshal(childSpec{
		Policy: p, Path: c.path, Argv: c.argv, Env: targetEnv(p),
		Cgroups: c.cgroups.joins, StatusFD: 3, Skip: c.opts.skip,
	})
	if err != nil {
		statusW.Close()
		c.cgroups.remove()
		return fmt.Errorf("sandbox: encode policy: %w", err)
	}

	pidns, pidnsDetail := !c.opts.noPIDNS, "disabled"
	var cmd *exec.Cmd
	// The parent-death signal fires when the OS *thread* that forked the
	// child exits, not the process. Go destroys a thread when a goroutine
	// locked to it returns (NewNetNS does exactly that), and that thread
	// may earlier have run an ordinary fork. So fork from a thread locked
	// for this purpose, and keep it locked (alive, running nothing else)
	// until the child has been waited for.
	forked := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		for {
			cmd = c.build(spec, statusW, pidns)
			err = cmd.Start()
			if err != nil && pidns && isNamespaceRefusal(err) {
				pidns, pidnsDetail = false, fmt.Sprintf("clone(CLONE_NEWPID|CLONE_NEWNS): %v", err)
				continue
			}
			break
		}
		started := err == nil
		close(forked)
		if started {
			<-c.done
		}
		runtime.UnlockOSThread()
	}()
	<-forked
	statusW.Close()
	if err != nil {
		c.cgroups.remove()
		return fmt.Errorf("sandbox: start %s: %w", c.path, err)
	}
	c.mu.Lock()
	c.cmd = cmd
	c.mu.Unlock()
	go func() {
		select {
		case <-c.ctx.Done():
			c.kill(c.ctx.Err())
		case <-c.done:
		}
	}()

	report, childErr := readStatus(statusR)
	if !pidns {
		// The child reports the layer when it got the namespace.
		report.set(LayerPIDNamespace, false, "%s", pidnsDetail)
	}
	c.completeReport(&report)
	c.report = report.sorted()
	if childErr != nil {
		_ = c.Wait()
		if ctxErr := c.ctx.Err(); ctxErr != nil {
			// The context ended while the child was confining itself
			// (it was killed before its report): say so, so that a
			// caller's deadline reads as one.
			return fmt.Errorf("sandbox: start %s: %w: %w", c.path, ctxErr, childErr)
		}
		return fmt.Errorf("sandbox: start %s: %w", c.path, childErr)
	}
	return nil
}

// build assembles the re-exec of this binary as the sandbox child.
func (c *Cmd) build(spec []byte, status *os.File, pidns bool) *exec.Cmd {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if pidns {
		// A mount namespace too, so the child can mount a /proc of its own.
		attr.Cloneflags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
	}
	return &exec.Cmd{
		Path:        c.opts.self,
		Args:        []string{os.Args[0], Sentinel},
		Env:         []string{specEnvVar + "=" + string(spec)},
		Stdin:       c.Stdin,
		Stdout:      c.Stdout,
		Stderr:      c.Stderr,
		ExtraFiles:  []*os.File{status},
		SysProcAttr: attr,
		WaitDelay:   2 * time.Second,
	}
}

// isNamespaceRefusal reports whether clone failed because a namespace could
// not be created (no privilege, no kernel support, limits reached).
func isNamespaceRefusal(err error) bool {
	for _, e := range []error{unix.EPERM, unix.EINVAL, unix.ENOSPC, unix.EUSERS, unix.ENOSYS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// readStatus reads the child's JSON lines until the pipe closes (at execve,
// or when the child dies). A missing report or an error line is an error.
func readStatus(r io.Reader) (Report, error) {
	data, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return Report{}, fmt.Errorf("read sandbox status: %w", err)
	}
	var report *Report
	var childErr error
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m childMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return Report{}, fmt.Errorf("decode sandbox status: %w", err)
		}
		if m.Report != nil {
			report = m.Report
		}
		if m.Error != "" {
			childErr = errors.New(m.Error)
		}
	}
	if report == nil {
		if childErr == nil {
			childErr = errors.New("the sandbox child sent no report (is sandbox.MaybeRunChild called first in main?)")
		}
		return Report{}, childErr
	}
	return *report, childErr
}

// completeReport adds what only the parent knows: cgroup setup failures,
// and the procs watchdog when the child could not bound processes itself.
func (c *Cmd) completeReport(r *Report) {
	if l, ok := r.Layer(LayerMemory); ok && c.cgroups.notes["memory"] != "" {
		r.set(LayerMemory, l.Applied, "%s; %s", l.Detail, c.cgroups.notes["memory"])
	}
	l, ok := r.Layer(LayerProcs)
	if !ok || l.Applied {
		return
	}
	why := l.Detail
	if n := c.cgroups.notes["pids"]; n != "" {
		why = n + "; RLIMIT_NPROC does not bind uid 0"
	}
	stop := c.done
	pgid := c.cmd.Process.Pid
	limit := c.policy.MaxProcs
	go procsWatchdog(pgid, limit, c.opts.watchdogInterval, stop, func(n uint64) {
		c.kill(fmt.Errorf("process limit exceeded: %d tasks > %d (watchdog)", n, limit))
	})
	r.set(LayerProcs, true, "watchdog: process group polled every %v, killed above %d tasks (%s)", c.opts.watchdogInterval, limit, why)
}

// Report returns which layers were applied. It is complete once Start has
// returned (also when Start failed because a required layer was missing).
func (c *Cmd) Report() Report { return c.report }

// Kill kills every process of the sandbox. It is safe to call at any time
// and from any goroutine; Wait still has to be called.
func (c *Cmd) Kill() { c.kill(errors.New("killed by caller")) }

// kill records the first reason and SIGKILLs the process group and cgroups,
// unless the target has already exited and been cleaned up (its pid, and so
// its process group id, may then be reused).
func (c *Cmd) kill(reason error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil || c.cmd.Process == nil || c.exited {
		return
	}
	if c.killReason == nil {
		c.killReason = reason
	}
	c.killGroupLocked()
}

func (c *Cmd) killGroupLocked() {
	_ = unix.Kill(-c.cmd.Process.Pid, unix.SIGKILL)
	c.cgroups.kill()
}

// Wait waits for the target to exit, then kills whatever it left behind,
// removes the cgroups and releases the pipes. If the sandbox was killed
// (context done, Kill, watchdog), the error wraps that reason, so
// errors.Is(err, context.DeadlineExceeded) identifies a timeout; otherwise a
// non-zero exit is an *exec.ExitError.
func (c *Cmd) Wait() error {
	c.mu.Lock()
	cmd := c.cmd
	c.mu.Unlock()
	if cmd == nil {
		return errors.New("sandbox: Wait before a successful Start")
	}
	c.waitOnce.Do(func() {
		// Wait for the exit without reaping, so the process group id stays
		// reserved while the leftovers are killed.
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		c.mu.Lock()
		c.killGroupLocked()
		c.exited = true
		reason := c.killReason
		c.mu.Unlock()
		err := cmd.Wait()
		close(c.done)
		c.cgroups.remove()
		closeAll(c.closeAfterWait)
		switch {
		case reason != nil && err != nil:
			c.waitErr = fmt.Errorf("sandbox: %s killed: %w: %w", c.path, reason, err)
		case reason != nil:
			c.waitErr = fmt.Errorf("sandbox: %s killed: %w", c.path, reason)
		case err != nil:
			c.waitErr = fmt.Errorf("sandbox: %s: %w", c.path, err)
		}
	})
	return c.waitErr
}

// Pid returns the target's process id (also its process group id), or 0
// before Start.
func (c *Cmd) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

func closeAll(cs []io.Closer) {
	for _, c := range cs {
		_ = c.Close()
	}
}
