//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// This file creates, fills and removes corral's cgroups; cgroup_layout.go finds the
// hierarchies and checks names; cgroup_control.go sets limits, freezes, kills and reads
// stats; cgroup_reap.go reaps and probes.
//
// Why direct file writes rather than github.com/containerd/cgroups/v3: importing its
// cgroup1/cgroup2 packages pulls eight modules that go.sum does not carry (cilium/ebpf,
// godbus, go-systemd, logrus, protobuf, ...), and three of its behaviours do not fit a
// supervisor that owns a terminal: Freeze/Thaw poll forever (a task in uninterruptible
// sleep keeps a v1 group FREEZING indefinitely), cgroup2 Freeze reads back cgroup.freeze
// (the requested state) rather than cgroup.events (the reached one), and cgroup2 Kill's
// fallback logs through logrus to stderr. The shapes are the library's: one directory per
// hierarchy, limits from an OCI runtime-spec LinuxResources, kill → wait → delete.

// CgroupRoot is the parent under which corral creates groups, in every hierarchy. No
// process is ever put in it (cgroup v2's "no internal processes" rule).
const CgroupRoot = "corral"

// cgroupMount is where the host's cgroup hierarchies are mounted.
var cgroupMount = "/sys/fs/cgroup" // a var so tests can present a host without cgroups

// CgroupMode says how the host mounts cgroups.
type CgroupMode string

// The cgroup modes DetectCgroupMode reports.
const (
	CgroupV1     CgroupMode = "v1"     // v1 controller hierarchies only
	CgroupHybrid CgroupMode = "hybrid" // v1 controllers plus an (often controller-less) v2 mount at unified/
	CgroupV2     CgroupMode = "v2"     // /sys/fs/cgroup is cgroup2
	CgroupNone   CgroupMode = "none"   // nothing usable
)

// Error classes for errors.Is.
var (
	ErrCgroupUnsupported = errors.New("unsupported on this host")
	ErrCgroupBusy        = errors.New("has processes")
	ErrCgroupName        = errors.New("invalid cgroup name")
)

// cgroupPeriod is the CFS period every CPU quota is expressed in (100 ms).
const cgroupPeriod = 100000

// Limits are a session's budgets; a zero field means unlimited.
type Limits struct {
	CPU    float64 // cores (1.5 = 150% of one CPU); 0 = unlimited
	Memory int64   // bytes; 0 = unlimited (also caps swap to the same when memsw exists)
	Pids   int64   // 0 = unlimited
}

// Validate rejects limits the kernel would refuse or misread.
func (l Limits) Validate() error {
	switch {
	case math.IsNaN(l.CPU) || math.IsInf(l.CPU, 0) || l.CPU < 0:
		return fmt.Errorf("limits: CPU %v: want 0 (unlimited) or a positive number of cores", l.CPU)
	case l.CPU > 0 && l.CPU*cgroupPeriod < 1000:
		// The kernel refuses a CFS quota under 1 ms.
		return fmt.Errorf("limits: CPU %v: below the kernel's minimum quota of 0.01 cores", l.CPU)
	case l.Memory < 0:
		return fmt.Errorf("limits: memory %d: want 0 (unlimited) or bytes", l.Memory)
	case l.Pids < 0:
		return fmt.Errorf("limits: pids %d: want 0 (unlimited) or a count", l.Pids)
	}
	return nil
}

// Resources translates the limits into the OCI runtime-spec form: CFS quota over a
// 100 ms period, a memory limit with memory+swap capped to the same (no swap), a pids
// limit. Nil members mean unlimited.
func (l Limits) Resources() *specs.LinuxResources {
	r := &specs.LinuxResources{}
	if l.CPU > 0 {
		period := uint64(cgroupPeriod)
		quota := int64(math.Round(l.CPU * cgroupPeriod))
		r.CPU = &specs.LinuxCPU{Period: &period, Quota: &quota}
	}
	if l.Memory > 0 {
		mem, swap := l.Memory, l.Memory
		r.Memory = &specs.LinuxMemory{Limit: &mem, Swap: &swap}
	}
	if l.Pids > 0 {
		n := l.Pids
		r.Pids = &specs.LinuxPids{Limit: &n}
	}
	return r
}

