//go:build linux

package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tests run one after another: the CPU measurements want the machine to themselves.

var (
	cgRootOnce    sync.Once
	cgRootExisted = map[string]bool{} // "corral" dirs present before any test made one

	cgParentChecked sync.Map // test name → its parent check is registered
)

// requireCgroups skips without root or cgroups, and registers (first, so it runs last)
// the removal of this test's parent "corral/test-<pid>" — and of "corral" itself if the
// tests created it — checking nothing is left.
func requireCgroups(t *testing.T) cgLayout {
	t.Helper()
	requireRoot(t)
	lay := cgDetect(cgroupMount)
	if lay.mode == CgroupNone {
		t.Skip("no cgroup hierarchy mounted under " + cgroupMount)
	}
	cgRootOnce.Do(func() {
		for _, m := range lay.mounts() {
			_, err := os.Stat(filepath.Join(m, CgroupRoot))
			cgRootExisted[m] = err == nil
		}
	})
	if _, seen := cgParentChecked.LoadOrStore(t.Name(), true); seen {
		return lay
	}
	t.Cleanup(func() {
		for _, m := range lay.mounts() {
			parent := filepath.Join(m, CgroupRoot, fmt.Sprintf("test-%d", os.Getpid()))
			cgRmdirTree(parent) // and the intermediate dirs Delete leaves
			if _, err := os.Stat(parent); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("left behind: %s", parent)
			}
			if !cgRootExisted[m] {
				os.Remove(filepath.Join(m, CgroupRoot)) // refused if someone else uses it
			}
		}
	})
	return lay
}

func cgTestName(suffix string) string {
	return fmt.Sprintf("%s/test-%d/%s", CgroupRoot, os.Getpid(), suffix)
}

// newTestCgroup creates a group for this test; cleanup kills, deletes and checks that
// its directories are gone.
func newTestCgroup(t *testing.T, suffix string, lim Limits) *Cgroup {
	t.Helper()
	requireCgroups(t)
	c, err := NewCgroup(cgTestName(suffix), lim)
	if err != nil {
		t.Fatal(err)
	}
	cgCleanup(t, c)
	return c
}

func cgCleanup(t *testing.T, c *Cgroup) {
	t.Cleanup(func() {
		if err := c.Kill(); err != nil {
			t.Error(err)
		}
		if err := c.Delete(); err != nil {
			t.Error(err)
		}
		for _, d := range c.Dirs() {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("left behind: %s", d)
			}
		}
	})
}

// cgProc is a shell script started outside the group, parked on `read` until Add has
// moved it in, so all its work happens under the group's budget.
type cgProc struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func startInCgroup(t *testing.T, c *Cgroup, script string) *cgProc {
	t.Helper()
	p := &cgProc{done: make(chan struct{})}
	p.cmd = exec.Command("sh", "-c", "read _ || exit 99\n"+script)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		c.Kill()
		p.cmd.Process.Kill()
		<-p.done
	})
	if err := c.Add(p.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	stdin.Write([]byte("go\n"))
	stdin.Close()
	return p
}

// wait returns the exit error, failing the test if the script outlives d.
func (p *cgProc) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		t.Fatalf("process %d still running after %v", p.cmd.Process.Pid, d)
		return nil
	}
}

