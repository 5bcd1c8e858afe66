package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"corral/policies"
	"corral/sandbox"

	"golang.org/x/sys/unix"
)

// runBench is `corral bench`: side-by-side measurements against what a user would
// otherwise use, printed with their ratios.
// benchKinds names the benches, for the usage lines.
const benchKinds = "sandbox|supervisor|publish|tui|gateway|lane|replay"

func runBench(args []string, stdout, stderr io.Writer) error {
	benches := map[string]func([]string, io.Writer, io.Writer) error{
		"sandbox": benchSandbox, "supervisor": benchSupervisor, "publish": benchPublish, "tui": benchTUI,
		"gateway": benchGateway, "lane": benchLane, "replay": benchReplay,
	}
	if len(args) == 0 || benches[args[0]] == nil {
		return badInput("want: bench %s [flags]", benchKinds)
	}
	return benches[args[0]](args[1:], stdout, stderr)
}

// benchSandbox is `corral bench sandbox`: sessions against git worktree add, capture
// against a full tree diff, a derived snapshot against a fresh one.
func benchSandbox(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench sandbox", stderr)
	repoDir := fs.String("repo", "", "benchmark on this repository (default: a fresh repo of $(go env GOROOT)/src)")
	counts := fs.String("sessions", "1,10,50,100", "session counts to bring up at once")
	wtMax := fs.Int("worktrees-max", 50, "largest count also measured with git worktree add")
	changed := fs.Int("changed", 500, "files an agent changes for the capture measurement")
	snapChanged := fs.Int("snapshot-changed", 10, "files a new revision changes for the snapshot measurement")
	pool := fs.Int("pool", 2, "spare inits kept booted, as the supervisor keeps them (0: every start is cold)")
	scratch := fs.String("scratch", defaultScratch(), "directory for the bench repository, worktrees and state")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var ns []int
	for _, s := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return badInput("--sessions %q: want comma-separated positive counts", *counts)
		}
		ns = append(ns, n)
	}
	b := &sandboxBench{poolSize: *pool, scratchParent: *scratch, out: stdout, log: stderr, counts: ns, wtMax: *wtMax, changed: *changed, snapChanged: *snapChanged}
	return b.run(*repoDir)
}

type sandboxBench struct {
	out, log    io.Writer
	counts      []int
	wtMax       int
	changed     int
	snapChanged int

	repo          sandbox.Repo
	poolSize      int
	pool          *sandbox.InitPool
	scratchParent string
	scratch       string
	seq           int
	goals         []goal
}

type goal struct {
	name string
	met  bool
	got  string
}

func (b *sandboxBench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "bench: "+format+"\n", args...)
}

func (b *sandboxBench) run(repoDir string) error {
	if err := os.MkdirAll(b.scratchParent, 0o755); err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(b.scratchParent, "corral-bench-")
	if err != nil {
		return err
	}
	b.scratch = scratch
	defer os.RemoveAll(scratch)
	if repoDir == "" {
		b.logf("building a repository from $(go env GOROOT)/src …")
		if repoDir, err = makeGoSrcRepo(filepath.Join(scratch, "repo")); err != nil {
			return err
		}
	}
	if b.repo, err = sandbox.OpenRepo(repoDir); err != nil {
		return badInput("--repo: %v", err)
	}
	files, _ := b.repo.Git("ls-files")
	fmt.Fprintf(b.out, "corral bench sandbox — repo %s (%d files), %s\n\n", b.repo.WorkTree, strings.Count(files, "\n"), hostLine())

	snaps, err := sandbox.OpenSnapshots(b.repo)
	if err != nil {
		return err
	}
	t0 := time.Now()
	snap, err := snaps.Ensure("HEAD")
	if err != nil {
		return err
	}
	fresh := time.Since(t0)
	fmt.Fprintf(b.out, "snapshot of HEAD (fresh, once per revision): %s\n\n", ms(fresh))

	// Cold starts first, for the record: what a session costs with no spare init.
	cold, err := b.bringUpSessionsRounds(snap, 1)
	if err != nil {
		return err
	}
	if b.poolSize > 0 {
		b.pool = sandbox.NewInitPool(b.repo, b.poolSize)
		defer b.pool.Close()
	}
	counts, err := b.measureSessions(snap)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "cold start (no spare init): p50 %s, p95 %s over %d starts; %s\n", ms(pct(cold.sLat, 50)), ms(pct(cold.sLat, 95)), len(cold.sLat), breakdown(cold.timings))
	fmt.Fprintf(b.out, "sessions below start from a pool of %d spare init(s), as the supervisor runs them\n\n", b.poolSize)
	if err := b.capture(snap); err != nil {
		return err
	}
	if err := b.snapshots(snaps); err != nil {
		return err
	}
	if err := b.measureWorktrees(counts); err != nil {
		return err
	}
	b.printCounts(counts)
	fmt.Fprintln(b.out, "goals:")
	for _, g := range b.goals {
		mark := "met "
		if !g.met {
			mark = "MISS"
		}
		fmt.Fprintf(b.out, "  [%s] %-48s %s\n", mark, g.name, g.got)
	}
	return nil
}

