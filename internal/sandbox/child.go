package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sentinel is the argv[1] that makes MaybeRunChild take over the process.
const Sentinel = "__sandbox-exec"

// specEnvVar carries the childSpec (JSON) from parent to child.
const specEnvVar = "CACHEON_SANDBOX_SPEC"

// childSpec is everything the child needs: the resolved policy, the target,
// and the resources the parent prepared.
type childSpec struct {
	Policy   Policy       `json:"policy"`
	Path     string       `json:"path"`
	Argv     []string     `json:"argv"`
	Env      []string     `json:"env"`
	Cgroups  []cgroupJoin `json:"cgroups,omitempty"`
	StatusFD int          `json:"status_fd"`
	// Skip lists layers not to apply (tests only, to bisect a failure).
	Skip []string `json:"skip,omitempty"`
}

// childMessage is one JSON line on the status pipe: the report just before
// execve, then an error only if the target could not be started.
type childMessage struct {
	Report *Report `json:"report,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// MaybeRunChild turns the process into the sandbox child when argv[1] is
// Sentinel: it applies the policy passed by Cmd.Start and execs the target,
// and never returns (it exits 126 if the policy cannot be read or a required
// layer fails, 127 if execve fails). Otherwise it returns at once. Call it
// first thing in main (and in TestMain of tests that start sandboxes).
func MaybeRunChild() {
	if len(os.Args) < 2 || os.Args[1] != Sentinel {
		return
	}
	// Namespaces, capabilities, Landlock and seccomp are per thread; they
	// are set up on this one and execve is called from it. Never unlocked.
	runtime.LockOSThread()
	// So is the parent-death signal, and only the thread the parent forked
	// has it (a new thread starts without): the Go runtime may have moved
	// this goroutine to another thread before it was locked, and the
	// target would then run without it (seen as a rare "parent-death
	// signal 0" refusal under load). Set it on the thread that execs.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "cacheon sandbox: prctl(PR_SET_PDEATHSIG): %v\n", err)
		os.Exit(126)
	}
	os.Exit(runChild())
}

// runChild confines the process and execs the target, returning an exit
// code only on failure.
func runChild() int {
	var spec childSpec
	if err := json.Unmarshal([]byte(os.Getenv(specEnvVar)), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "cacheon sandbox: read %s: %v\n", specEnvVar, err)
		return 126
	}
	status := os.NewFile(uintptr(spec.StatusFD), "sandbox-status")
	if status == nil {
		fmt.Fprintf(os.Stderr, "cacheon sandbox: status fd %d invalid\n", spec.StatusFD)
		return 126
	}
	enc := json.NewEncoder(status)
	fail := func(code int, format string, args ...any) int {
		_ = enc.Encode(childMessage{Error: fmt.Sprintf(format, args...)})
		return code
	}
	// The target must not inherit the status pipe: its closing on execve
	// is how the parent knows the exec happened.
	unix.CloseOnExec(spec.StatusFD)
	if err := os.Chdir(spec.Policy.Dir); err != nil {
		return fail(126, "chdir to job directory: %v", err)
	}
	r := confine(spec)
	_ = enc.Encode(childMessage{Report: &r})
	var refused []string
	for _, l := range r.Missing() {
		if slices.Contains(spec.Policy.Require, l.Name) {
			refused = append(refused, l.Name+" ("+l.Detail+")")
		}
	}
	if len(refused) > 0 {
		return fail(126, "required layers not applied: %s", strings.Join(refused, "; "))
	}
	err := syscall.Exec(spec.Path, spec.Argv, spec.Env)
	return fail(127, "execve %s: %v", spec.Path, err)
}

// confine applies every layer the child owns, in order, recording each.
// Cmd.Start completes what only the parent knows: a refused PID namespace,
// and the procs watchdog when the child could not bound processes.
func confine(spec childSpec) Report {
	p := spec.Policy
	var r Report

	pgid, _ := unix.Getpgid(0)
	var sig int32 // prctl writes a C int
	_, _, errno := unix.Syscall(unix.SYS_PRCTL, unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0)
	switch {
	case errno != 0:
		r.set(LayerProcessGroup, false, "prctl(PR_GET_PDEATHSIG): %v", errno)
	case pgid != unix.Getpid() || sig != int32(unix.SIGKILL):
		r.set(LayerProcessGroup, false, "process group %d (own pid %d), parent-death signal %d", pgid, unix.Getpid(), sig)
	default:
		r.set(LayerProcessGroup, true, "own process group; parent-death signal SIGKILL")
	}

	// step applies one layer and records its outcome; tests may skip
	// layers to find which one a program trips over.
	step := func(name string, apply func() (string, error)) {
		if slices.Contains(spec.Skip, name) {
			r.set(name, false, "skipped on request (test knob)")
			return
		}
		if d, err := apply(); err != nil {
			r.set(name, false, "%v", err)
		} else {
			r.set(name, true, "%s", d)
		}
	}

	nsFD, nsErr := openNetNS(p)
	privateProc := false
	if unix.Getpid() == 1 {
		if err := mountPrivateProc(); err != nil {
			r.set(LayerPIDNamespace, true, "target is init of a new PID namespace, but /proc is the host's (%v): "+
				"it can look up host processes there, and CUDA cannot start", err)
		} else {
			privateProc = true
			r.set(LayerPIDNamespace, true, "target is init of a new PID namespace with a private /proc: "+
				"the kernel kills what is left in it when the target exits")
		}
	}

	joined, joinFailed := joinCgroups(spec.Cgroups)

	step(LayerRlimits, func() (string, error) {
		if err := setRlimits(p); err != nil {
			return "", err
		}
		return fmt.Sprintf("cpu=%ds nofile=%d fsize=%s core=0", p.CPUSeconds, p.MaxFiles, human(p.MaxFileSize)), nil
	})

	step(LayerMemory, func() (string, error) {
		detail, err := setMemoryRlimit(p)
		if err != nil {
			detail = err.Error()
		}
		cg, cgOK := joined["memory"]
		if !cgOK {
			cg = joinFailed["memory"]
		}
		if cg != "" {
			detail += "; " + cg
		}
		if err != nil && !cgOK {
			return "", errors.New(detail)
		}
		return detail, nil
	})

	step(LayerProcs, func() (string, error) {
		if d, ok := joined["pids"]; ok {
			return d, nil
		}
		if unix.Getuid() != 0 {
			lim := unix.Rlimit{Cur: p.MaxProcs, Max: p.MaxProcs}
			if err := unix.Setrlimit(unix.RLIMIT_NPROC, &lim); err != nil {
				return "", fmt.Errorf("setrlimit(RLIMIT_NPROC): %w", err)
			}
			return fmt.Sprintf("RLIMIT_NPROC=%d (counts every process of uid %d)", p.MaxProcs, unix.Getuid()), nil
		}
		why := "no cgroup pids controller"
		if d, ok := joinFailed["pids"]; ok {
			why = d
		}
		return "", fmt.Errorf("%s; RLIMIT_NPROC does not bind uid 0", why)
	})

	step(LayerNetwork, func() (string, error) { return enterNetNS(p, nsFD, nsErr) })
	step(LayerCapabilities, dropCapabilities)
	step(LayerNoNewPrivs, func() (string, error) {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return "", fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}
		return "set", nil
	})
	step(LayerLandlock, func() (string, error) { return applyLandlock(p, privateProc) })
	step(LayerSeccomp, func() (string, error) {
		if l, _ := r.Layer(LayerNoNewPrivs); !l.Applied {
			return "", errors.New("needs no-new-privs")
		}
		return installSeccomp(p.Network)
	})
	return r
}

// mountPrivateProc mounts a procfs of the new PID namespace over /proc, in
// the child's own mount namespace (made private first, so nothing propagates
// back to the host). The CUDA driver needs /proc/self to be the process's own
// entry, and the sandbox then sees no host process at all.
func mountPrivateProc() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount proc: %w", err)
	}
	return nil
}

// setRlimits sets the CPU, open-file, file-size and core limits. The CPU
// hard limit is one second above the soft one: SIGXCPU, then SIGKILL.
func setRlimits(p Policy) error {
	limits := []struct {
		name     string
		resource int
		cur, max uint64
	}{
		{"RLIMIT_CPU", unix.RLIMIT_CPU, p.CPUSeconds, p.CPUSeconds + 1},
		{"RLIMIT_NOFILE", unix.RLIMIT_NOFILE, p.MaxFiles, p.MaxFiles},
		{"RLIMIT_FSIZE", unix.RLIMIT_FSIZE, p.MaxFileSize, p.MaxFileSize},
		{"RLIMIT_CORE", unix.RLIMIT_CORE, 0, 0},
	}
	var errs []error
	for _, l := range limits {
		// syscall.Setrlimit, not unix.Setrlimit: it also stops the Go
		// runtime from restoring its startup RLIMIT_NOFILE at execve.
		if err := syscall.Setrlimit(l.resource, &syscall.Rlimit{Cur: l.cur, Max: l.max}); err != nil {
			errs = append(errs, fmt.Errorf("setrlimit(%s): %w", l.name, err))
		}
	}
	return errors.Join(errs...)
}

// setMemoryRlimit limits address space on CPU and the data segment with
// CUDA, whose driver reserves far more address space than it uses.
func setMemoryRlimit(p Policy) (string, error) {
	resource, name := unix.RLIMIT_AS, "RLIMIT_AS"
	if p.CUDA {
		resource, name = unix.RLIMIT_DATA, "RLIMIT_DATA"
	}
	if err := syscall.Setrlimit(resource, &syscall.Rlimit{Cur: p.MemoryBytes, Max: p.MemoryBytes}); err != nil {
		return "", fmt.Errorf("setrlimit(%s): %w", name, err)
	}
	return fmt.Sprintf("%s=%s", name, human(p.MemoryBytes)), nil
}

// dropCapabilities empties the bounding and ambient sets and the inheritable
// set, so the target, even as uid 0, starts with no capability (execve
// computes the new permitted set from these).
func dropCapabilities() (string, error) {
	last := unix.CAP_LAST_CAP
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return "", fmt.Errorf("capget: %w", err)
	}
	held := data[0].Permitted != 0 || data[1].Permitted != 0
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if !held && errors.Is(err, unix.EPERM) {
				break // unprivileged: nothing to drop, and no way to gain any (no-new-privs)
			}
			return "", fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return "", fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return "", fmt.Errorf("capset: %w", err)
	}
	if !held {
		return "no capabilities held", nil
	}
	return fmt.Sprintf("bounding (0..%d), ambient and inheritable sets cleared: the target runs with none", last), nil
}

// closeFD closes a raw descriptor whose close error cannot be acted on.
func closeFD(fd int) { _ = unix.Close(fd) }