func cgStats(t *testing.T, c *Cgroup) CgroupStats {
	t.Helper()
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitFor polls cond every 10 ms up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

// cgWaitUncharged waits for pids.current to reach 0. It lags cgroup.procs: a killed
// task leaves the list when it exits but stays charged until its parent (here the
// orphaned sleeps' new parent, pid 1) reaps the zombie.
func cgWaitUncharged(t *testing.T, c *Cgroup) {
	t.Helper()
	waitFor(t, 5*time.Second, "pids.current to reach 0", func() bool { return cgStats(t, c).Pids == 0 })
}

func cgReadString(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestCgroupAddSetsLimitsInEveryHierarchy(t *testing.T) {
	c := newTestCgroup(t, "add", Limits{CPU: 0.5, Memory: 64 << 20, Pids: 20})
	p := startInCgroup(t, c, "exec sleep 30")
	pid := p.cmd.Process.Pid

	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]string{} // controller ("" for cgroup2) → path
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		for _, ctl := range strings.Split(parts[1], ",") {
			in[ctl] = parts[2]
		}
	}
	want := "/" + c.Name()
	lay := cgDetect(cgroupMount)
	for ctl := range lay.v1 {
		if in[ctl] != want {
			t.Errorf("%s hierarchy: pid %d in %q, want %q", ctl, pid, in[ctl], want)
		}
	}
	if lay.unified != "" && in[""] != want {
		t.Errorf("cgroup2: pid %d in %q, want %q", pid, in[""], want)
	}
	if pids, err := c.Pids(); err != nil || !slices.Contains(pids, pid) {
		t.Errorf("Pids() = %v, %v; want it to hold %d", pids, err, pid)
	}

	mem := map[bool][][2]string{
		false: {{"memory.limit_in_bytes", "67108864"}},
		true:  {{"memory.max", "67108864"}},
	}[c.mem.v2]
	if _, err := os.Stat(filepath.Join(c.mem.dir, "memory.memsw.limit_in_bytes")); err == nil {
		mem = append(mem, [2]string{"memory.memsw.limit_in_bytes", "67108864"})
	}
	for _, f := range mem {
		if got := cgReadString(t, c.mem.dir, f[0]); got != f[1] {
			t.Errorf("%s = %s, want %s", f[0], got, f[1])
		}
	}
	cpuFile, cpuWant := "cpu.cfs_quota_us", "50000"
	if c.cpu.v2 {
		cpuFile, cpuWant = "cpu.max", "50000 100000"
	}
	if got := cgReadString(t, c.cpu.dir, cpuFile); got != cpuWant {
		t.Errorf("%s = %s, want %s", cpuFile, got, cpuWant)
	}
	if got := cgReadString(t, c.pids.dir, "pids.max"); got != "20" {
		t.Errorf("pids.max = %s, want 20", got)
	}
	// (No memory check: v1 does not move a task's existing charge along with it, so a
	// freshly added sleep may well show 0 bytes.)
	if s := cgStats(t, c); s.Pids != 1 || s.Frozen {
		t.Errorf("stats = %+v, want 1 pid, not frozen", s)
	}
}

func TestCgroupFreezeStopsCPUAndThawResumes(t *testing.T) {
	c := newTestCgroup(t, "freeze", Limits{})
	startInCgroup(t, c, "while :; do :; done")
	waitFor(t, 2*time.Second, "the busy loop to use CPU", func() bool { return cgStats(t, c).CPUUsage > 50*time.Millisecond })

	start := time.Now()
	if err := c.Freeze(); err != nil {
		t.Fatal(err)
	}
	t.Logf("freeze took %v (%s)", time.Since(start), c.Mode())
	s1 := cgStats(t, c)
	if !s1.Frozen {
		t.Fatal("Stats().Frozen = false after Freeze")
	}
	time.Sleep(300 * time.Millisecond)
	s2 := cgStats(t, c)
	if grew := s2.CPUUsage - s1.CPUUsage; grew > 5*time.Millisecond {
		t.Errorf("CPU usage grew by %v while frozen", grew)
	}

	start = time.Now()
	if err := c.Thaw(); err != nil {
		t.Fatal(err)
	}
	t.Logf("thaw took %v", time.Since(start))
	time.Sleep(300 * time.Millisecond)
	s3 := cgStats(t, c)
	if s3.Frozen {
		t.Error("Stats().Frozen = true after Thaw")
	}
	if grew := s3.CPUUsage - s2.CPUUsage; grew < 100*time.Millisecond {
		t.Errorf("CPU usage grew by only %v in 300 ms after thaw", grew)
	}
}

