//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds on waiting for the kernel. Freezing normally takes a few ms; a task stuck in
// uninterruptible sleep (a hung FUSE or NFS call) can hold a group in FREEZING forever.
const (
	cgFreezeTimeout = 5 * time.Second
	cgKillTimeout   = 5 * time.Second
)

// Update sets new limits on a live group (a spare init's group taking its session's
// budget, or a budget changed at run time).
func (c *Cgroup) Update(lim Limits) error {
	if err := lim.Validate(); err != nil {
		return c.errorf("update", err)
	}
	if err := c.setLimits(lim); err != nil {
		return c.errorf("update", err)
	}
	return nil
}

// setLimits writes every limit, unlimited ones included, so a reused group loses stale
// values.
func (c *Cgroup) setLimits(lim Limits) error {
	if err := c.setCPU(lim); err != nil {
		return err
	}
	if err := c.setMemory(lim); err != nil {
		return err
	}
	return c.setPids(lim)
}

func (c *Cgroup) setCPU(lim Limits) error {
	if c.cpu.dir == "" {
		return nil
	}
	r := lim.Resources().CPU
	if c.cpu.v2 {
		v := fmt.Sprintf("max %d", cgroupPeriod)
		if r != nil {
			v = fmt.Sprintf("%d %d", *r.Quota, *r.Period)
		}
		return cgWrite(c.cpu.dir, "cpu.max", v)
	}
	if err := cgWrite(c.cpu.dir, "cpu.cfs_quota_us", "-1"); err != nil {
		return err
	}
	if r == nil {
		return nil
	}
	if err := cgWrite(c.cpu.dir, "cpu.cfs_period_us", strconv.FormatUint(*r.Period, 10)); err != nil {
		return err
	}
	return cgWrite(c.cpu.dir, "cpu.cfs_quota_us", strconv.FormatInt(*r.Quota, 10))
}

func (c *Cgroup) setMemory(lim Limits) error {
	if c.mem.dir == "" {
		return nil
	}
	r := lim.Resources().Memory
	// memory.oom.group stays 0 on v2: an OOM kills the biggest process (say a test
	// runner the agent started), not the whole session with it — as v1 does.
	if c.mem.v2 {
		v := "max"
		if r != nil {
			v = strconv.FormatInt(*r.Limit, 10)
		}
		if err := cgWrite(c.mem.dir, "memory.max", v); err != nil {
			return err
		}
		// v2 counts swap apart from memory (memory.swap.max is swap only), so "memory+swap
		// capped to the limit" is swap.max 0. The file is absent without swap accounting.
		if _, err := os.Stat(filepath.Join(c.mem.dir, "memory.swap.max")); err == nil {
			v = "max"
			if r != nil {
				v = strconv.FormatInt(*r.Swap-*r.Limit, 10)
			}
			return cgWrite(c.mem.dir, "memory.swap.max", v)
		}
		return nil
	}
	// v1 memsw.limit_in_bytes is memory+swap and must never be below limit_in_bytes:
	// open it up first, set the memory limit, then cap memsw to the same. The memsw files
	// exist only with swap accounting (CONFIG_MEMCG_SWAP, swapaccount=1).
	_, err := os.Stat(filepath.Join(c.mem.dir, "memory.memsw.limit_in_bytes"))
	memsw := err == nil
	if memsw {
		if err := cgWrite(c.mem.dir, "memory.memsw.limit_in_bytes", "-1"); err != nil {
			return err
		}
	}
	v := "-1"
	if r != nil {
		v = strconv.FormatInt(*r.Limit, 10)
	}
	if err := cgWrite(c.mem.dir, "memory.limit_in_bytes", v); err != nil {
		return err
	}
	if memsw && r != nil {
		return cgWrite(c.mem.dir, "memory.memsw.limit_in_bytes", strconv.FormatInt(*r.Swap, 10))
	}
	return nil
}

func (c *Cgroup) setPids(lim Limits) error {
	if c.pids.dir == "" {
		return nil
	}
	v := "max"
	if r := lim.Resources().Pids; r != nil {
		v = strconv.FormatInt(*r.Limit, 10)
	}
	return cgWrite(c.pids.dir, "pids.max", v)
}

// Freeze stops every process in the group and returns once the kernel reports the
// group frozen (v1: freezer.state passes FREEZING → FROZEN; v2: cgroup.events
// "frozen 1"). If that takes longer than 5 s the group is thawed again and an error
// returned, so a caller never works on a half-frozen group.
func (c *Cgroup) Freeze() error {
	if err := c.setFrozen(true, cgFreezeTimeout); err != nil {
		return c.errorf("freeze", err)
	}
	return nil
}

// Thaw lets the group's processes run again.
func (c *Cgroup) Thaw() error {
	if err := c.setFrozen(false, cgFreezeTimeout); err != nil {
		return c.errorf("thaw", err)
	}
	return nil
}

