package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Offsets into struct seccomp_data (include/uapi/linux/seccomp.h): int nr;
// __u32 arch; __u64 instruction_pointer; __u64 args[6]. Arguments are read as
// their low 32 bits, which is where socket families and namespace flags live
// on the little-endian architectures supported here.
const (
	seccompNrOffset   = 0
	seccompArchOffset = 4
	seccompArgsOffset = 16
	x32SyscallBit     = 0x40000000
)

// namespace flags refused in clone(2) and unshare(2). CLONE_NEWTIME shares its
// bit with the exit signal in clone's flags, so it is only checked in unshare
// (clone3, which could carry it, returns ENOSYS).
const (
	cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
		unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET
	unshareNamespaces = cloneNamespaces | unix.CLONE_NEWTIME
)

// deniedSyscalls are answered with EPERM whatever their arguments.
func deniedSyscalls() []uint32 {
	return []uint32{
		unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
		unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
		unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
		unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_MOUNT_SETATTR,
		unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
		unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
		unix.SYS_REBOOT, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT, unix.SYS_QUOTACTL,
		unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
		unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
		unix.SYS_SETNS, unix.SYS_SETSID, unix.SYS_SETPGID,
		unix.SYS_OPEN_BY_HANDLE_AT,
		unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	}
}

// bpfAsm assembles a forward-only classic BPF program whose jump targets are
// named labels ("" means the next instruction).
type bpfAsm struct {
	insns  []unix.SockFilter
	jumps  [][2]string // per instruction: true and false targets
	labels map[string]int
}

func (a *bpfAsm) emit(code uint16, k uint32, jt, jf string) {
	a.insns = append(a.insns, unix.SockFilter{Code: code, K: k})
	a.jumps = append(a.jumps, [2]string{jt, jf})
}

func (a *bpfAsm) load(offset uint32) { a.emit(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offset, "", "") }
func (a *bpfAsm) ret(v uint32)       { a.emit(unix.BPF_RET|unix.BPF_K, v, "", "") }

// jeq jumps to jt when A == k, else to jf.
func (a *bpfAsm) jeq(k uint32, jt, jf string) {
	a.emit(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, k, jt, jf)
}

// jge jumps to jt when A >= k, else to jf.
func (a *bpfAsm) jge(k uint32, jt, jf string) {
	a.emit(unix.BPF_JMP|unix.BPF_JGE|unix.BPF_K, k, jt, jf)
}

// jset jumps to jt when A & k != 0, else to jf.
func (a *bpfAsm) jset(k uint32, jt, jf string) {
	a.emit(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, k, jt, jf)
}

func (a *bpfAsm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.insns)
}

// program resolves the labels into relative jump offsets.
func (a *bpfAsm) program() ([]unix.SockFilter, error) {
	out := make([]unix.SockFilter, len(a.insns))
	copy(out, a.insns)
	for i, j := range a.jumps {
		for n, name := range j {
			if name == "" {
				continue
			}
			target, ok := a.labels[name]
			if !ok {
				return nil, fmt.Errorf("bpf: undefined label %q", name)
			}
			off := target - i - 1
			if off < 0 || off > 255 {
				return nil, fmt.Errorf("bpf: jump from %d to %q out of range", i, name)
			}
			if n == 0 {
				out[i].Jt = uint8(off)
			} else {
				out[i].Jf = uint8(off)
			}
		}
	}
	return out, nil
}

// seccompArch returns the audit architecture of this build and whether the
// x32 ABI must be fenced off.
func seccompArch() (arch uint32, x32 bool, err error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, true, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, false, nil
	}
	return 0, false, fmt.Errorf("seccomp filter not written for GOARCH=%s", runtime.GOARCH)
}

// seccompProgram builds the filter for a network mode. Denied calls return
// EPERM; clone3 and x32 calls return ENOSYS; a foreign architecture (for
// example 32-bit int 0x80 calls on x86-64) kills the process.
func seccompProgram(mode NetworkMode) ([]unix.SockFilter, error) {
	arch, x32, err := seccompArch()
	if err != nil {
		return nil, err
	}
	const (
		allow  = "allow"
		eperm  = "eperm"
		enosys = "enosys"
		kill   = "kill"
	)
	var a bpfAsm
	a.load(seccompArchOffset)
	a.jeq(arch, "", kill)
	a.load(seccompNrOffset)
	if x32 {
		a.jge(x32SyscallBit, enosys, "")
	}
	for _, nr := range deniedSyscalls() {
		a.jeq(nr, eperm, "")
	}
	a.jeq(unix.SYS_CLONE3, enosys, "")
	a.jeq(unix.SYS_SOCKET, "socket", "")
	a.jeq(unix.SYS_CLONE, "clone", "")
	a.jeq(unix.SYS_UNSHARE, "unshare", "")
	a.ret(unix.SECCOMP_RET_ALLOW)

	a.label("socket")
	a.load(seccompArgsOffset) // domain
	if mode == NetLoopback {
		a.jeq(unix.AF_UNIX, allow, "")
		a.jeq(unix.AF_INET, allow, "")
		a.jeq(unix.AF_INET6, allow, "")
		a.jeq(unix.AF_NETLINK, "", eperm)
		a.load(seccompArgsOffset + 2*8) // protocol
		a.jeq(unix.NETLINK_ROUTE, allow, eperm)
	} else {
		a.jeq(unix.AF_UNIX, allow, eperm)
	}

	a.label("clone")
	a.load(seccompArgsOffset) // flags
	a.jset(cloneNamespaces, eperm, allow)

	a.label("unshare")
	a.load(seccompArgsOffset) // flags
	a.jset(unshareNamespaces, eperm, allow)

	a.label(allow)
	a.ret(unix.SECCOMP_RET_ALLOW)
	a.label(eperm)
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	a.label(enosys)
	a.ret(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	a.label(kill)
	a.ret(unix.SECCOMP_RET_KILL_PROCESS)
	return a.program()
}

// installSeccomp loads the filter on the calling thread, which must be
// locked and must have no_new_privs set; execve passes it on to the target.
func installSeccomp(mode NetworkMode) (string, error) {
	prog, err := seccompProgram(mode)
	if err != nil {
		return "", fmt.Errorf("build filter: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		if errors.Is(err, unix.EINVAL) {
			return "", fmt.Errorf("prctl(PR_SET_SECCOMP): kernel without seccomp filters: %w", err)
		}
		return "", fmt.Errorf("prctl(PR_SET_SECCOMP): %w", err)
	}
	families := "AF_UNIX"
	if mode == NetLoopback {
		families = "AF_UNIX, AF_INET, AF_INET6, NETLINK_ROUTE"
	}
	return fmt.Sprintf("%d-instruction filter, EPERM for %d syscalls and namespace flags; sockets: %s", len(prog), len(deniedSyscalls()), families), nil
}