func TestCgroupCPULimitThrottlesBusyLoop(t *testing.T) {
	c := newTestCgroup(t, "cpu", Limits{CPU: 0.2})
	startInCgroup(t, c, "while :; do :; done")
	time.Sleep(200 * time.Millisecond) // let it settle into its quota
	s0, t0 := cgStats(t, c), time.Now()
	time.Sleep(time.Second)
	s1, t1 := cgStats(t, c), time.Now()
	share := float64(s1.CPUUsage-s0.CPUUsage) / float64(t1.Sub(t0))
	t.Logf("busy loop at CPU 0.2 used %.0f%% of one CPU; throttled %d periods, %v",
		share*100, s1.ThrottledPeriods, s1.ThrottledTime)
	if share < 0.1 || share > 0.3 {
		t.Errorf("busy loop used %.2f of a CPU, want ≈0.2", share)
	}
	if s1.ThrottledPeriods == 0 || s1.ThrottledTime == 0 {
		t.Errorf("no throttling recorded: %+v", s1)
	}
}

func TestCgroupPidsLimitStopsForkLoopAndKillCleansUp(t *testing.T) {
	c := newTestCgroup(t, "pids", Limits{Pids: 50})
	p := startInCgroup(t, c, `i=0; while [ $i -lt 500 ]; do sleep 30 & i=$((i+1)); done; echo spawned $i; wait`)
	// Forks fail at the limit; pids.events counts each refusal.
	waitFor(t, 10*time.Second, "a fork refused at pids.max", func() bool {
		ev, err := cgReadKV(c.pids.dir, "pids.events")
		return err == nil && ev["max"] > 0
	})
	s := cgStats(t, c)
	pids, _ := c.Pids()
	t.Logf("pids.current %d, %d listed", s.Pids, len(pids))
	if s.Pids > 50 || len(pids) > 50 {
		t.Errorf("pids.current %d, %d listed: over the limit of 50", s.Pids, len(pids))
	}
	if s.Pids < 40 {
		t.Errorf("pids.current %d: the loop should have filled the budget", s.Pids)
	}

	start := time.Now()
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kill of %d processes took %v", len(pids), time.Since(start))
	if pids, err := c.Pids(); err != nil || len(pids) != 0 {
		t.Errorf("after Kill: pids %v, %v", pids, err)
	}
	p.wait(t, 5*time.Second)
	cgWaitUncharged(t, c)
}

func TestCgroupMemoryLimitOOMKillsHogNotUs(t *testing.T) {
	c := newTestCgroup(t, "oom", Limits{Memory: 64 << 20})
	// tail keeps a line that never ends: it grows until the OOM killer takes it.
	p := startInCgroup(t, c, "head -c 500M /dev/zero | tail")
	err := p.wait(t, 30*time.Second)
	if err == nil {
		t.Fatalf("memory hog exited cleanly; output %q", p.out.String())
	}
	s := cgStats(t, c)
	t.Logf("hog: %v; stats %+v", err, s)
	if s.OOMKills < 1 {
		t.Errorf("OOMKills = %d, want ≥ 1", s.OOMKills)
	}
	if s.MemoryPeak < 32<<20 || s.MemoryPeak > 64<<20+(1<<20) {
		t.Errorf("MemoryPeak = %d, want near the 64 MiB limit", s.MemoryPeak)
	}
}

func TestCgroupKillFrozenGroup(t *testing.T) {
	c := newTestCgroup(t, "killfrozen", Limits{})
	p := startInCgroup(t, c, "sleep 60 & sleep 60 & wait")
	waitFor(t, 2*time.Second, "three processes", func() bool { pids, _ := c.Pids(); return len(pids) == 3 })
	if err := c.Freeze(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kill of a frozen group took %v", time.Since(start))
	if err := p.wait(t, 2*time.Second); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("script exit = %v, want killed", err)
	}
	if pids, _ := c.Pids(); len(pids) != 0 {
		t.Errorf("after Kill: %v", pids)
	}
}

