package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupJoin is one cgroup directory the child moves itself into, and the
// limit it carries ("memory" or "pids").
type cgroupJoin struct {
	Dir        string `json:"dir"`
	Controller string `json:"controller"`
	Detail     string `json:"detail"`
}

// cgroupSet is the per-sandbox cgroup state kept by the parent.
type cgroupSet struct {
	joins []cgroupJoin
	notes map[string]string // controller → why it is missing, for the report
}

// note records why a controller ("pids", "memory", or "" for both) is not
// available.
func (cs *cgroupSet) note(controller, format string, args ...any) {
	if cs.notes == nil {
		cs.notes = map[string]string{}
	}
	msg := fmt.Sprintf(format, args...)
	for _, c := range []string{"pids", "memory"} {
		if controller == "" || controller == c {
			cs.notes[c] = msg
		}
	}
}

// setupCgroups creates a cgroup for the sandbox under the caller's own
// cgroup, in the v2 hierarchy when /sys/fs/cgroup is unified and in the v1
// pids and memory hierarchies otherwise, and writes the limits. A controller
// that cannot be set up is left out and noted; the child falls back to
// rlimits and the parent to a watchdog.
func setupCgroups(root string, p Policy) *cgroupSet {
	cs := &cgroupSet{}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		cs.note("", "cgroup: read /proc/self/cgroup: %v", err)
		return cs
	}
	limits := []struct{ controller, v2file, v1file, value, detail string }{
		{"pids", "pids.max", "pids.max", strconv.FormatUint(p.MaxProcs, 10), fmt.Sprintf("pids.max=%d", p.MaxProcs)},
		{"memory", "memory.max", "memory.limit_in_bytes", strconv.FormatUint(p.MemoryBytes, 10), "memory limit " + human(p.MemoryBytes)},
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		parent := filepath.Join(root, cgroupPath(self, ""))
		dir, err := os.MkdirTemp(parent, "cacheon-sandbox-")
		if err != nil {
			cs.note("", "cgroup v2: mkdir under %s: %v", parent, err)
			return cs
		}
		for _, l := range limits {
			// The controller must already be delegated to the caller's
			// cgroup (its cgroup.subtree_control); this package does not
			// change the caller's own cgroup.
			if _, err := os.Stat(filepath.Join(dir, l.v2file)); err != nil {
				cs.note(l.controller, "cgroup v2: %s controller not enabled in %s/cgroup.subtree_control", l.controller, parent)
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, l.v2file), []byte(l.value), 0); err != nil {
				cs.note(l.controller, "cgroup v2 %s: %v", l.controller, err)
				continue
			}
			if l.controller == "memory" {
				_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0)
			}
			cs.joins = append(cs.joins, cgroupJoin{Dir: dir, Controller: l.controller, Detail: "cgroup v2 " + l.detail})
		}
		if len(cs.joins) == 0 {
			_ = removeCgroup(dir)
		}
		return cs
	}
	for _, l := range limits {
		hier := filepath.Join(root, l.controller)
		if _, err := os.Stat(filepath.Join(hier, "cgroup.procs")); err != nil {
			cs.note(l.controller, "cgroup: no %s controller at %s", l.controller, hier)
			continue
		}
		parent := filepath.Join(hier, cgroupPath(self, l.controller))
		dir, err := os.MkdirTemp(parent, "cacheon-sandbox-")
		if err != nil {
			cs.note(l.controller, "cgroup v1 %s: mkdir under %s: %v", l.controller, parent, err)
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, l.v1file), []byte(l.value), 0); err != nil {
			cs.note(l.controller, "cgroup v1 %s: write %s: %v", l.controller, l.v1file, err)
			_ = removeCgroup(dir)
			continue
		}
		if l.controller == "memory" {
			// Count swap too, where the kernel accounts it.
			_ = os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), []byte(l.value), 0)
		}
		cs.joins = append(cs.joins, cgroupJoin{Dir: dir, Controller: l.controller, Detail: "cgroup v1 " + l.detail})
	}
	return cs
}

// cgroupPath returns the caller's cgroup path for a v1 controller, or the v2
// path when controller is "".
func cgroupPath(procSelfCgroup []byte, controller string) string {
	sc := bufio.NewScanner(bytes.NewReader(procSelfCgroup))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if controller == "" && parts[0] == "0" && parts[1] == "" {
			return parts[2]
		}
		if controller != "" && strings.Contains(","+parts[1]+",", ","+controller+",") {
			return parts[2]
		}
	}
	return "/"
}

// dirs returns the distinct cgroup directories of the sandbox.
func (cs *cgroupSet) dirs() []string {
	var out []string
	for _, j := range cs.joins {
		if len(out) == 0 || out[len(out)-1] != j.Dir {
			out = append(out, j.Dir)
		}
	}
	return out
}

// kill sends SIGKILL to every process in the sandbox's cgroups (cgroup.kill
// on v2, one by one on v1).
func (cs *cgroupSet) kill() {
	for _, dir := range cs.dirs() {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err == nil {
			continue
		}
		for _, pid := range cgroupProcs(dir) {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// remove kills what is left and removes the cgroups, waiting up to a few
// seconds for killed tasks to leave them.
func (cs *cgroupSet) remove() {
	deadline := time.Now().Add(5 * time.Second)
	for _, dir := range cs.dirs() {
		for {
			cs.kill()
			if err := removeCgroup(dir); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func removeCgroup(dir string) error {
	err := unix.Rmdir(dir)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}

// cgroupProcs lists the pids in a cgroup.
func cgroupProcs(dir string) []int {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// joinCgroups moves the calling process into each directory; it runs in
// the child before Landlock closes /sys.
func joinCgroups(joins []cgroupJoin) (joined map[string]string, failed map[string]string) {
	joined, failed = map[string]string{}, map[string]string{}
	for _, j := range joins {
		// "0" means the writing process, whatever PID namespace it is in.
		if err := os.WriteFile(filepath.Join(j.Dir, "cgroup.procs"), []byte("0"), 0); err != nil {
			failed[j.Controller] = fmt.Sprintf("%s: join %s: %v", j.Detail, j.Dir, err)
			continue
		}
		joined[j.Controller] = j.Detail
	}
	return joined, failed
}

// procsWatchdog counts the tasks (threads included, as cgroup pids does) of
// the process group pgid every interval and calls kill once the count
// exceeds max. It is the fallback when neither a cgroup nor RLIMIT_NPROC can
// bound a fork bomb; it returns when stop is closed.
func procsWatchdog(pgid int, max uint64, interval time.Duration, stop <-chan struct{}, kill func(count uint64)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if n := countGroupTasks(pgid); n > max {
			kill(n)
			return
		}
	}
}

// countGroupTasks sums num_threads over the processes whose process group is
// pgid, from /proc/<pid>/stat.
func countGroupTasks(pgid int) uint64 {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var total uint64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state ppid pgrp ... (pgrp
		// is the 3rd, num_threads the 18th).
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 18 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		if n, err := strconv.ParseUint(f[17], 10, 64); err == nil {
			total += n
		}
	}
	return total
}