// CgroupStats is a snapshot of a group's usage.
type CgroupStats struct {
	CPUUsage         time.Duration
	MemoryCurrent    uint64
	MemoryPeak       uint64 // 0 where the kernel does not track it (v2 before 5.19)
	OOMKills         uint64
	ThrottledPeriods uint64
	ThrottledTime    time.Duration
	Pids             uint64 // pids.current: an exited task counts until its parent reaps it
	Frozen           bool
}

// cgCtl is one controller of one group: the group's directory in the hierarchy that
// serves it, and whether that hierarchy is cgroup2. An empty dir means unavailable.
type cgCtl struct {
	dir string
	v2  bool
}

// Cgroup is one corral group (e.g. "corral/<fleet>/<session>") in every hierarchy this
// host offers: on hybrid hosts the v1 memory, cpu, cpuacct, pids and freezer groups plus
// the same-named group in the unified v2 mount, used for cgroup.kill. Its methods are
// safe for concurrent use; it holds no state beyond paths.
type Cgroup struct {
	name    string
	mode    CgroupMode
	mem     cgCtl
	cpu     cgCtl
	cpuacct cgCtl
	pids    cgCtl
	freezer cgCtl
	unified string   // the group in the cgroup2 mount, "" if none
	dirs    []string // every directory of the group, one per hierarchy, sorted

	noKillFile bool // tests: pretend cgroup.kill is missing to exercise the fallback
	stat       statFiles
}

// Name returns the group's name relative to each hierarchy's root.
func (c *Cgroup) Name() string { return c.name }

// Mode returns the host mode the group was made under.
func (c *Cgroup) Mode() CgroupMode { return c.mode }

// Dirs returns the group's directory in every hierarchy it spans.
func (c *Cgroup) Dirs() []string { return slices.Clone(c.dirs) }

// NewCgroup creates (or reuses, if it exists and is empty) the named group in every
// hierarchy and sets its limits. The name must lie under CgroupRoot.
func NewCgroup(name string, lim Limits) (*Cgroup, error) {
	return cgNew(cgDetect(cgroupMount), name, lim)
}

// OpenCgroup attaches to an existing group, e.g. after a supervisor restart.
func OpenCgroup(name string) (*Cgroup, error) {
	if err := cgCheckName(name); err != nil {
		return nil, err
	}
	c, err := cgBind(cgDetect(cgroupMount), name)
	if err != nil {
		return nil, err
	}
	for _, d := range c.dirs {
		if _, err := os.Stat(d); err == nil {
			return c, nil
		}
	}
	return nil, fmt.Errorf("cgroup %s (%s): open: %w", name, c.mode, os.ErrNotExist)
}

func cgNew(lay cgLayout, name string, lim Limits) (*Cgroup, error) {
	if err := cgCheckName(name); err != nil {
		return nil, err
	}
	if err := lim.Validate(); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", name, err)
	}
	c, err := cgBind(lay, name)
	if err != nil {
		return nil, err
	}
	for _, need := range []struct {
		on   bool
		ctl  cgCtl
		what string
	}{
		{lim.CPU > 0, c.cpu, "cpu"},
		{lim.Memory > 0, c.mem, "memory"},
		{lim.Pids > 0, c.pids, "pids"},
	} {
		if need.on && need.ctl.dir == "" {
			return nil, fmt.Errorf("cgroup %s (%s under %s): %s limit: %w: no %s controller (v1 hierarchy or v2 cgroup.controllers)",
				name, lay.mode, lay.root, need.what, ErrCgroupUnsupported, need.what)
		}
	}
	if pids, err := c.Pids(); err != nil {
		return nil, err
	} else if len(pids) > 0 {
		return nil, c.errorf("create", fmt.Errorf("%w: exists with pids %v", ErrCgroupBusy, pids))
	}
	// A concurrent reap or test cleanup may rmdir an empty parent between our mkdirs;
	// retry then rather than fail a session start.
	for attempt := 0; ; attempt++ {
		err = c.create(lay)
		if err == nil || !errors.Is(err, os.ErrNotExist) || attempt == 3 {
			break
		}
	}
	if err == nil {
		err = c.setLimits(lim)
	}
	if err == nil {
		// A reused group may have been left frozen by a crashed supervisor; a process
		// added to it would stop at once.
		err = c.setFrozen(false, cgFreezeTimeout)
	}
	if err != nil {
		c.Delete()
		return nil, c.errorf("create", err)
	}
	return c, nil
}