func TestCgroupKillWithoutKillFileStopsForkLoop(t *testing.T) {
	c := newTestCgroup(t, "killloop", Limits{Pids: 200})
	c.noKillFile = true // as on a pure v1 host or a kernel before 5.14
	startInCgroup(t, c, "while :; do sleep 30 & done")
	waitFor(t, 5*time.Second, "the fork loop to fill its budget", func() bool { return cgStats(t, c).Pids > 100 })
	start := time.Now()
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("signal-loop kill took %v", time.Since(start))
	if pids, err := c.Pids(); err != nil || len(pids) != 0 {
		t.Errorf("after Kill: pids %v, %v", pids, err)
	}
	if cgStats(t, c).Frozen {
		t.Error("Kill left the group frozen")
	}
	cgWaitUncharged(t, c)
}

func TestCgroupDeleteNeedsEmptyAndIsIdempotent(t *testing.T) {
	c := newTestCgroup(t, "delete", Limits{})
	startInCgroup(t, c, "exec sleep 30")
	if err := c.Delete(); !errors.Is(err, ErrCgroupBusy) {
		t.Fatalf("Delete of a busy group: %v, want ErrCgroupBusy", err)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := c.Delete(); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	for _, d := range c.Dirs() {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after Delete", d)
		}
	}
	if err := c.Kill(); err != nil {
		t.Errorf("Kill of a deleted group: %v", err)
	}
}

func TestCgroupNewRefusesBusyGroupAndReusesEmptyOne(t *testing.T) {
	c := newTestCgroup(t, "busy", Limits{Pids: 10})
	startInCgroup(t, c, "exec sleep 30")
	if _, err := NewCgroup(c.Name(), Limits{}); !errors.Is(err, ErrCgroupBusy) {
		t.Fatalf("NewCgroup over a busy group: %v, want ErrCgroupBusy", err)
	}
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	c2, err := NewCgroup(c.Name(), Limits{Pids: 30})
	if err != nil {
		t.Fatalf("NewCgroup over an empty group: %v", err)
	}
	if got := cgReadString(t, c2.pids.dir, "pids.max"); got != "30" {
		t.Errorf("reused group: pids.max = %s, want 30", got)
	}
}

func TestCgroupReapRemovesDeadGroupsUnderPrefixOnly(t *testing.T) {
	requireCgroups(t)
	prefix := fmt.Sprintf("test-%d/reap", os.Getpid())
	dead := newTestCgroup(t, "reap/dead", Limits{})
	liveCg := newTestCgroup(t, "reap/live", Limits{})
	deep := newTestCgroup(t, "reap/x/deep", Limits{})
	sibling := newTestCgroup(t, "reapx/other", Limits{}) // shares the prefix as a string only
	p := startInCgroup(t, dead, "exec sleep 30")

	var asked []string
	removed, err := ReapCgroups(prefix, func(name string) bool {
		asked = append(asked, name)
		return name == liveCg.Name()
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{dead.Name(), deep.Name()}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v (asked about %v)", removed, want, asked)
	}
	p.wait(t, 2*time.Second)
	for _, c := range []*Cgroup{dead, deep} {
		for _, d := range c.Dirs() {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s survived the reap", d)
			}
			if x := filepath.Dir(d); strings.HasSuffix(x, "/reap/x") {
				if _, err := os.Stat(x); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("emptied intermediate %s survived the reap", x)
				}
			}
		}
	}
	for _, c := range []*Cgroup{liveCg, sibling} {
		for _, d := range c.Dirs() {
			if _, err := os.Stat(d); err != nil {
				t.Errorf("%s should have been left alone: %v", d, err)
			}
		}
	}
}