func (c *Cgroup) setFrozen(frozen bool, timeout time.Duration) error {
	if c.freezer.dir == "" {
		return fmt.Errorf("%w: no v1 freezer and no cgroup2 mount", ErrCgroupUnsupported)
	}
	file, want := "freezer.state", "THAWED"
	if frozen {
		want = "FROZEN"
	}
	if c.freezer.v2 {
		file, want = "cgroup.freeze", "0"
		if frozen {
			want = "1"
		}
	}
	deadline := time.Now().Add(timeout)
	delay := 100 * time.Microsecond
	for {
		// Rewriting the request each round is how runc and containerd drive v1: a read of
		// freezer.state is what advances FREEZING to FROZEN, and a task forked in between
		// gets caught by the next write.
		if err := cgWrite(c.freezer.dir, file, want); err != nil {
			return err
		}
		got, err := c.frozen()
		if err != nil {
			return err
		}
		if got == frozen {
			return nil
		}
		if time.Now().After(deadline) {
			if frozen {
				c.setFrozen(false, time.Second)
				return fmt.Errorf("not frozen after %v (a task in uninterruptible sleep?); thawed again", timeout)
			}
			return fmt.Errorf("not thawed after %v", timeout)
		}
		time.Sleep(delay)
		delay = min(2*delay, 10*time.Millisecond)
	}
}

// frozen reports the state the kernel has reached, not the one requested: v1
// freezer.state says FREEZING until every task stopped; v2 cgroup.freeze echoes the
// request while cgroup.events says whether it took.
func (c *Cgroup) frozen() (bool, error) {
	if c.freezer.dir == "" {
		return false, nil
	}
	if c.freezer.v2 {
		ev, err := c.statKV(c.freezer.dir, "cgroup.events")
		return ev["frozen"] == 1, err
	}
	b, err := c.statRead(c.freezer.dir, "freezer.state")
	return strings.TrimSpace(string(b)) == "FROZEN", err
}

// v1Frozen reports whether the v1 freezer holds the group in any state but THAWED.
func (c *Cgroup) v1Frozen() bool {
	if c.freezer.dir == "" || c.freezer.v2 {
		return false
	}
	b, err := os.ReadFile(filepath.Join(c.freezer.dir, "freezer.state"))
	return err == nil && strings.TrimSpace(string(b)) != "THAWED"
}

// hasKillFile reports whether cgroup.kill (cgroup2, kernel 5.14+) is there; on hybrid
// hosts it lives in the unified mount and kills the same processes.
func (c *Cgroup) hasKillFile() bool {
	if c.unified == "" || c.noKillFile {
		return false
	}
	_, err := os.Stat(filepath.Join(c.unified, "cgroup.kill"))
	return err == nil
}

