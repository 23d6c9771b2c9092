// Package sandbox starts untrusted programs (the candidate's Python worker)
// inside a layered, best-effort confinement and reports exactly which layers
// the kernel let it apply.
//
// # How a sandboxed process starts
//
// [Command] does not exec the target program directly. It re-executes the
// running binary (/proc/self/exe) with the sentinel argv[1] "__sandbox-exec"
// and the resolved policy as JSON in the environment variable
// CACHEON_SANDBOX_SPEC. That child is Go code of this package
// ([MaybeRunChild]); it confines itself on one locked OS thread and then
// execve(2)s the target, so every restriction is inherited by the program and
// by everything it spawns:
//
//  1. process-group: its own process group (Setpgid, set by the parent) and
//     SIGKILL as parent-death signal, so a dying cacheon takes it along.
//  2. pid-namespace: new PID and mount namespaces (CLONE_NEWPID|CLONE_NEWNS)
//     where the kernel allows them, with a procfs of the new namespace
//     mounted over /proc. The target becomes its init: when it dies the
//     kernel kills every process left in the namespace, so no grandchild
//     survives even if cacheon itself is killed, and /proc shows no host
//     process. (The CUDA driver needs /proc/self to be the process's own
//     entry, which is why /proc is remounted.) As init, the target ignores
//     signals it has no handler for when they come from inside the
//     namespace, SIGXCPU included: RLIMIT_CPU then ends it with SIGKILL at
//     the hard limit, one second after the soft one.
//  3. rlimits: RLIMIT_CPU (SIGXCPU at the soft limit, SIGKILL one second
//     later), RLIMIT_NOFILE, RLIMIT_FSIZE, RLIMIT_CORE=0.
//  4. memory: RLIMIT_AS on CPU; with CUDA, RLIMIT_DATA instead (the CUDA
//     driver reserves terabytes of address space, which RLIMIT_AS would
//     refuse). A cgroup memory limit is added where /sys/fs/cgroup allows it.
//  5. procs: a cgroup pids limit (v2 pids.max or v1 pids controller) where
//     possible; RLIMIT_NPROC when not running as root (for root it is
//     ignored by the kernel and would count every root process anyway);
//     otherwise a watchdog in the parent that counts the process group and
//     kills it above the limit. The detail says which one applied.
//  6. network: a private network namespace (unshare(CLONE_NEWNET)); in
//     [NetNone] no interface is up, in [NetLoopback] loopback is. Collective
//     ranks that must reach each other over 127.0.0.1 instead join (setns)
//     the one namespace named by [Policy.NetNSPath], made by [NewNetNS]. If
//     this layer fails in NetLoopback the target shares the host's network:
//     list it in [Policy.Require] when that matters.
//  7. capabilities: the bounding, ambient and inheritable sets are cleared,
//     so even a root-owned sandbox runs the target with no capability.
//  8. no-new-privs: PR_SET_NO_NEW_PRIVS.
//  9. landlock: file-system access limited to the policy's paths (read-only,
//     read+execute, read-write) plus a small baseline every Python needs (see
//     Policy); signals (and, without collective networking, abstract UNIX
//     sockets) scoped to the sandbox; TCP bind/connect denied in [NetNone].
//     The best ABI the kernel offers is used and reported.
//  10. seccomp: a deny-list filter returning EPERM (so Python raises an
//     exception the worker can report) for socket families other than
//     AF_UNIX (AF_INET, AF_INET6 and NETLINK_ROUTE are allowed in
//     [NetLoopback]), ptrace, process_vm_readv/writev, mount and the new mount
//     API, pivot_root, chroot, kexec, module loading, reboot, swapon/off, bpf,
//     perf_event_open, userfaultfd, keyrings, setns, new namespaces through
//     clone or unshare, setsid/setpgid (every descendant stays in the killable
//     process group) and io_uring (whose operations bypass seccomp). clone3
//     returns ENOSYS so libc falls back to clone, whose flags can be checked;
//     system calls of a foreign ABI (x32, or 32-bit int 0x80) are refused.
//
// The filter is written here against golang.org/x/sys rather than with
// elastic/go-seccomp-bpf: it needs argument checks (socket family, namespace
// bits in clone/unshare flags), a different errno for clone3, and an explicit
// x32 guard; as a straight-line program of about sixty instructions built from
// x/sys syscall numbers it is shorter to audit than the library's policy
// compiler and adds no dependency (the library would pull golang.org/x/net).
// Landlock uses github.com/landlock-lsm/go-landlock for its ABI downgrade
// logic, enforcing the ruleset on the locked thread just before execve.
//
// A layer that cannot be applied is never skipped silently: the child writes
// a JSON report to an inherited pipe just before execve, and [Cmd.Report]
// returns it. [Policy.Require] names layers whose failure must abort the start
// instead (fail closed).
//
// When the target exits, is killed, or its context ends, [Cmd.Wait] kills
// whatever is left of its process group and cgroup, so no orphan outlives it.
//
// # Wiring
//
// The re-exec needs the binary's main to hand control to this package before
// doing anything else. cmd/cacheon's main must start with
//
//	func main() {
//		sandbox.MaybeRunChild()
//		...
//	}
//
// and a test binary that starts sandboxed processes does the same in TestMain.
// There is no init() hook: the wiring is explicit.
package sandbox