func TestCgroupBadInput(t *testing.T) {
	lay := cgLayout{mode: CgroupHybrid, root: t.TempDir(), v1: map[string]string{}, v2ctl: map[string]bool{}}
	for _, name := range []string{"", "..", "corral", "corral/", "corral/..", "corral/../x", "/corral/x",
		"corral/x/", "corral//x", "other/x", "corral/a b", "corral/.hidden", "corral/memory.max"} {
		if _, err := cgNew(lay, name, Limits{}); !errors.Is(err, ErrCgroupName) {
			t.Errorf("name %q: err %v, want ErrCgroupName", name, err)
		}
	}
	for _, lim := range []Limits{{CPU: -1}, {CPU: 0.001}, {Memory: -1}, {Pids: -5}} {
		if _, err := cgNew(lay, "corral/x/y", lim); err == nil || !strings.Contains(err.Error(), "limits") {
			t.Errorf("limits %+v: err %v, want a limits error", lim, err)
		}
	}
	none := cgDetect(t.TempDir())
	if none.mode != CgroupNone {
		t.Fatalf("empty dir detected as %q", none.mode)
	}
	_, err := cgNew(none, "corral/x/y", Limits{})
	if !errors.Is(err, ErrCgroupUnsupported) || !strings.Contains(err.Error(), "mode none") {
		t.Errorf("mode none: err %v, want ErrCgroupUnsupported naming the mode", err)
	}
	// A hybrid host without a memory hierarchy cannot honour a memory limit.
	if _, err := cgNew(lay, "corral/x/y", Limits{Memory: 1 << 20}); !errors.Is(err, ErrCgroupUnsupported) {
		t.Errorf("memory limit without memory controller: %v", err)
	}
	for _, prefix := range []string{"", "..", "a/../b", "a b"} {
		if _, err := ReapCgroups(prefix, func(string) bool { return false }); !errors.Is(err, ErrCgroupName) {
			t.Errorf("ReapCgroups(%q): %v, want ErrCgroupName", prefix, err)
		}
	}
	t.Logf("e.g. %v", err)
}

func TestCgroupProbe(t *testing.T) {
	lay := requireCgroups(t)
	p := ProbeCgroups()
	b, _ := json.MarshalIndent(p, "", "  ")
	t.Logf("probe on this host:\n%s", b)
	if p.Mode != lay.mode {
		t.Errorf("probe mode %q, detected %q", p.Mode, lay.mode)
	}
	if !p.Usable() {
		t.Errorf("probe says cgroups are not fully usable: %s", b)
	}
	if _, ok := lay.v1["memory"]; ok && p.Memory.Via[:9] != "v1 memory" {
		t.Errorf("memory via %q, want the v1 hierarchy", p.Memory.Via)
	}
	for _, m := range lay.mounts() {
		if _, err := os.Stat(filepath.Join(m, p.Group)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("probe group left behind in %s", m)
		}
	}
}

// TestCgroupUnifiedFreezer drives the cgroup2 freezer (cgroup.freeze, cgroup.events) by
// hiding the v1 freezer, as on a v2 host; on a v2 host it is the normal path.
func TestCgroupUnifiedFreezer(t *testing.T) {
	lay := requireCgroups(t)
	if lay.unified == "" {
		t.Skip("no cgroup2 mount")
	}
	lay.v1 = maps.Clone(lay.v1) // the cleanup still walks the real layout
	delete(lay.v1, "freezer")
	c, err := cgNew(lay, cgTestName("v2freeze"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cgCleanup(t, c)
	if !c.freezer.v2 {
		t.Fatalf("freezer %+v, want the cgroup2 one", c.freezer)
	}
	p := startInCgroup(t, c, "sleep 60 & while :; do :; done")
	waitFor(t, 2*time.Second, "the busy loop to use CPU", func() bool { return cgStats(t, c).CPUUsage > 50*time.Millisecond })
	start := time.Now()
	if err := c.Freeze(); err != nil {
		t.Fatal(err)
	}
	t.Logf("cgroup2 freeze took %v", time.Since(start))
	s1 := cgStats(t, c)
	time.Sleep(200 * time.Millisecond)
	if s2 := cgStats(t, c); !s2.Frozen || s2.CPUUsage-s1.CPUUsage > 5*time.Millisecond {
		t.Errorf("frozen %v, CPU grew %v while frozen", s2.Frozen, s2.CPUUsage-s1.CPUUsage)
	}
	// cgroup2's freezer lets SIGKILL through: no thaw needed.
	if err := c.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, 2*time.Second); err == nil {
		t.Error("script survived Kill")
	}
}