// countResult is what one "N up at once" measurement found.
type countResult struct {
	n            int
	timings      []sandbox.StartTimings
	sLat, wLat   []time.Duration
	sDisk, wDisk int64
}

// Every percentile rests on at least this many starts: small counts are repeated.
const minSessionSamples, minWorktreeSamples = 20, 5

// measureSessions brings up N sessions at once for each count.
func (b *sandboxBench) measureSessions(snap *sandbox.Snapshot) ([]*countResult, error) {
	var res []*countResult
	for _, n := range b.counts {
		r, err := b.bringUpSessionsRounds(snap, n)
		if err != nil {
			return nil, err
		}
		res = append(res, r)
	}
	return res, nil
}

// settle lets the host finish tearing the last round down (the kernel frees network
// namespaces and cgroups asynchronously) and the pool refill, so each round starts
// from a quiet host the way a user's next launch would.
func (b *sandboxBench) settle() {
	deadline := time.Now().Add(3 * time.Second)
	for b.pool != nil && b.pool.Spares() < b.poolSize && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
}

// bringUpSessionsRounds repeats bringing up n sessions until there are enough samples.
func (b *sandboxBench) bringUpSessionsRounds(snap *sandbox.Snapshot, n int) (*countResult, error) {
	r := &countResult{n: n}
	rounds := (minSessionSamples + n - 1) / n
	for i := 0; i < rounds; i++ {
		lat, tim, disk, err := b.bringUpSessions(snap, n)
		if err != nil {
			return nil, err
		}
		r.sLat, r.sDisk, r.timings = append(r.sLat, lat...), r.sDisk+disk, append(r.timings, tim...)
		b.settle()
	}
	r.sDisk /= int64(rounds)
	return r, nil
}

// measureWorktrees adds N worktrees for each count up to wtMax. It runs after the
// session measurements, and removes its worktrees only at the end, so deleting
// gigabytes of checkouts never slows what is measured next.
func (b *sandboxBench) measureWorktrees(res []*countResult) error {
	defer func() {
		os.RemoveAll(filepath.Join(b.scratch, "wt"))
		b.repo.Git("worktree", "prune")
	}()
	for _, r := range res {
		if r.n > b.wtMax {
			continue
		}
		rounds := (minWorktreeSamples + r.n - 1) / r.n
		for i := 0; i < rounds; i++ {
			lat, disk, err := b.addWorktrees(r.n)
			if err != nil {
				return err
			}
			r.wLat, r.wDisk = append(r.wLat, lat...), r.wDisk+disk
		}
		r.wDisk /= int64(rounds)
	}
	return nil
}

