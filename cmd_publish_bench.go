package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"corral/sandbox"
	"corral/supervisor"
)

// benchPublish measures landing a changeset on the shared head: corral's publish
// (plumbing against a temporary index, compare-and-swap) against the worktree way a
// user would otherwise take (commit in a worktree, then git merge, or git rebase and
// a fast-forward, in a worktree checked out on the head branch), side by side in one
// run, on the Go source tree and on a small repository to show how each scales.
func benchPublish(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench publish", stderr)
	repoDir := fs.String("repo", "", "benchmark on this repository (default: a fresh repo of $(go env GOROOT)/src)")
	files := fs.Int("files", 10, "files each changeset changes")
	runs := fs.Int("runs", 30, "serial publishes per way")
	scratch := fs.String("scratch", defaultScratch(), "directory for the bench repositories and worktrees")
	sizesFlag := fs.String("sizes", "1000,10000,30000", "repository sizes (files) for the scaling sweep; empty skips it")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var sizes []int
	for _, f := range strings.Split(*sizesFlag, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 100 {
			return badInput("bench publish: --sizes %q: want file counts of at least 100, comma-separated", *sizesFlag)
		}
		sizes = append(sizes, n)
	}
	if *files < 1 || *runs < 1 {
		return badInput("bench publish: --files and --runs must be positive")
	}
	dir, err := os.MkdirTemp(*scratch, "publish-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	big := *repoDir
	if big == "" {
		fmt.Fprintln(stderr, "building the Go source repository…")
		if big, err = makeGoSrcRepo(filepath.Join(dir, "gosrc")); err != nil {
			return err
		}
	}
	small, err := makeShapedRepo(filepath.Join(dir, "small"), 1000)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "corral bench publish — %d-file changesets, %d serial publishes per way, %s\n\n", *files, *runs, hostLine())
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "repo\tfiles\tcorral p50\tp95\tpublishes/s\tmerge p50\tmerge/s\trebase p50\trebase/s\tvs merge\tvs rebase\t")
	for _, repo := range []string{big, small} {
		r, err := publishBenchRepo(repo, dir, *files, *runs)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.1f\t%s\t%.1f\t%s\t%.1f\t%.1f×\t%.1f×\t\n", filepath.Base(repo), r.repoFiles,
			ms(pct(r.corral, 50)), ms(pct(r.corral, 95)), perSec(r.corral), ms(pct(r.merge, 50)), perSec(r.merge),
			ms(pct(r.rebase, 50)), perSec(r.rebase),
			float64(pct(r.merge, 50))/float64(pct(r.corral, 50)), float64(pct(r.rebase, 50))/float64(pct(r.corral, 50)))
	}
	tw.Flush()
	if len(sizes) > 0 {
		if err := publishSweep(stdout, stderr, dir, sizes, *files, *runs); err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout, "\nmerge: commit in a worktree, then git merge in a worktree on the head branch;")
	fmt.Fprintln(stdout, "rebase: commit in a worktree, git rebase onto the head, then a fast-forward. Worktree creation is not counted.")
	return nil
}

type publishBenchResult struct {
	repoFiles             int
	corral, merge, rebase []time.Duration
}

// publishBenchRepo times the three ways on one repository. Every changeset changes
// files no other one touches, from the same base, so every way lands every change
// and the head moves between publishes, as it does in a fleet.
func publishBenchRepo(repoDir, scratch string, nfiles, runs int) (publishBenchResult, error) {
	var res publishBenchResult
	repo, err := sandbox.OpenRepo(repoDir)
	if err != nil {
		return res, err
	}
	os.MkdirAll(repo.StateDir, 0o700)
	base, err := repo.ResolveRev("HEAD")
	if err != nil {
		return res, err
	}
	list, err := repo.Git("ls-files", "-z")
	if err != nil {
		return res, err
	}
	var candidates []string
	for _, p := range strings.Split(strings.TrimRight(list, "\x00"), "\x00") {
		if strings.HasSuffix(p, ".go") && !strings.ContainsAny(p, " \t\n") {
			candidates = append(candidates, p)
		}
	}
	res.repoFiles = strings.Count(list, "\x00")
	if len(candidates) < 3*nfiles*runs {
		return res, fmt.Errorf("bench publish: %s has %d .go files; need %d", repoDir, len(candidates), 3*nfiles*runs)
	}
	pick := func(way, run int) []string {
		i := (way*runs + run) * nfiles
		return candidates[i : i+nfiles]
	}
	// corral: a layer directory of changed files, published onto its own head branch.
	pub := &supervisor.GitPublisher{Repo: repo, HeadRef: "bench/corral"}
	if _, err := repo.Git("update-ref", "refs/heads/bench/corral", base); err != nil {
		return res, err
	}
	layer := filepath.Join(scratch, "layer-"+filepath.Base(repoDir))
	for run := 0; run < runs; run++ {
		var cs sandbox.Changeset
		for _, p := range pick(0, run) {
			src := filepath.Join(layer, fmt.Sprint(run), p)
			if err := editCopy(filepath.Join(repo.WorkTree, p), src); err != nil {
				return res, err
			}
			cs = append(cs, sandbox.Change{Path: p, Kind: sandbox.Modified, Mode: 0o644, OldMode: 0o644, Source: src})
		}
		req := supervisor.PublishRequest{Task: supervisor.Task{ID: "bench", Prompt: "bench"},
			Session: supervisor.Session{ID: fmt.Sprintf("bench-%d", run), Base: base}, Changes: cs}
		start := time.Now()
		r, err := pub.Publish(req)
		res.corral = append(res.corral, time.Since(start))
		if err != nil || r.Outcome != supervisor.OutcomeAccepted {
			return res, fmt.Errorf("bench publish: corral publish %d: %v %s %s", run, err, r.Outcome, r.Message)
		}
	}
	for way, name := range map[int]string{1: "merge", 2: "rebase"} {
		lat, err := worktreeWay(repo, scratch, base, name, runs, func(run int) []string { return pick(way, run) })
		if err != nil {
			return res, err
		}
		if name == "merge" {
			res.merge = lat
		} else {
			res.rebase = lat
		}
	}
	return res, nil
}

