package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"corral/policies"
	"corral/sandbox"
	"corral/store"
	"corral/supervisor"
)

// Retention defaults: a fleet's set-aside runs keep their recordings for 30 days,
// and at most 2 GiB of them; the oldest runs' go first. The current run of a fleet
// (the one a supervisor may be running) is never touched.
const (
	defaultRecMaxAge  = 30 * 24 * time.Hour
	defaultRecMaxSize = 2 << 30
)

// retention is what `corral gc` keeps.
type retention struct {
	maxAge         time.Duration
	maxSize        int64 // per fleet, bytes of set-aside runs' recordings
	keep           int   // unused snapshots kept anyway (the most recent)
	dryRun         bool
	recordingsOnly bool // leave snapshots alone
}

// defaultRetention is what `corral run --fresh` applies when it sets a run aside, so
// recordings stay bounded without anyone running gc.
var defaultRetention = retention{maxAge: defaultRecMaxAge, maxSize: defaultRecMaxSize, recordingsOnly: true}

// runGC is `corral gc`: old runs' recordings beyond the retention limits, recordings
// no run refers to, and snapshots no session stands on.
func runGC(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("gc", stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	maxAge := fs.Duration("max-age", defaultRecMaxAge, "remove set-aside runs' recordings older than this")
	maxSize := fs.String("max-size", "2GiB", "keep at most this much of a fleet's set-aside runs' recordings")
	keep := fs.Int("keep-snapshots", 2, "keep this many most recent snapshots even if unused")
	dry := fs.Bool("dry-run", false, "say what would go, remove nothing")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	size, err := policies.ParseSize(*maxSize)
	if err != nil {
		return badInput("--max-size %q: %v", *maxSize, err)
	}
	repo, err := sandbox.OpenRepo(*repoDir)
	if err != nil {
		return badInput("--repo: %v", err)
	}
	res, err := collectGarbage(repo, retention{maxAge: *maxAge, maxSize: size, keep: *keep, dryRun: *dry}, time.Now())
	verb := "freed"
	if *dry {
		verb = "would free"
	}
	for _, l := range res.lines {
		fmt.Fprintln(stdout, l)
	}
	fmt.Fprintf(stdout, "%s %s: %d recording(s) of %d run(s) (%s), %d snapshot(s) (%s)\n", verb,
		policies.FormatSize(res.recBytes+res.snapBytes), res.recs, res.runs, policies.FormatSize(res.recBytes),
		res.snaps, policies.FormatSize(res.snapBytes))
	return err
}

type gcResult struct {
	lines               []string
	recs, runs, snaps   int
	recBytes, snapBytes int64
}

// runRecordings is one run and the recording files its sessions name.
type runRecordings struct {
	ref   runRef
	files []string
	size  int64
	live  bool // some session of it is recorded live
}

// collectGarbage applies the retention limits. Only set-aside runs lose recordings:
// a fleet's current run may have a supervisor writing to it, and a session the
// records call live is never touched in any run.
func collectGarbage(repo sandbox.Repo, ret retention, now time.Time) (gcResult, error) {
	var res gcResult
	referenced := map[string]bool{}
	byFleet := map[string][]*runRecordings{}
	for _, ref := range listRuns(repo) {
		db, err := store.OpenReadOnly(ref.Path)
		if err != nil {
			res.lines = append(res.lines, fmt.Sprintf("skip run %s: %v", ref.ID, err))
			continue
		}
		var sessions []supervisor.Session
		err = db.View(func(r supervisor.Reader) error {
			var err error
			sessions, err = r.Sessions()
			return err
		})
		db.Close()
		if err != nil {
			res.lines = append(res.lines, fmt.Sprintf("skip run %s: %v", ref.ID, err))
			continue
		}
		rr := &runRecordings{ref: ref}
		for _, s := range sessions {
			if s.Recording == "" {
				continue
			}
			referenced[s.Recording] = true
			rr.live = rr.live || s.State.Live()
			if fi, err := os.Stat(s.Recording); err == nil {
				rr.files = append(rr.files, s.Recording)
				rr.size += fi.Size()
			}
		}
		byFleet[ref.Fleet] = append(byFleet[ref.Fleet], rr)
	}
	remove := func(rr *runRecordings, why string) {
		res.lines = append(res.lines, fmt.Sprintf("run %s: %d recording(s), %s: %s", rr.ref.ID, len(rr.files), policies.FormatSize(rr.size), why))
		for _, f := range rr.files {
			if !ret.dryRun {
				if err := os.Remove(f); err != nil {
					res.lines = append(res.lines, fmt.Sprintf("  %s: %v", f, err))
					continue
				}
				os.Remove(filepath.Dir(f)) // the run's directory, once empty
			}
			res.recs++
		}
		res.recBytes += rr.size
		res.runs++
		rr.files, rr.size = nil, 0
	}
	for _, runs := range byFleet {
		sort.Slice(runs, func(i, j int) bool { return runs[i].ref.Mod.After(runs[j].ref.Mod) }) // newest first
		var kept int64
		for _, rr := range runs {
			if rr.ref.Current || rr.live || len(rr.files) == 0 {
				continue
			}
			switch {
			case now.Sub(rr.ref.Mod) > ret.maxAge:
				remove(rr, fmt.Sprintf("older than %s", ret.maxAge))
			case kept+rr.size > ret.maxSize:
				remove(rr, fmt.Sprintf("over the fleet's %s of recordings", policies.FormatSize(ret.maxSize)))
			default:
				kept += rr.size
			}
		}
	}
	// Recordings no run refers to (their database was deleted by hand), once they
	// have not been written to for an hour: a session starting now has its file before
	// its record commits.
	recRoot := filepath.Join(repo.StateDir, "rec")
	orphans := &runRecordings{ref: runRef{ID: "(none)"}}
	filepath.WalkDir(recRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".cast") || referenced[p] {
			return nil
		}
		if fi, err := d.Info(); err == nil && now.Sub(fi.ModTime()) > time.Hour {
			orphans.files = append(orphans.files, p)
			orphans.size += fi.Size()
		}
		return nil
	})
	if len(orphans.files) > 0 {
		remove(orphans, "no run refers to them")
		res.runs--
	}
	if ret.recordingsOnly {
		return res, nil
	}
	snaps, err := collectSnapshots(repo, ret, &res)
	res.snaps = snaps
	return res, err
}