// cgBind computes the group's directories without touching the filesystem.
func cgBind(lay cgLayout, name string) (*Cgroup, error) {
	if lay.mode == CgroupNone {
		return nil, fmt.Errorf("cgroup %s: %w: no cgroup hierarchy mounted under %s (mode none)",
			name, ErrCgroupUnsupported, lay.root)
	}
	c := &Cgroup{name: name, mode: lay.mode}
	if lay.unified != "" {
		c.unified = filepath.Join(lay.unified, name)
	}
	// Prefer a v1 hierarchy for each controller (on hybrid hosts the controllers are
	// bound there and the unified root offers none); fall back to cgroup2 when the
	// controller is enabled at its root.
	pick := func(ctl string) cgCtl {
		if d, ok := lay.v1[ctl]; ok {
			return cgCtl{dir: filepath.Join(d, name)}
		}
		if c.unified != "" && lay.v2ctl[ctl] {
			return cgCtl{dir: c.unified, v2: true}
		}
		return cgCtl{}
	}
	c.mem, c.cpu, c.cpuacct, c.pids = pick("memory"), pick("cpu"), pick("cpuacct"), pick("pids")
	// cgroup2 freezes without a controller (cgroup.freeze, kernel 5.2+).
	if d, ok := lay.v1["freezer"]; ok {
		c.freezer = cgCtl{dir: filepath.Join(d, name)}
	} else if c.unified != "" {
		c.freezer = cgCtl{dir: c.unified, v2: true}
	}
	for _, ctl := range []cgCtl{c.mem, c.cpu, c.cpuacct, c.pids, c.freezer} {
		if ctl.dir != "" {
			c.dirs = append(c.dirs, ctl.dir)
		}
	}
	if c.unified != "" {
		c.dirs = append(c.dirs, c.unified)
	}
	slices.Sort(c.dirs)
	c.dirs = slices.Compact(c.dirs)
	return c, nil
}

