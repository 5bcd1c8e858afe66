package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/store"
	"corral/supervisor"
)

// TestReplayCommandsOnAGeneratedRun drives the commands over a small generated run
// (no root needed): the seek measurement, one session's terminal, export, and the
// report in every format.
func TestReplayCommandsOnAGeneratedRun(t *testing.T) {
	dir := t.TempDir()
	repo, dbPath, err := synthRun(dir, synthSpec{sessions: 3, events: 300, length: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := measureSeeks(&out, repo, dbPath, 20); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"whole seek", "p99", "goal:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bench output lacks %q:\n%s", want, out.String())
		}
	}

	// One session's terminal from 100 s on: the screen then, and what followed.
	code, played, errOut := runMain("replay", "--repo", dir, "--session", "t01-1", "--speed", "64", "--at", "100s")
	if code != 0 {
		t.Fatalf("replay --session: exit %d: %s", code, errOut)
	}
	if !strings.Contains(played, "step 199") || !strings.Contains(played, "step 239") || strings.Contains(played, "step 240") {
		t.Errorf("replay --session from 100 s should show step 199 (on screen then) to 239 (the last):\n%.300q…", played)
	}
	if code, _, errOut := runMain("replay", "--repo", dir, "--session", "nope-1"); code != exitBadInput || !strings.Contains(errOut, "t00-1") {
		t.Errorf("unknown session: exit %d, %q", code, errOut)
	}

	// Export round-trips: the file is asciicast v2 and holds the recording's output.
	cast := filepath.Join(t.TempDir(), "t00-1.cast")
	if code, _, errOut := runMain("export", "--repo", dir, "t00-1", "-o", cast); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	data, _ := os.ReadFile(cast)
	if err := checkAsciicast(data); err != nil {
		t.Errorf("export: %v", err)
	}
	orig, _ := os.ReadFile(filepath.Join(repo.StateDir, "rec", "bench", "t00-1.cast"))
	if strings.Count(string(data), "\n") != strings.Count(string(orig), "\n") || !strings.Contains(string(data), `"title":"t00-1"`) {
		t.Errorf("export: %d lines (recording %d), header %.120s", strings.Count(string(data), "\n"), strings.Count(string(orig), "\n"), data)
	}

	// The report, as text (with its timeline), JSON, Markdown, side by side, and SVG.
	svg := filepath.Join(t.TempDir(), "t.svg")
	code, text, errOut := runMain("report", "--repo", dir, "--svg", svg)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"batch elapsed:", "human minutes:", "t02", "█ running", "cost:"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	if b, _ := os.ReadFile(svg); !strings.HasPrefix(string(b), "<svg") || !strings.Contains(string(b), "t02") {
		t.Errorf("svg: %.200s", b)
	}
	code, js, _ := runMain("report", "--repo", dir, "--json")
	var rep namedReport
	if code != 0 || json.Unmarshal([]byte(js), &rep) != nil || len(rep.Tasks) != 3 || rep.Fleet.Publishes == 0 {
		t.Errorf("report --json: exit %d, %d tasks: %.300s", code, len(rep.Tasks), js)
	}
	if code, md, _ := runMain("report", "--repo", dir, "--markdown"); code != 0 || !strings.Contains(md, "| figure | value |") {
		t.Errorf("report --markdown: exit %d:\n%.300s", code, md)
	}
	if code, vs, _ := runMain("report", "bench", "--repo", dir, "--vs", "bench"); code != 0 || !strings.Contains(vs, "per accepted: latency") {
		t.Errorf("report --vs: exit %d:\n%s", code, vs)
	}
	if code, _, errOut := runMain("report", "nope", "--repo", dir); code != exitBadInput || !strings.Contains(errOut, "bench") {
		t.Errorf("unknown run: exit %d: %s", code, errOut)
	}
	if code, runs, _ := runMain("report", "--runs", "--repo", dir); code != 0 || !strings.Contains(runs, "bench") {
		t.Errorf("report --runs: exit %d:\n%s", code, runs)
	}
}

// TestReplayFollowsARunningFleet: a replay at the end of a run that is still being
// written moves on with it, reading only; a cursor elsewhere stays where it is.
func TestReplayFollowsARunningFleet(t *testing.T) {
	dir := t.TempDir()
	repo, dbPath, err := synthRun(dir, synthSpec{sessions: 2, events: 40, length: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	_, ref, ro, h, err := loadRun(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	b := newReplayBackend(repo, ro, h)
	b.follow = ref.Current
	_, end := b.Bounds()
	b.Seek(end)
	w, err := store.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	later := end.Add(30 * time.Second)
	if _, err := w.Update(func(tx supervisor.Tx) error {
		tx.Emit(supervisor.Event{Time: later, Kind: supervisor.EvFleetFinished})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	b.mu.Lock()
	b.loadedAt = time.Time{} // due now
	b.mu.Unlock()
	if _, err := b.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, newEnd := b.Bounds(); !newEnd.Equal(later) || !b.Cursor().Equal(later) {
		t.Errorf("after the fleet moved on: end %s cursor %s, want both at %s", newEnd, b.Cursor(), later)
	}
}