// worktreeWay lands each change the way a user without corral would: an agent
// worktree at base (made before the clock starts), commit there, then merge or
// rebase onto the head branch checked out in its own worktree.
func worktreeWay(repo sandbox.Repo, scratch, base, way string, runs int, files func(int) []string) ([]time.Duration, error) {
	headWT := filepath.Join(scratch, "head-"+way+"-"+filepath.Base(repo.WorkTree))
	branch := "bench/" + way
	if _, err := repo.Git("worktree", "add", "-q", "-B", branch, headWT, base); err != nil {
		return nil, err
	}
	defer repo.Git("worktree", "remove", "--force", headWT)
	var lat []time.Duration
	for run := 0; run < runs; run++ {
		wt := filepath.Join(scratch, fmt.Sprintf("agent-%s-%d", way, run))
		if _, err := repo.Git("worktree", "add", "-q", "--detach", wt, base); err != nil {
			return nil, err
		}
		for _, p := range files(run) {
			if err := editCopy(filepath.Join(wt, p), filepath.Join(wt, p)); err != nil {
				return nil, err
			}
		}
		start := time.Now()
		if err := benchGit(wt, "commit", "-q", "-a", "-m", "agent change"); err != nil {
			return nil, err
		}
		var err error
		if way == "rebase" {
			if err := benchGit(wt, "rebase", "-q", branch); err != nil {
				return nil, err
			}
			err = benchGit(headWT, "merge", "-q", "--ff-only", revOf(wt))
		} else {
			err = benchGit(headWT, "merge", "-q", "--no-edit", "--no-ff", revOf(wt))
		}
		if err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
		repo.Git("worktree", "remove", "--force", wt)
	}
	return lat, nil
}

func benchGit(dir string, args ...string) error {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=b@corral", "GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=b@corral")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bench publish: git %v in %s: %v: %s", args, dir, err, out)
	}
	return nil
}

// revOf reads a worktree's HEAD commit.
func revOf(wt string) string {
	out, _ := exec.Command("git", "-C", wt, "rev-parse", "HEAD").Output()
	return strings.TrimSpace(string(out))
}

// editCopy writes src's content plus one line to dst, as an agent's edit would.
func editCopy(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, append(data, []byte("\n// edited by the bench\n")...), fs.FileMode(0o644))
}

func perSec(d []time.Duration) float64 {
	var total time.Duration
	for _, x := range d {
		total += x
	}
	if total == 0 {
		return 0
	}
	return float64(len(d)) / total.Seconds()
}

// publishSweep lands the same changesets — same files, same directories — in
// repositories that differ only in how many other files they hold, so what grows with
// the repository shows: corral's publish touches the trees on the changed paths, the
// worktree way's commit and merge walk the whole index.
func publishSweep(stdout, stderr io.Writer, dir string, sizes []int, files, runs int) error {
	fmt.Fprintf(stdout, "\nscaling: the same %d-file changesets in repositories of growing size\n", files)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "files\tcorral p50\tmerge p50\trebase p50\tvs merge\tvs rebase\t")
	var first, last publishBenchResult
	for i, n := range sizes {
		fmt.Fprintf(stderr, "building a %d-file repository…\n", n)
		repo, err := makeShapedRepo(filepath.Join(dir, fmt.Sprintf("sweep-%d", n)), n)
		if err != nil {
			return err
		}
		r, err := publishBenchRepo(repo, dir, files, runs)
		if err != nil {
			return err
		}
		if i == 0 {
			first = r
		}
		last = r
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.1f×\t%.1f×\t\n", r.repoFiles, ms(pct(r.corral, 50)), ms(pct(r.merge, 50)),
			ms(pct(r.rebase, 50)), float64(pct(r.merge, 50))/float64(pct(r.corral, 50)),
			float64(pct(r.rebase, 50))/float64(pct(r.corral, 50)))
		os.RemoveAll(repo)
	}
	tw.Flush()
	if len(sizes) > 1 {
		grow := func(a, b []time.Duration) float64 { return float64(pct(b, 50)) / float64(pct(a, 50)) }
		fmt.Fprintf(stdout, "from %d to %d files: corral p50 ×%.2f, merge ×%.2f, rebase ×%.2f\n", first.repoFiles, last.repoFiles,
			grow(first.corral, last.corral), grow(first.merge, last.merge), grow(first.rebase, last.rebase))
	}
	return nil
}

// makeShapedRepo makes a repository of n small Go files, 50 to a package directory and
// 50 packages to a group (g0/pkg0/f0.go …): the first files — the ones the bench
// changes — sit in the same directories whatever n is.
func makeShapedRepo(dir string, n int) (string, error) {
	for i := 0; i < n; i++ {
		pkg := (i / 50) % 50
		p := filepath.Join(dir, fmt.Sprintf("g%d", i/2500), fmt.Sprintf("pkg%d", pkg), fmt.Sprintf("f%d.go", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(fmt.Sprintf("package pkg%d\n\nconst F%d = %d\n", pkg, i, i)), 0o644); err != nil {
			return "", err
		}
	}
	script := `set -e; cd "$1"; git init -q -b main; git add -A
GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=b@corral GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=b@corral git commit -q -m shaped`
	if out, err := exec.Command("/bin/sh", "-c", script, "sh", dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build bench repo: %v: %s", err, out)
	}
	return dir, nil
}
