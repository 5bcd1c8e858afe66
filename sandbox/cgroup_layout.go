//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// This file finds the host's cgroup hierarchies and checks group names.

// DetectCgroupMode reports how this host mounts cgroups.
func DetectCgroupMode() CgroupMode { return cgDetect(cgroupMount).mode }

// cgLayout is where each hierarchy corral uses is mounted on this host.
type cgLayout struct {
	mode    CgroupMode
	root    string
	v1      map[string]string // v1 controller → mount dir (symlinks resolved)
	unified string            // the cgroup2 mount, "" if none
	v2ctl   map[string]bool   // controllers the cgroup2 root offers
}

// cgV1Controllers are the v1 hierarchies corral uses; cpuset, devices and blkio are
// left alone (an empty cpuset group would even refuse tasks until cpus/mems are set).
var cgV1Controllers = []string{"memory", "cpu", "cpuacct", "pids", "freezer"}

// cgDetect maps the hierarchies under root. A v1 hierarchy counts when root/<name> is
// a v1 cgroup mount; joint mounts (cpu,cpuacct) appear through their usual symlinks and
// resolve to one directory.
func cgDetect(root string) cgLayout {
	lay := cgLayout{mode: CgroupNone, root: root, v1: map[string]string{}, v2ctl: map[string]bool{}}
	if cgFSType(root) == unix.CGROUP2_SUPER_MAGIC {
		lay.mode, lay.unified = CgroupV2, root
	} else {
		for _, name := range cgV1Controllers {
			dir := filepath.Join(root, name)
			if cgFSType(dir) != unix.CGROUP_SUPER_MAGIC {
				continue
			}
			if real, err := filepath.EvalSymlinks(dir); err == nil {
				dir = real
			}
			lay.v1[name] = dir
		}
		if u := filepath.Join(root, "unified"); cgFSType(u) == unix.CGROUP2_SUPER_MAGIC {
			lay.unified = u
		}
		switch {
		case lay.unified != "":
			lay.mode = CgroupHybrid
		case len(lay.v1) > 0:
			lay.mode = CgroupV1
		}
	}
	if lay.unified != "" {
		if b, err := os.ReadFile(filepath.Join(lay.unified, "cgroup.controllers")); err == nil {
			for _, c := range strings.Fields(string(b)) {
				lay.v2ctl[c] = true
			}
		}
	}
	return lay
}

func cgFSType(path string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0
	}
	return int64(st.Type)
}

// mounts lists each distinct hierarchy directory, sorted.
func (lay cgLayout) mounts() []string {
	var out []string
	for _, d := range lay.v1 {
		out = append(out, d)
	}
	if lay.unified != "" {
		out = append(out, lay.unified)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// cgCheckName accepts "corral/<a>[/<b>...]" with short, plain components: no empty, "."
// or ".." parts, nothing the cgroup filesystem would read as a control file.
func cgCheckName(name string) error {
	parts := strings.Split(name, "/")
	if len(parts) < 2 || parts[0] != CgroupRoot {
		return fmt.Errorf("cgroup %q: %w: want %s/<name>[/<name>...]", name, ErrCgroupName, CgroupRoot)
	}
	for _, p := range parts[1:] {
		if err := cgCheckComponent(p); err != nil {
			return fmt.Errorf("cgroup %q: %w", name, err)
		}
	}
	return nil
}

func cgCheckComponent(p string) error {
	if p == "" || p == "." || p == ".." || len(p) > 128 || strings.HasPrefix(p, ".") {
		return fmt.Errorf("%w: component %q", ErrCgroupName, p)
	}
	for _, r := range p {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return fmt.Errorf("%w: component %q: only letters, digits, '-', '_', '.'", ErrCgroupName, p)
		}
	}
	// "memory.max", "cgroup.procs"... are control files in the parent directory.
	if strings.Contains(p, ".") {
		for _, pre := range []string{"cgroup.", "memory.", "cpu.", "cpuacct.", "pids.", "freezer.", "io.", "cpuset.", "hugetlb.", "rdma.", "misc."} {
			if strings.HasPrefix(p, pre) {
				return fmt.Errorf("%w: component %q looks like a control file", ErrCgroupName, p)
			}
		}
	}
	return nil
}