// printCounts prints sessions and worktrees side by side, and records the goals.
func (b *sandboxBench) printCounts(res []*countResult) {
	tw := tabwriter.NewWriter(b.out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "up at once\tstarts\tsession p50\tp95\tdisk/session\tadds\tworktree p50\tp95\tdisk/worktree\tready ratio\tdisk ratio\t")
	for _, r := range res {
		sp50 := pct(r.sLat, 50)
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t", r.n, len(r.sLat), ms(sp50), ms(pct(r.sLat, 95)), policies.FormatSize(r.sDisk))
		if len(r.wLat) > 0 {
			ratio := float64(pct(r.wLat, 50)) / float64(sp50)
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.0f×\t%.0f×\t\n", len(r.wLat), ms(pct(r.wLat, 50)), ms(pct(r.wLat, 95)),
				policies.FormatSize(r.wDisk), ratio, float64(r.wDisk)/float64(max(r.sDisk, 1)))
			b.goals = append(b.goals, goal{fmt.Sprintf("ready session ≥100× faster than worktree (n=%d)", r.n), ratio >= 100, fmt.Sprintf("%.0f×", ratio)})
		} else {
			fmt.Fprintf(tw, "-\t-\t-\t-\t-\t-\t\n")
		}
		b.goals = append(b.goals,
			goal{fmt.Sprintf("ready session p50 ≤ 20 ms (n=%d)", r.n), sp50 <= 20*time.Millisecond, ms(sp50)},
			goal{fmt.Sprintf("idle session ≤ 1 MiB of disk (n=%d)", r.n), r.sDisk <= 1<<20, policies.FormatSize(r.sDisk)})
		if r.n >= 100 {
			b.goals = append(b.goals, goal{fmt.Sprintf("%d sessions up at once", r.n), true, "all running"})
		}
	}
	tw.Flush()
	for _, r := range res {
		fmt.Fprintf(b.out, "  n=%d: %s\n", r.n, breakdown(r.timings))
	}
	fmt.Fprintln(b.out)
}

// breakdown prints the median of each start phase, and how many starts were warm.
func breakdown(ts []sandbox.StartTimings) string {
	var setup, spawn, prep, root, agent, handoff []time.Duration
	warm := 0
	for _, t := range ts {
		if t.Warm {
			warm++
		} else {
			spawn = append(spawn, t.Spawn)
		}
		setup, prep, root = append(setup, t.Setup), append(prep, t.Prepare), append(root, t.Root)
		agent, handoff = append(agent, t.Agent), append(handoff, t.Handoff)
	}
	return fmt.Sprintf("median phases: setup %s, spawn %s (cold starts), prepare %s, handoff %s, root %s, agent exec %s; %d/%d from a spare",
		ms(pct(setup, 50)), ms(pct(spawn, 50)), ms(pct(prep, 50)), ms(pct(handoff, 50)), ms(pct(root, 50)), ms(pct(agent, 50)), warm, len(ts))
}

// bringUpSessions starts n idle agents, all up at once, and returns each one's time
// to ready (agent exec'd) and the mean disk a session costs; then tears them down.
func (b *sandboxBench) bringUpSessions(snap *sandbox.Snapshot, n int) ([]time.Duration, []sandbox.StartTimings, int64, error) {
	var sessions []*sandbox.Session
	defer func() {
		for _, s := range sessions {
			s.Destroy(false)
		}
	}()
	lat := make([]time.Duration, 0, n)
	var tim []sandbox.StartTimings
	for i := 0; i < n; i++ {
		b.seq++
		t0 := time.Now()
		s, err := sandbox.StartSession(sandbox.SessionConfig{
			ID: fmt.Sprintf("bench-%d-%d", os.Getpid(), b.seq), Repo: b.repo, Snapshot: snap,
			Command: []string{"sleep", "3600"}, RingSize: 4 << 10, Pool: b.pool,
		})
		if err != nil {
			return nil, nil, 0, fmt.Errorf("session %d of %d: %w", i+1, n, err)
		}
		lat = append(lat, time.Since(t0))
		tim = append(tim, s.Timings())
		sessions = append(sessions, s)
	}
	for _, s := range sessions {
		if !s.Running() {
			return nil, nil, 0, fmt.Errorf("session %s exited while %d were up", s.ID(), n)
		}
	}
	var disk int64
	for _, s := range sessions {
		disk += diskUsage(s.Dir())
	}
	b.logf("%d sessions up at once", n)
	return lat, tim, disk / int64(n), nil
}

