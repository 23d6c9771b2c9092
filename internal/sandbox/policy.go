package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// NetworkMode selects what networking a sandboxed process gets.
type NetworkMode int

const (
	// NetNone gives the process a private network namespace and allows only
	// AF_UNIX sockets. It is the zero value.
	NetNone NetworkMode = iota
	// NetLoopback allows AF_INET, AF_INET6 and NETLINK_ROUTE sockets in a
	// private network namespace whose only interface is loopback, for the
	// gloo and NCCL rendezvous of collective ranks. Ranks that must reach each
	// other join one namespace made by NewNetNS through Policy.NetNSPath.
	NetLoopback
)

// String returns "none" or "loopback".
func (m NetworkMode) String() string {
	switch m {
	case NetNone:
		return "none"
	case NetLoopback:
		return "loopback"
	}
	return fmt.Sprintf("NetworkMode(%d)", int(m))
}

// Defaults applied to zero-valued limits in a Policy.
const (
	DefaultMemoryBytes uint64 = 4 << 30 // CPU jobs: RLIMIT_AS
	// DefaultCUDAMemoryBytes is the RLIMIT_DATA of CUDA jobs: host memory for
	// inputs staged before they move to the GPU. torch 2.11 with CUDA graphs
	// and a Triton compile ran under 2 GiB on an H200 host.
	DefaultCUDAMemoryBytes uint64 = 16 << 30
	DefaultCPUSeconds      uint64 = 600
	DefaultMaxFiles        uint64 = 1024
	DefaultMaxFileSize     uint64 = 4 << 30
	// DefaultMaxProcs bounds tasks, and cgroup pids counts threads too:
	// torch starts one intra-op thread per core.
	DefaultMaxProcs uint64 = 512
)

// Layer names, as they appear in Report and Policy.Require.
const (
	LayerProcessGroup = "process-group"
	LayerPIDNamespace = "pid-namespace"
	LayerRlimits      = "rlimits"
	LayerMemory       = "memory"
	LayerProcs        = "procs"
	LayerNetwork      = "network"
	LayerCapabilities = "capabilities"
	LayerNoNewPrivs   = "no-new-privs"
	LayerLandlock     = "landlock"
	LayerSeccomp      = "seccomp"
)

// layerOrder is the order in which layers appear in a Report.
func layerOrder() []string {
	return []string{LayerProcessGroup, LayerPIDNamespace, LayerRlimits, LayerMemory,
		LayerProcs, LayerNetwork, LayerCapabilities, LayerNoNewPrivs, LayerLandlock, LayerSeccomp}
}

// Policy describes the confinement of one sandboxed process. Paths must be
// absolute; missing paths are ignored (a file-system rule cannot grant what
// does not exist).
//
// Besides the paths listed here every process may read a fixed baseline: it
// may read and execute /usr, /bin, /lib and /lib64; read the loader, user,
// time-zone and host configuration in /etc (ld.so.cache, ld.so.conf*,
// localtime, passwd, group, nsswitch.conf, hosts, host.conf, gai.conf);
// read /dev/zero, /dev/full, /dev/random, /dev/urandom and read-write
// /dev/null; read /sys/devices/system/cpu; and read /proc: all of it when
// the sandbox has its private /proc (it then shows only the sandbox's own
// processes), else only /proc/self, cpuinfo, meminfo, stat, filesystems,
// sys/kernel and sys/vm. With CUDA or NetLoopback it may read all of /sys
// (gloo, NCCL and NVML read the network and PCI topology there); with CUDA
// it may also write /proc/self (the driver does), read /proc/devices and
// /proc/driver/nvidia, and read, write and ioctl /dev/nvidia*. Nothing else:
// no /etc/shadow, /home, /root, /tmp, /dev/shm (NCCL's shared-memory
// transport needs it: grant it in ReadWrite), or other processes' /proc
// entries.
type Policy struct {
	// Dir is the job directory: the working directory and the only place
	// writable besides ReadWrite. Required. HOME, TMPDIR, TRITON_CACHE_DIR,
	// CUDA_CACHE_PATH and XDG_CACHE_HOME default to directories under
	// Dir/.cache, created by Start.
	Dir string `json:"dir"`
	// ReadOnly paths may be read (files and directory listings).
	ReadOnly []string `json:"read_only,omitempty"`
	// ReadWrite paths may be read, written, created and removed (not
	// executed). Dir is always included.
	ReadWrite []string `json:"read_write,omitempty"`
	// Exec paths may be read and executed: the interpreter and its
	// installation (see PythonPaths).
	Exec []string `json:"exec,omitempty"`
	// ExecOnly, when set, are the only files the target may execute (the
	// interpreter and its ELF loader, ElfInterpreter): /usr, /bin, /lib,
	// /lib64 and the Exec paths are then readable and not executable, so a
	// process that starts no other program cannot start one (rt51a: /bin/sh
	// from a CPU worker whose audit hook was switched off).
	ExecOnly []string `json:"exec_only,omitempty"`

	// MemoryBytes limits memory: RLIMIT_AS on CPU, RLIMIT_DATA with CUDA, plus
	// a cgroup limit where available. 0 means DefaultMemoryBytes, or
	// DefaultCUDAMemoryBytes with CUDA.
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
	// CPUSeconds limits CPU time per process (0: DefaultCPUSeconds).
	CPUSeconds uint64 `json:"cpu_seconds,omitempty"`
	// MaxFiles limits open file descriptors (0: DefaultMaxFiles).
	MaxFiles uint64 `json:"max_files,omitempty"`
	// MaxFileSize limits the size of a written file (0: DefaultMaxFileSize).
	MaxFileSize uint64 `json:"max_file_size,omitempty"`
	// MaxProcs limits processes and threads of the sandbox (0: DefaultMaxProcs).
	MaxProcs uint64 `json:"max_procs,omitempty"`

	// CUDA selects the CUDA-compatible memory limit and opens /dev/nvidia*.
	CUDA bool `json:"cuda,omitempty"`
	// Network selects the socket families allowed (default NetNone).
	Network NetworkMode `json:"network,omitempty"`
	// NetNSPath, when set, is a network namespace to join instead of creating
	// a private one (see NewNetNS). Only with NetLoopback.
	NetNSPath string `json:"netns_path,omitempty"`

	// Env is the environment of the target, as "KEY=value". The parent's
	// environment is never inherited; see Dir for the defaults added. PATH
	// defaults to /usr/local/bin:/usr/bin:/bin and LANG to C.UTF-8.
	Env []string `json:"env,omitempty"`

	// Require lists layers (Layer* constants) that must be applied: if one
	// fails, the target is not started and Start returns an error.
	Require []string `json:"require,omitempty"`
}