// collectSnapshots removes snapshots no session directory stands on (a live or kept
// session's meta names its base), keeping the most recent few.
func collectSnapshots(repo sandbox.Repo, ret retention, res *gcResult) (int, error) {
	snapDir := filepath.Join(repo.StateDir, "s")
	if _, err := os.Stat(snapDir); err != nil {
		return 0, nil
	}
	snaps, err := sandbox.OpenSnapshots(repo)
	if err != nil {
		return 0, err
	}
	metas, err := sandbox.ListSessions(repo)
	if err != nil {
		return 0, err
	}
	used := map[string]bool{}
	for _, m := range metas {
		used[m.Commit] = true
	}
	if ret.dryRun {
		all, err := snaps.List()
		if err != nil {
			return 0, err
		}
		n := 0
		for i, s := range all {
			if i < len(all)-ret.keep && !used[s.Commit] {
				n++
			}
		}
		if n > 0 {
			res.lines = append(res.lines, fmt.Sprintf("%d unused snapshot(s) (size is measured when removed)", n))
		}
		return n, nil
	}
	before := dirSize(snapDir)
	removed, err := snaps.Collect(func(c string) bool { return used[c] }, ret.keep)
	res.snapBytes = max(before-dirSize(snapDir), 0)
	for _, c := range removed {
		res.lines = append(res.lines, fmt.Sprintf("snapshot %.12s: unused", c))
	}
	return len(removed), err
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
