package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Access-right sets granted by the sandbox's rules.
const (
	accessRead landlock.AccessFSSet = ll.AccessFSReadFile | ll.AccessFSReadDir
	accessExec landlock.AccessFSSet = accessRead | ll.AccessFSExecute
	accessRW   landlock.AccessFSSet = accessRead | ll.AccessFSWriteFile | ll.AccessFSTruncate |
		ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeDir | ll.AccessFSMakeReg |
		ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeSym
	accessDevice landlock.AccessFSSet = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSIoctlDev
	// accessFileOnly are the rights the kernel accepts on a non-directory.
	accessFileOnly landlock.AccessFSSet = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile |
		ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// fsGrant is one path and the rights granted beneath it.
type fsGrant struct {
	path   string
	access landlock.AccessFSSet
}

// baselineGrants are the paths every sandboxed process needs (see Policy).
// With a private /proc (new PID namespace) all of it is readable, since it
// shows only the sandbox's own processes. Otherwise only a few global files
// and /proc/self: that is resolved by the kernel when the rule is added, so
// the grant covers the sandbox process itself (whose pid the target keeps
// across execve) and none of its siblings. The CUDA driver writes under
// /proc/self (found by bisecting the rights on an H200 host), which only
// affects the process itself.
func baselineGrants(cuda, collective, privateProc, execOnly bool) []fsGrant {
	system := accessExec
	if execOnly {
		system = accessRead
	}
	g := []fsGrant{
		{"/usr", system}, {"/bin", system}, {"/lib", system}, {"/lib64", system},
		{"/dev/null", accessDevice}, {"/dev/zero", accessRead}, {"/dev/full", accessRead},
		{"/dev/random", accessRead}, {"/dev/urandom", accessRead},
		{"/sys/devices/system/cpu", accessRead},
	}
	if privateProc {
		g = append(g, fsGrant{"/proc", accessRead})
	} else {
		g = append(g, fsGrant{"/proc/self", accessRead}, fsGrant{"/proc/cpuinfo", accessRead},
			fsGrant{"/proc/meminfo", accessRead}, fsGrant{"/proc/stat", accessRead},
			fsGrant{"/proc/filesystems", accessRead}, fsGrant{"/proc/sys/kernel", accessRead},
			fsGrant{"/proc/sys/vm", accessRead})
	}
	if cuda {
		g = append(g, fsGrant{"/proc/self", accessRead | ll.AccessFSWriteFile | ll.AccessFSTruncate})
	}
	for _, f := range []string{"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd",
		"group", "nsswitch.conf", "hosts", "host.conf", "gai.conf"} {
		g = append(g, fsGrant{"/etc/" + f, accessRead})
	}
	if cuda || collective {
		// NVML and gloo/NCCL topology detection walk /sys/class/net and
		// /sys/bus/pci.
		g = append(g, fsGrant{"/sys", accessRead})
	}
	if cuda {
		g = append(g, fsGrant{"/proc/devices", accessRead},
			fsGrant{"/proc/driver/nvidia", accessRead}, fsGrant{"/dev/nvidia-caps", accessDevice | ll.AccessFSReadDir})
		devs, _ := filepath.Glob("/dev/nvidia*") // Glob fails only on a bad pattern.
		for _, d := range devs {
			if d != "/dev/nvidia-caps" {
				g = append(g, fsGrant{d, accessDevice})
			}
		}
	}
	return g
}

// landlockGrants lists every grant of the policy; refer (renames across
// directories, which Triton's cache does) is added to read-write paths when
// the ABI has it, since asking for it below ABI 2 would disable Landlock.
func landlockGrants(p Policy, abi int, privateProc bool) []fsGrant {
	execOnly := len(p.ExecOnly) > 0
	g := baselineGrants(p.CUDA, p.Network == NetLoopback, privateProc, execOnly)
	for _, path := range p.ReadOnly {
		g = append(g, fsGrant{path, accessRead})
	}
	for _, path := range p.Exec {
		if execOnly {
			g = append(g, fsGrant{path, accessRead})
		} else {
			g = append(g, fsGrant{path, accessExec})
		}
	}
	for _, path := range p.ExecOnly {
		g = append(g, fsGrant{path, accessExec})
	}
	rw := accessRW
	if abi >= 2 {
		rw |= ll.AccessFSRefer
	}
	for _, path := range p.ReadWrite {
		g = append(g, fsGrant{path, rw})
	}
	return g
}

// applyLandlock enforces the policy's file-system rules (and the scopes and
// network rules its mode allows) on the calling thread, which must be locked
// and must already have no_new_privs; execve hands the domain to the target.
func applyLandlock(p Policy, privateProc bool) (string, error) {
	kernelABI, err := ll.LandlockGetABIVersion()
	if err != nil {
		return "", fmt.Errorf("landlock_create_ruleset(VERSION): Landlock unavailable in this kernel: %w", err)
	}
	if kernelABI < 1 {
		return "", errors.New("landlock_create_ruleset(VERSION): Landlock disabled at boot")
	}
	cfg := landlock.V11
	abi := min(kernelABI, 11)
	cfg.Scoped = ll.ScopeSignal
	scopes := "signal"
	netDesc := "tcp/udp bind+connect denied"
	if p.Network == NetLoopback {
		// Ranks live in sibling domains and NCCL passes handles over
		// abstract UNIX sockets, so that scope would break them.
		cfg.HandledAccessNet = 0
		netDesc = "tcp allowed (loopback namespace)"
	} else {
		cfg.Scoped |= ll.ScopeAbstractUnixSocket
		scopes += ", abstract-unix"
	}

	var rules []landlock.Rule
	granted := 0
	for _, gr := range landlockGrants(p, abi, privateProc) {
		st, err := os.Stat(gr.path)
		if err != nil {
			continue // missing paths are not granted
		}
		access := gr.access
		if !st.IsDir() {
			access &= accessFileOnly
		}
		rules = append(rules, landlock.PathAccess(access, gr.path).IgnoreIfMissing())
		granted++
	}
	fd, flags, err := cfg.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return "", fmt.Errorf("build ruleset: %w", err)
	}
	if fd < 0 {
		return "", fmt.Errorf("build ruleset: nothing enforceable at kernel ABI v%d", kernelABI)
	}
	defer closeFD(fd)
	if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
		return "", fmt.Errorf("landlock_restrict_self: %w", err)
	}
	var missing []string
	if abi < 2 {
		missing = append(missing, "refer")
	}
	if abi < 3 {
		missing = append(missing, "truncate")
	}
	if abi < 4 {
		netDesc = "network rules unsupported"
	}
	if abi < 5 {
		missing = append(missing, "ioctl-dev")
	}
	if abi < 6 {
		scopes = "unsupported"
	}
	detail := fmt.Sprintf("ABI v%d enforced (kernel v%d); %d path rules; scopes: %s; %s", abi, kernelABI, granted, scopes, netDesc)
	if len(p.ExecOnly) > 0 {
		detail += fmt.Sprintf("; execute: only %s", strings.Join(p.ExecOnly, ", "))
	}
	if len(missing) > 0 {
		detail += "; rights unavailable at this ABI: " + strings.Join(missing, ", ")
	}
	return detail, nil
}

// LandlockAvailable reports whether this kernel enforces Landlock, the
// layer that can keep a granted directory read-only for a process of the
// same user.
func LandlockAvailable() bool {
	abi, err := ll.LandlockGetABIVersion()
	return err == nil && abi >= 1
}