// addWorktrees is what a user does without corral: one `git worktree add` per agent.
func (b *sandboxBench) addWorktrees(n int) ([]time.Duration, int64, error) {
	b.seq++
	dir := filepath.Join(b.scratch, "wt", strconv.Itoa(b.seq))
	lat := make([]time.Duration, 0, n)
	var disk int64
	for i := 0; i < n; i++ {
		path := filepath.Join(dir, strconv.Itoa(i))
		t0 := time.Now()
		if out, err := exec.Command("git", "-C", b.repo.WorkTree, "worktree", "add", "-q", "--detach", path, "HEAD").CombinedOutput(); err != nil {
			return nil, 0, fmt.Errorf("git worktree add: %v: %s", err, out)
		}
		lat = append(lat, time.Since(t0))
		disk += diskUsage(path) + diskUsage(filepath.Join(b.repo.GitDir, "worktrees", filepath.Base(path)))
	}
	b.logf("%d worktrees added", n)
	return lat, disk / int64(n), nil
}

// capture compares reading a changeset from the private layer with a full tree diff.
func (b *sandboxBench) capture(snap *sandbox.Snapshot) error {
	b.seq++
	script := fmt.Sprintf(`git ls-files -- '*.go' | head -n %d | while read f; do echo "// corral bench" >> "$f"; done`, b.changed)
	s, err := sandbox.StartSession(sandbox.SessionConfig{
		ID: fmt.Sprintf("bench-%d-%d", os.Getpid(), b.seq), Repo: b.repo, Snapshot: snap,
		Command: []string{"/bin/sh", "-c", script},
	})
	if err != nil {
		return err
	}
	defer s.Destroy(false)
	if st := s.Wait(); st.Code != 0 {
		return fmt.Errorf("capture agent exited %d", st.Code)
	}
	capLat, cs, err := timeN(5, func() (sandbox.Changeset, error) { return s.Capture() })
	if err != nil {
		return err
	}
	base, err := mountView(filepath.Join(b.scratch, "base"), snap.Layers)
	if err != nil {
		return err
	}
	defer unix.Unmount(base, unix.MNT_DETACH)
	merged, err := mountView(filepath.Join(b.scratch, "merged"), append([]string{s.Upper()}, snap.Layers...))
	if err != nil {
		return err
	}
	defer unix.Unmount(merged, unix.MNT_DETACH)
	fullLat, full, err := timeN(3, func() (sandbox.Changeset, error) { return sandbox.DiffTrees(base, merged, nil) })
	if err != nil {
		return err
	}
	if len(cs) != len(full) {
		return fmt.Errorf("capture found %d changes, the full diff %d", len(cs), len(full))
	}
	ratio := float64(fullLat) / float64(capLat)
	fmt.Fprintf(b.out, "capture of %d changed files: from the private layer %s, full tree diff %s (%.0f× faster)\n\n",
		len(cs), ms(capLat), ms(fullLat), ratio)
	b.goals = append(b.goals, goal{fmt.Sprintf("capture %d files faster than a full tree diff", len(cs)), ratio > 1, fmt.Sprintf("%.0f×", ratio)})
	return nil
}

