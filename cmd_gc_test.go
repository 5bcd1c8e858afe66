package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/sandbox"
	"corral/store"
	"corral/supervisor"
)

// fakeRun writes a fleet database at path whose sessions have recordings of size
// bytes each, and dates the database (its last use) age ago.
func fakeRun(t *testing.T, repo sandbox.Repo, path string, created time.Time, age time.Duration, size int, states ...supervisor.SessionState) []string {
	t.Helper()
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f := supervisor.Fleet{Name: "f", Created: created}
	var recs []string
	_, err = db.Update(func(tx supervisor.Tx) error {
		if err := tx.PutFleet(f); err != nil {
			return err
		}
		if err := tx.PutTask(supervisor.Task{ID: "a", Created: created}); err != nil {
			return err
		}
		for i, st := range states {
			id := "a-" + string(rune('1'+i))
			rec := supervisor.RecordingPath(repo, f, id)
			os.MkdirAll(filepath.Dir(rec), 0o700)
			if err := os.WriteFile(rec, []byte(strings.Repeat("x", size)), 0o600); err != nil {
				return err
			}
			recs = append(recs, rec)
			if err := tx.PutSession(supervisor.Session{ID: id, Task: "a", State: st, Recording: rec, Started: created}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	old := time.Now().Add(-age)
	os.Chtimes(path, old, old)
	return recs
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestGCRetention: old set-aside runs lose their recordings, and so do runs over the
// size limit (oldest first) and recordings no run refers to; the current run and any
// run with a live session keep theirs, and --dry-run removes nothing.
func TestGCRetention(t *testing.T) {
	dir := gitRepo(t, map[string]string{"a.txt": "a\n"})
	repo, err := sandbox.OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	fleets := filepath.Join(repo.StateDir, "fleets")
	os.MkdirAll(fleets, 0o700)
	day := 24 * time.Hour
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	current := fakeRun(t, repo, filepath.Join(fleets, "f.db"), base.Add(5*day), 40*day, 1000, supervisor.SessionPublished)
	old := fakeRun(t, repo, filepath.Join(fleets, "f.db.20260101-000000"), base, 40*day, 1000, supervisor.SessionPublished, supervisor.SessionFailed)
	liveRun := fakeRun(t, repo, filepath.Join(fleets, "f.db.20260102-000000"), base.Add(day), 40*day, 1000, supervisor.SessionRunning)
	recent := fakeRun(t, repo, filepath.Join(fleets, "f.db.20260103-000000"), base.Add(2*day), day, 3000, supervisor.SessionPublished)
	newest := fakeRun(t, repo, filepath.Join(fleets, "f.db.20260104-000000"), base.Add(3*day), time.Hour, 3000, supervisor.SessionPublished)
	orphan := filepath.Join(repo.StateDir, "rec", "gone-run", "x-1.cast")
	os.MkdirAll(filepath.Dir(orphan), 0o700)
	os.WriteFile(orphan, []byte("orphan"), 0o600)
	past := time.Now().Add(-2 * time.Hour)
	os.Chtimes(orphan, past, past)
	fresh := filepath.Join(repo.StateDir, "rec", "gone-run", "starting-1.cast") // a session starting now
	os.WriteFile(fresh, []byte("new"), 0o600)

	code, out, errOut := runMain("gc", "--repo", dir, "--max-size", "4000", "--dry-run")
	if code != 0 || !strings.Contains(out, "would free") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	for _, p := range append(append(old, recent...), orphan) {
		if !exists(p) {
			t.Fatalf("--dry-run removed %s", p)
		}
	}
	code, out, errOut = runMain("gc", "--repo", dir, "--max-size", "4000")
	if code != 0 {
		t.Fatalf("gc: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("gc said:\n%s", out)
	gone := append(append(append([]string{}, old...), recent...), orphan)
	for _, p := range gone {
		if exists(p) {
			t.Errorf("%s should be gone", p)
		}
	}
	for _, p := range append(append(append(append([]string{}, current...), liveRun...), newest...), fresh) {
		if !exists(p) {
			t.Errorf("%s should be kept", p)
		}
	}
	// 2 × 1000 (too old) + 3000 (over 4000 beside the newest's 3000) + 6 (orphan).
	if !strings.Contains(out, "freed 4.9K") && !strings.Contains(out, "freed 5006") {
		t.Errorf("gc did not say what it freed, or the sum is wrong:\n%s", out)
	}
	if !strings.Contains(out, "older than") || !strings.Contains(out, "over the fleet's") || !strings.Contains(out, "no run refers") {
		t.Errorf("gc did not say why:\n%s", out)
	}
}

// TestHelpStopsTheCommand: -h prints the flags and stops, rather than running the
// command with its defaults (gc on the current directory's repository).
func TestHelpStopsTheCommand(t *testing.T) {
	for _, cmd := range []string{"gc", "replay", "report", "export", "status"} {
		code, out, errOut := runMain(cmd, "--help")
		if code != 0 || out != "" || !strings.Contains(errOut, "Usage of corral "+cmd) || strings.Contains("\n"+errOut, "\ncorral "+cmd+":") {
			t.Errorf("%s --help: exit %d, stdout %q, stderr %q", cmd, code, out, errOut)
		}
	}
}
