package sandbox

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// NewNetNS creates a network namespace whose only interface is loopback (up)
// for the ranks of one collective job, and returns its path for
// Policy.NetNSPath. The namespace is held by a dedicated OS thread of this
// process rather than by a helper process or a bind mount, so nothing can
// outlive cacheon: it ends when cleanup is called or ctx is done (and then
// only once the last rank using it has exited). Creating it needs
// CAP_SYS_ADMIN; without it the error says so and ranks can instead run with
// NetLoopback and no NetNSPath, each in its own namespace (they then cannot
// reach each other) or, degraded, without one.
func NewNetNS(ctx context.Context) (path string, cleanup func(), err error) {
	type result struct {
		path string
		err  error
	}
	ready := make(chan result, 1)
	done := make(chan struct{})
	go func() {
		// Never unlocked: when this goroutine returns, the Go runtime
		// destroys the thread and with it this reference to the namespace.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- result{err: fmt.Errorf("new netns: unshare(CLONE_NEWNET): %w", err)}
			return
		}
		if err := loopbackUp(); err != nil {
			ready <- result{err: fmt.Errorf("new netns: %w", err)}
			return
		}
		ready <- result{path: fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())}
		select {
		case <-done:
		case <-ctx.Done():
		}
	}()
	res := <-ready
	var once sync.Once
	cleanup = func() { once.Do(func() { close(done) }) }
	if res.err != nil {
		cleanup()
		return "", func() {}, res.err
	}
	return res.path, cleanup, nil
}

// loopbackUp sets IFF_UP on "lo" in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback up: socket: %w", err)
	}
	defer closeFD(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: SIOCGIFFLAGS: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: SIOCSIFFLAGS: %w", err)
	}
	return nil
}

// openNetNS opens the policy's shared namespace, if any. It runs before the
// child mounts its private /proc, in which the holder's /proc path does not
// exist.
func openNetNS(p Policy) (fd int, err error) {
	if p.NetNSPath == "" {
		return -1, nil
	}
	fd, err = unix.Open(p.NetNSPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", p.NetNSPath, err)
	}
	return fd, nil
}

// enterNetNS moves the calling (locked) thread into the policy's network
// namespace: the shared one opened by openNetNS (nsFD, or openErr if that
// failed), or a new private one.
func enterNetNS(p Policy, nsFD int, openErr error) (string, error) {
	if p.NetNSPath != "" {
		if openErr != nil {
			return "", openErr
		}
		defer closeFD(nsFD)
		if err := unix.Setns(nsFD, unix.CLONE_NEWNET); err != nil {
			return "", fmt.Errorf("setns(%s): %w", p.NetNSPath, err)
		}
		return "joined shared loopback-only namespace " + p.NetNSPath + "; TCP allowed", nil
	}
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return "", fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
	}
	if p.Network == NetNone {
		return "private namespace, no interface up; sockets limited to AF_UNIX", nil
	}
	if err := loopbackUp(); err != nil {
		return "", err
	}
	return "private namespace, loopback only; TCP allowed", nil
}
