package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"corral/sandbox"
	"corral/store"
	"corral/supervisor"
)

// A run is one fleet database: the records and events of a fleet from the moment a
// plan first opened it until `corral run --fresh` set it aside and started another.
// Every `corral run`, `tui` or `demo` on the same fleet adds to its current run (an
// interrupted fleet resumes where it stopped); --fresh keeps the old run beside the
// new one as fleets/NAME.db.STAMP. Runs are named NAME (the current run of fleet
// NAME) and NAME@STAMP (a run set aside at STAMP).
type runRef struct {
	ID      string // NAME or NAME@STAMP
	Fleet   string
	Path    string // the database file
	Current bool   // the fleet's current run (a supervisor may be running it)
	Mod     time.Time
}

// listRuns returns the repository's runs, the most recently used first.
func listRuns(repo sandbox.Repo) []runRef {
	dir := filepath.Join(repo.StateDir, "fleets")
	entries, _ := os.ReadDir(dir)
	var runs []runRef
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasSuffix(name, "-wal") || strings.HasSuffix(name, "-shm") || strings.HasSuffix(name, "-journal") {
			continue
		}
		fleet, stamp, ok := strings.Cut(name, ".db")
		if !ok || (stamp != "" && !strings.HasPrefix(stamp, ".")) {
			continue
		}
		r := runRef{ID: fleet, Fleet: fleet, Path: filepath.Join(dir, name), Current: stamp == "", Mod: modTime(filepath.Join(dir, name))}
		if !r.Current {
			r.ID = fleet + "@" + stamp[1:]
		}
		// A running fleet's last commits may still be in its WAL. An empty WAL says
		// nothing: readers (replay, report, gc) leave one behind.
		if fi, err := os.Stat(r.Path + "-wal"); err == nil && fi.Size() > 0 && fi.ModTime().After(r.Mod) {
			r.Mod = fi.ModTime()
		}
		runs = append(runs, r)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Mod.After(runs[j].Mod) })
	return runs
}

// resolveRun finds a run by id, by database path, or (id "") the most recent.
func resolveRun(repoDir, id string) (sandbox.Repo, runRef, error) {
	repo, err := sandbox.OpenRepo(repoDir)
	if err != nil {
		return repo, runRef{}, badInput("--repo: %v", err)
	}
	runs := listRuns(repo)
	if id == "" {
		if len(runs) == 0 {
			return repo, runRef{}, badInput("no fleet has run in %s (corral run PLAN --headless starts one)", repo.WorkTree)
		}
		return repo, runs[0], nil
	}
	for _, r := range runs {
		if r.ID == id {
			return repo, r, nil
		}
	}
	if fi, err := os.Stat(id); err == nil && !fi.IsDir() {
		return repo, runRef{ID: id, Path: id, Mod: fi.ModTime()}, nil
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	return repo, runRef{}, badInput("run %q: no such run in %s (runs: %s)", id, repo.WorkTree, strings.Join(ids, ", "))
}

// loadRun opens a run read-only and reads its history.
func loadRun(repoDir, id string) (sandbox.Repo, runRef, *store.ReadOnly, *supervisor.History, error) {
	repo, ref, err := resolveRun(repoDir, id)
	if err != nil {
		return repo, ref, nil, nil, err
	}
	db, err := store.OpenReadOnly(ref.Path)
	if err != nil {
		return repo, ref, nil, nil, err
	}
	var h *supervisor.History
	if err := db.View(func(r supervisor.Reader) error {
		var err error
		h, err = supervisor.LoadHistory(r)
		return err
	}); err != nil {
		db.Close()
		return repo, ref, nil, nil, fmt.Errorf("run %s: %w", ref.ID, err)
	}
	return repo, ref, db, h, nil
}