// create makes the group's directory in every hierarchy. In cgroup2 each ancestor must
// first delegate the controllers we use through cgroup.subtree_control, and a group
// that delegates may hold no processes — which is why nothing ever runs in "corral".
func (c *Cgroup) create(lay cgLayout) error {
	var err error
	for try := 0; try < 5; try++ {
		// ENOENT: a Delete removed an ancestor we had just made or found.
		if err = c.createOnce(lay); !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return err
}

func (c *Cgroup) createOnce(lay cgLayout) error {
	var v2ctl []string
	for _, x := range []struct {
		ctl  cgCtl
		name string
	}{{c.mem, "memory"}, {c.cpu, "cpu"}, {c.pids, "pids"}} {
		if x.ctl.v2 {
			v2ctl = append(v2ctl, "+"+x.name)
		}
	}
	for _, d := range c.dirs {
		if d != c.unified {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			continue
		}
		parts := strings.Split(c.name, "/")
		dir := lay.unified
		for _, p := range parts {
			// dir is an ancestor of the group: delegate before descending.
			if err := cgDelegate(dir, v2ctl); err != nil {
				return err
			}
			dir = filepath.Join(dir, p)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
		}
	}
	return nil
}

// cgDelegate enables the "+ctl" controllers in dir's cgroup.subtree_control unless
// they already are: skipping the write keeps a parent we may not write (a container's
// cgroup namespace root, a future rootless delegation) from failing us needlessly.
func cgDelegate(dir string, ctls []string) error {
	if len(ctls) == 0 {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	have := strings.Fields(string(b))
	var missing []string
	for _, c := range ctls {
		if !slices.Contains(have, strings.TrimPrefix(c, "+")) {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := cgWrite(dir, "cgroup.subtree_control", strings.Join(missing, " ")); err != nil {
		// EBUSY here is cgroup2's "no internal processes" rule: dir holds processes.
		return fmt.Errorf("delegate %s: %w", strings.Join(missing, " "), err)
	}
	return nil
}

func (c *Cgroup) errorf(op string, err error) error {
	return fmt.Errorf("cgroup %s (%s): %s: %w", c.name, c.mode, op, err)
}

// Add moves a process into the group in every hierarchy; its future children follow.
// A process caught mid-fork (TASK_NEW) makes the kernel answer EINVAL; retry like runc.
func (c *Cgroup) Add(pid int) error {
	if pid <= 0 {
		return c.errorf("add", fmt.Errorf("invalid pid %d", pid))
	}
	for _, d := range c.dirs {
		var err error
		for range 5 {
			if err = cgWrite(d, "cgroup.procs", fmt.Sprint(pid)); !errors.Is(err, unix.EINVAL) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			return c.errorf(fmt.Sprintf("add pid %d", pid), err)
		}
	}
	return nil
}

// Pids lists every process in the group or below it, in any hierarchy (a process moved
// out of one hierarchy by hand is still ours to kill). A deleted group has none.
func (c *Cgroup) Pids() ([]int, error) {
	var all []int
	for _, d := range c.dirs {
		err := filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil // gone (or going) in this hierarchy
				}
				return err
			}
			if !e.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if errors.Is(err, os.ErrNotExist) {
				return nil
			} else if err != nil {
				return err
			}
			for _, f := range strings.Fields(string(b)) {
				var pid int
				if _, err := fmt.Sscan(f, &pid); err == nil {
					all = append(all, pid)
				}
			}
			return nil
		})
		if err != nil {
			return nil, c.errorf("list pids", err)
		}
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

// Delete removes the group (and any child groups) from every hierarchy. It must be
// empty: kill first. Deleting a deleted group succeeds.
func (c *Cgroup) Delete() error {
	c.closeStats()
	pids, err := c.Pids()
	if err != nil {
		return err
	}
	if len(pids) > 0 {
		return c.errorf("delete", fmt.Errorf("%w: pids %v (kill first)", ErrCgroupBusy, pids))
	}
	var errs []error
	for _, d := range c.dirs {
		errs = append(errs, cgRmdirTree(d))
	}
	if err := errors.Join(errs...); err != nil {
		return c.errorf("delete", err)
	}
	// Take the now-empty ancestors (corral/<fleet>, corral) along, so a finished run
	// leaves nothing; one still holding another group answers EBUSY/ENOTEMPTY and stays.
	// create retries when it loses that race.
	for _, d := range c.dirs {
		for i := strings.Count(c.name, "/"); i > 0; i-- {
			d = filepath.Dir(d)
			if unix.Rmdir(d) != nil {
				break
			}
		}
	}
	return nil
}

// cgRmdirTree removes a cgroup directory and its child groups, deepest first. Control
// files cannot be unlinked (os.RemoveAll would fail on them); rmdir of an emptied
// group takes them along. Right after its last task exits the kernel may still answer
// EBUSY for a moment, so that is retried briefly.
func cgRmdirTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := cgRmdirTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	delay := time.Millisecond
	for {
		err := unix.Rmdir(dir)
		switch {
		case err == nil || errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.EBUSY) && delay < 200*time.Millisecond:
			time.Sleep(delay)
			delay *= 2
		default:
			return &os.PathError{Op: "rmdir", Path: dir, Err: err}
		}
	}
}

// cgWrite writes one control file. Unlike os.WriteFile it never creates: a missing
// file is a missing feature and must say so (ENOENT), not EACCES from cgroupfs.
func cgWrite(dir, file, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &os.PathError{Op: "write " + value, Path: filepath.Join(dir, file), Err: errors.Unwrap(err)}
	}
	return nil
}