// Kill SIGKILLs every process in the group and waits (up to 5 s) until it is empty.
//
// cgroup.kill kills the whole subtree in the kernel, racing no fork. Without it, each
// listed pid gets SIGKILL in a loop; with a v1 freezer the group is frozen around the
// listing so a fork loop cannot outrun it (runc does the same).
//
// A v1-frozen task ignores SIGKILL until thawed (it sleeps in the refrigerator, which
// a fatal signal does not wake; cgroup2's freezer does let SIGKILL through). So Kill
// signals first and thaws after: a task leaving the refrigerator meets its pending
// SIGKILL before it returns to user space, so a frozen agent never runs again.
func (c *Cgroup) Kill() error {
	deadline := time.Now().Add(cgKillTimeout)
	delay := time.Millisecond
	for {
		pids, err := c.Pids()
		if err != nil {
			return c.errorf("kill", err)
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return c.errorf("kill", fmt.Errorf("%d processes remain after %v: %v", len(pids), cgKillTimeout, pids))
		}
		if c.hasKillFile() {
			if err := cgWrite(c.unified, "cgroup.kill", "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
				return c.errorf("kill", err)
			}
		} else if c.freezer.dir != "" && !c.freezer.v2 && !c.v1Frozen() {
			// Best effort: a group that will not freeze is still signalled below.
			c.setFrozen(true, 200*time.Millisecond)
			if pids, err = c.Pids(); err != nil {
				return c.errorf("kill", err)
			}
		}
		// Also signal each pid: covers a process that sits in our v1 hierarchies but
		// not the unified group (an Add that failed halfway). A pid recycled between
		// listing and signalling could be hit; the window is microseconds and the
		// group is being torn down, which corral accepts over pidfd bookkeeping.
		for _, pid := range pids {
			if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				return c.errorf("kill", fmt.Errorf("pid %d: %w", pid, err))
			}
		}
		if c.v1Frozen() {
			if err := cgWrite(c.freezer.dir, "freezer.state", "THAWED"); err != nil {
				return c.errorf("kill: thaw", err)
			}
		}
		time.Sleep(delay)
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// Stats reads the group's usage counters.
func (c *Cgroup) Stats() (CgroupStats, error) {
	var s CgroupStats
	if err := c.stats(&s); err != nil {
		return s, c.errorf("stats", err)
	}
	return s, nil
}

func (c *Cgroup) stats(s *CgroupStats) error {
	// CPU time: v1 cpuacct.usage (ns); cgroup2 keeps usage_usec in cpu.stat even in a
	// group with no controller enabled, so the unified group serves when cpuacct is gone.
	switch {
	case c.cpuacct.dir != "" && !c.cpuacct.v2:
		n, err := c.statUint(c.cpuacct.dir, "cpuacct.usage")
		if err != nil {
			return err
		}
		s.CPUUsage = time.Duration(n)
	case c.unified != "":
		st, err := c.statKV(c.unified, "cpu.stat")
		if err != nil {
			return err
		}
		s.CPUUsage = time.Duration(st["usage_usec"]) * time.Microsecond
	}
	if c.cpu.dir != "" {
		st, err := c.statKV(c.cpu.dir, "cpu.stat")
		if err != nil {
			return err
		}
		s.ThrottledPeriods = st["nr_throttled"]
		if c.cpu.v2 {
			s.ThrottledTime = time.Duration(st["throttled_usec"]) * time.Microsecond
		} else {
			s.ThrottledTime = time.Duration(st["throttled_time"])
		}
	}
	if err := c.memStats(s); err != nil {
		return err
	}
	if c.pids.dir != "" {
		n, err := c.statUint(c.pids.dir, "pids.current")
		if err != nil {
			return err
		}
		s.Pids = n
	}
	var err error
	s.Frozen, err = c.frozen()
	return err
}

func (c *Cgroup) memStats(s *CgroupStats) error {
	if c.mem.dir == "" {
		return nil
	}
	var err error
	if c.mem.v2 {
		if s.MemoryCurrent, err = c.statUint(c.mem.dir, "memory.current"); err != nil {
			return err
		}
		// memory.peak arrived in 5.19; older kernels leave MemoryPeak at 0.
		if s.MemoryPeak, err = c.statUint(c.mem.dir, "memory.peak"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		ev, err := c.statKV(c.mem.dir, "memory.events")
		s.OOMKills = ev["oom_kill"]
		return err
	}
	if s.MemoryCurrent, err = c.statUint(c.mem.dir, "memory.usage_in_bytes"); err != nil {
		return err
	}
	if s.MemoryPeak, err = c.statUint(c.mem.dir, "memory.max_usage_in_bytes"); err != nil {
		return err
	}
	oc, err := c.statKV(c.mem.dir, "memory.oom_control")
	s.OOMKills = oc["oom_kill"] // since 4.13
	return err
}

// cgReadUint reads a single-number control file ("max" reads as MaxUint64).
func cgReadUint(dir, file string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0, err
	}
	return cgParseUint(filepath.Join(dir, file), b)
}

func cgParseUint(path string, b []byte) (uint64, error) {
	v := strings.TrimSpace(string(b))
	if v == "max" {
		return ^uint64(0), nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// cgReadKV reads a flat keyed file ("key value" lines); unparsable values are skipped.
func cgReadKV(dir, file string) (map[string]uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return nil, err
	}
	return cgParseKV(b), nil
}

func cgParseKV(b []byte) map[string]uint64 {
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

// statFiles keeps a group's stat files open between samples: the supervisor reads about
// seven of them per session every second, and for 100 sessions opening them cost more
// than everything else it does while idle. cgroupfs files re-read from offset 0.
type statFiles struct {
	mu    sync.Mutex
	files map[string]*os.File
	buf   []byte
}

func (c *Cgroup) statRead(dir, file string) ([]byte, error) {
	c.stat.mu.Lock()
	defer c.stat.mu.Unlock()
	path := filepath.Join(dir, file)
	f, ok := c.stat.files[path]
	if !ok {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, err
		}
		if c.stat.files == nil {
			c.stat.files = map[string]*os.File{}
		}
		c.stat.files[path] = f
	}
	if c.stat.buf == nil {
		c.stat.buf = make([]byte, 4096)
	}
	n, err := f.ReadAt(c.stat.buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		delete(c.stat.files, path)
		return nil, err
	}
	return append([]byte(nil), c.stat.buf[:n]...), nil
}

// closeStats releases the open stat files (the group is going away).
func (c *Cgroup) closeStats() {
	c.stat.mu.Lock()
	defer c.stat.mu.Unlock()
	for p, f := range c.stat.files {
		f.Close()
		delete(c.stat.files, p)
	}
}

func (c *Cgroup) statUint(dir, file string) (uint64, error) {
	b, err := c.statRead(dir, file)
	if err != nil {
		return 0, err
	}
	return cgParseUint(filepath.Join(dir, file), b)
}

func (c *Cgroup) statKV(dir, file string) (map[string]uint64, error) {
	b, err := c.statRead(dir, file)
	if err != nil {
		return nil, err
	}
	return cgParseKV(b), nil
}