// withDefaults returns a copy of p with zero limits replaced by defaults and
// Dir added to ReadWrite, after validating it.
func (p Policy) withDefaults() (Policy, error) {
	if p.Dir == "" {
		return p, errors.New("policy: Dir (the job directory) is required")
	}
	for _, group := range [][]string{{p.Dir}, p.ReadOnly, p.ReadWrite, p.Exec, p.ExecOnly, {p.NetNSPath}} {
		for _, path := range group {
			if path != "" && !filepath.IsAbs(path) {
				return p, fmt.Errorf("policy: path %q is not absolute", path)
			}
		}
	}
	if p.Network != NetNone && p.Network != NetLoopback {
		return p, fmt.Errorf("policy: unknown network mode %d", int(p.Network))
	}
	if p.NetNSPath != "" && p.Network != NetLoopback {
		return p, errors.New("policy: NetNSPath requires Network = NetLoopback")
	}
	known := layerOrder()
	for _, name := range p.Require {
		if !slices.Contains(known, name) {
			return p, fmt.Errorf("policy: Require names unknown layer %q (known: %s)", name, strings.Join(known, ", "))
		}
	}
	if p.MemoryBytes == 0 {
		p.MemoryBytes = DefaultMemoryBytes
		if p.CUDA {
			p.MemoryBytes = DefaultCUDAMemoryBytes
		}
	}
	if p.CPUSeconds == 0 {
		p.CPUSeconds = DefaultCPUSeconds
	}
	if p.MaxFiles == 0 {
		p.MaxFiles = DefaultMaxFiles
	}
	if p.MaxFileSize == 0 {
		p.MaxFileSize = DefaultMaxFileSize
	}
	if p.MaxProcs == 0 {
		p.MaxProcs = DefaultMaxProcs
	}
	p.Dir = filepath.Clean(p.Dir)
	p.ReadWrite = append([]string{p.Dir}, p.ReadWrite...)
	return p, nil
}

// cacheDirs returns the environment defaults that point tools with caches
// into the job directory, keyed by variable name.
func cacheDirs(dir string) [][2]string {
	c := filepath.Join(dir, ".cache")
	return [][2]string{
		{"HOME", filepath.Join(c, "home")},
		{"TMPDIR", filepath.Join(c, "tmp")},
		{"TRITON_CACHE_DIR", filepath.Join(c, "triton")},
		{"CUDA_CACHE_PATH", filepath.Join(c, "nv")},
		{"XDG_CACHE_HOME", filepath.Join(c, "xdg")},
	}
}

// targetEnv builds the target's environment: defaults first, then p.Env
// entries, which override defaults of the same name.
func targetEnv(p Policy) []string {
	defaults := append(cacheDirs(p.Dir),
		[2]string{"PATH", "/usr/local/bin:/usr/bin:/bin"},
		[2]string{"LANG", "C.UTF-8"})
	set := make(map[string]bool, len(p.Env))
	for _, kv := range p.Env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	env := make([]string, 0, len(defaults)+len(p.Env))
	for _, d := range defaults {
		if !set[d[0]] {
			env = append(env, d[0]+"="+d[1])
		}
	}
	return append(env, p.Env...)
}

// human formats a byte count for reports.
func human(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dB", n)
}
