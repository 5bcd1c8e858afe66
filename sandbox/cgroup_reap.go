//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// ReapCgroups kills and removes the groups under "corral/<prefix>/" that a crashed
// supervisor left behind: every leaf group, in any hierarchy, whose name live does not
// claim. live gets the full group name ("corral/<prefix>/<session>"). Emptied
// intermediate directories, and the prefix directory itself once empty, go too; nothing
// outside the prefix is touched. Run it before starting sessions, or let live know
// about groups being created, else a new group may be reaped as it is born. It returns
// the removed names, sorted, and carries on past a group it cannot remove.
func ReapCgroups(prefix string, live func(name string) bool) (removed []string, err error) {
	return cgReap(cgDetect(cgroupMount), prefix, live)
}

func cgReap(lay cgLayout, prefix string, live func(string) bool) ([]string, error) {
	for _, p := range strings.Split(prefix, "/") {
		if err := cgCheckComponent(p); err != nil {
			return nil, fmt.Errorf("reap cgroups %q: %w", prefix, err)
		}
	}
	if lay.mode == CgroupNone {
		return nil, nil // no hierarchy, nothing can have been left behind
	}
	base := path.Join(CgroupRoot, prefix)
	leaves := map[string]bool{}
	var dirs []string // every directory under base, any hierarchy, as group names
	for _, m := range lay.mounts() {
		root := filepath.Join(m, base)
		err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil
				}
				return err
			}
			if !e.IsDir() || p == root {
				return nil
			}
			rel, _ := filepath.Rel(m, p)
			name := filepath.ToSlash(rel)
			dirs = append(dirs, name)
			if !cgHasSubdir(p) {
				leaves[name] = true
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reap cgroups under %s: %w", root, err)
		}
	}
	var removed []string
	var errs []error
	names := make([]string, 0, len(leaves))
	for n := range leaves {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		if live(name) {
			continue
		}
		c, err := cgBind(lay, name)
		if err == nil {
			err = c.Kill()
		}
		if err == nil {
			err = c.Delete()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reap: %w", err))
			continue
		}
		removed = append(removed, name)
	}
	// Deepest first, then the prefix itself. rmdir refuses a directory with child
	// groups or tasks, so live groups and their ancestors stay.
	slices.SortFunc(dirs, func(a, b string) int {
		if d := strings.Count(b, "/") - strings.Count(a, "/"); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	dirs = append(slices.Compact(dirs), base)
	for _, name := range dirs {
		if live(name) {
			continue
		}
		for _, m := range lay.mounts() {
			os.Remove(filepath.Join(m, name)) // refusal is the point; see above
		}
	}
	return removed, errors.Join(errs...)
}

func cgHasSubdir(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			return true
		}
	}
	return false
}

// CgroupFeature says whether one cgroup feature works on this host and through what
// ("v1 memory", "v2 unified cgroup.kill", ...), or why not.
type CgroupFeature struct {
	OK  bool   `json:"ok"`
	Via string `json:"via,omitempty"`
	Err string `json:"error,omitempty"`
}

// CgroupProbe is what ProbeCgroups found: the host's mode and each feature corral uses.
type CgroupProbe struct {
	Mode   CgroupMode    `json:"mode"`
	Group  string        `json:"group"` // the probe group, created and removed
	Memory CgroupFeature `json:"memory"`
	CPU    CgroupFeature `json:"cpu"`
	Pids   CgroupFeature `json:"pids"`
	Freeze CgroupFeature `json:"freeze"`
	Kill   CgroupFeature `json:"kill"`
	Err    string        `json:"error,omitempty"` // creating or removing the probe group failed
}

// Usable reports whether every feature works.
func (p CgroupProbe) Usable() bool {
	return p.Err == "" && p.Memory.OK && p.CPU.OK && p.Pids.OK && p.Freeze.OK && p.Kill.OK
}

// ProbeCgroups tries each feature for real on a probe group "corral/probe-<pid>" —
// setting a limit, freezing and thawing, cgroup.kill — and removes the group again.
// Mount tables say what exists; only a write says what works (a read-only cgroupfs in a
// container, a controller not delegated, a kernel without cgroup.kill).
func ProbeCgroups() CgroupProbe { return cgProbe(cgDetect(cgroupMount)) }

func cgProbe(lay cgLayout) CgroupProbe {
	p := CgroupProbe{Mode: lay.mode, Group: fmt.Sprintf("%s/probe-%d", CgroupRoot, os.Getpid())}
	fail := func(msg string) CgroupProbe {
		p.Err = msg
		for _, f := range []*CgroupFeature{&p.Memory, &p.CPU, &p.Pids, &p.Freeze, &p.Kill} {
			if f.Err == "" && !f.OK {
				f.Err = msg
			}
		}
		return p
	}
	c, err := cgNew(lay, p.Group, Limits{})
	if err != nil {
		return fail(err.Error())
	}
	via := func(ctl cgCtl, v1, v2 string) string {
		if !ctl.v2 {
			return "v1 " + v1
		}
		return "v2 " + v2
	}
	feature := func(ctl cgCtl, name string, viaName string, set func() error) CgroupFeature {
		if ctl.dir == "" {
			return CgroupFeature{Err: fmt.Sprintf("no %s controller", name)}
		}
		if err := set(); err != nil {
			return CgroupFeature{Via: viaName, Err: err.Error()}
		}
		return CgroupFeature{OK: true, Via: viaName}
	}
	memVia := via(c.mem, "memory", "memory")
	if _, err := os.Stat(filepath.Join(c.mem.dir, "memory.memsw.limit_in_bytes")); err == nil && !c.mem.v2 {
		memVia += " (+memsw)"
	}
	p.Memory = feature(c.mem, "memory", memVia, func() error { return c.setMemory(Limits{Memory: 64 << 20}) })
	cpuVia := via(c.cpu, "cpu", "cpu")
	if c.cpuacct.dir != "" && !c.cpu.v2 {
		cpuVia += "+cpuacct"
	}
	p.CPU = feature(c.cpu, "cpu", cpuVia, func() error { return c.setCPU(Limits{CPU: 0.5}) })
	p.Pids = feature(c.pids, "pids", via(c.pids, "pids", "pids"), func() error { return c.setPids(Limits{Pids: 64}) })

	unified := "v2 "
	if lay.mode == CgroupHybrid {
		unified = "v2 unified "
	}
	freezeVia := "v1 freezer"
	if c.freezer.v2 {
		freezeVia = unified + "cgroup.freeze"
	}
	p.Freeze = feature(c.freezer, "freezer", freezeVia, func() error {
		if err := c.Freeze(); err != nil {
			return err
		}
		return c.Thaw()
	})
	switch {
	case c.hasKillFile():
		p.Kill = CgroupFeature{OK: true, Via: unified + "cgroup.kill"}
		if err := cgWrite(c.unified, "cgroup.kill", "1"); err != nil {
			p.Kill = CgroupFeature{Via: unified + "cgroup.kill", Err: err.Error()}
		}
	case c.freezer.dir != "" && !c.freezer.v2:
		p.Kill = CgroupFeature{OK: true, Via: "v1 freezer + SIGKILL each pid"}
	default:
		p.Kill = CgroupFeature{OK: true, Via: "SIGKILL each pid (a fast fork loop may outrun it)"}
	}
	if err := c.Delete(); err != nil {
		p.Err = err.Error()
	}
	return p
}