// snapshots compares deriving a snapshot for a revision that changes a few files from
// the previous one with building it fresh.
func (b *sandboxBench) snapshots(snaps *sandbox.Snapshots) error {
	// Commit a small change in a scratch clone-free way: plumbing onto a new ref.
	script := fmt.Sprintf(`set -e
tmpidx=$(mktemp); export GIT_INDEX_FILE=$tmpidx
git read-tree HEAD
for f in $(git ls-files -- '*.go' | head -n %d); do
  h=$( (git cat-file blob HEAD:"$f"; echo "// snap") | git hash-object -w --stdin)
  git update-index --cacheinfo 100644,$h,"$f"
done
t=$(git write-tree); rm -f $tmpidx
GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=b@corral GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=b@corral git commit-tree $t -p HEAD -m bench`, b.snapChanged)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = b.repo.WorkTree
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("make a %d-file revision: %w", b.snapChanged, err)
	}
	next := strings.TrimSpace(string(out))
	t0 := time.Now()
	derived, err := snaps.Ensure(next)
	if err != nil {
		return err
	}
	dLat := time.Since(t0)
	freshStore, err := sandbox.OpenSnapshots(b.repo)
	if err != nil {
		return err
	}
	t0 = time.Now()
	fresh, err := freshStore.BuildFresh(next)
	if err != nil {
		return err
	}
	fLat := time.Since(t0)
	defer freshStore.RemoveFresh(fresh)
	ratio := float64(fLat) / float64(dLat)
	fmt.Fprintf(b.out, "snapshot of a revision changing %d files: derived %s (%d layers), fresh %s (%.0f× faster)\n\n",
		b.snapChanged, ms(dLat), len(derived.Layers), ms(fLat), ratio)
	b.goals = append(b.goals, goal{fmt.Sprintf("%d-file snapshot ≥10× faster than fresh", b.snapChanged), ratio >= 10, fmt.Sprintf("%.0f×", ratio)})
	return nil
}

func timeN(n int, f func() (sandbox.Changeset, error)) (time.Duration, sandbox.Changeset, error) {
	var lat []time.Duration
	var cs sandbox.Changeset
	for i := 0; i < n; i++ {
		t0 := time.Now()
		var err error
		if cs, err = f(); err != nil {
			return 0, nil, err
		}
		lat = append(lat, time.Since(t0))
	}
	return pct(lat, 50), cs, nil
}

// makeGoSrcRepo commits a copy of the Go source tree that ships with the toolchain.
func makeGoSrcRepo(dir string) (string, error) {
	goroot := strings.TrimSpace(runOut("go", "env", "GOROOT"))
	if goroot == "" {
		return "", fmt.Errorf("go env GOROOT: no Go toolchain on PATH")
	}
	script := `set -e
mkdir -p "$1" && cp -r "$2/src/." "$1/" && cd "$1"
git init -q -b main
git -c core.autocrlf=false add -A
GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=b@corral GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=b@corral git commit -q -m "go src"`
	if out, err := exec.Command("/bin/sh", "-c", script, "sh", dir, goroot).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build bench repo: %v: %s", err, out)
	}
	return dir, nil
}

// defaultScratch puts the bench where a user keeps work (the user's cache dir), not in
// /tmp, which on some hosts is a busier or differently backed filesystem.
func defaultScratch() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "corral-bench")
	}
	return os.TempDir()
}

func runOut(name string, args ...string) string {
	out, _ := exec.Command(name, args...).Output()
	return string(out)
}

// mountView mounts a read-only overlay of layers at dir. Without an upper dir overlayfs
// wants at least two lower dirs; an empty bottom layer changes nothing.
func mountView(dir string, layers []string) (string, error) {
	empty := dir + ".empty"
	for _, d := range []string{dir, empty} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	layers = append(append([]string(nil), layers...), empty)
	if err := unix.Mount("overlay", dir, "overlay", unix.MS_RDONLY, "lowerdir="+strings.Join(layers, ":")); err != nil {
		return "", fmt.Errorf("mount view %s: %w", dir, err)
	}
	return dir, nil
}

// diskUsage is the disk a tree occupies (allocated blocks, each inode once).
func diskUsage(root string) int64 {
	seen := map[uint64]bool{}
	var total int64
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) != nil || seen[st.Ino] {
			return nil
		}
		seen[st.Ino] = true
		total += st.Blocks * 512
		return nil
	})
	return total
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func hostLine() string {
	var u unix.Utsname
	unix.Uname(&u)
	return fmt.Sprintf("kernel %s, %d CPUs, cgroups %s", unix.ByteSliceToString(u.Release[:]), numCPU(), sandbox.DetectCgroupMode())
}

func numCPU() int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) == nil {
		return set.Count()
	}
	return 1
}
