package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/supervisor"
)

// The example lane plan runs headless to the end: two's publish breaks the suite, the
// lane names it, a repair task lands a fix, and every task ends done (exit 0); the
// events and `corral status` tell the story.
func TestRunLanePlanHeadless(t *testing.T) {
	requireRoot(t)
	files := map[string]string{"lib/base.txt": "1\n", "soft/a.txt": "1\n"}
	for src, dst := range map[string]string{"testdata/agents/lane.sh": "agents/lane.sh", "testdata/lane/test.sh": "test.sh",
		"testdata/plans/lane.toml": "plan.toml"} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		files[dst] = string(data)
	}
	dir := gitRepo(t, files)
	evPath := filepath.Join(t.TempDir(), "events.jsonl")
	code, _, errOut := runMain("run", filepath.Join(dir, "plan.toml"), "--headless", "--events", evPath)
	if code != exitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, errOut)
	}
	if !strings.Contains(errOut, " green\n") {
		t.Errorf("the run's summary does not say the head is green:\n%s", errOut)
	}
	kinds := map[string][]string{}
	for _, e := range readEvents(t, evPath) {
		kinds[e.Kind] = append(kinds[e.Kind], e.Task)
	}
	if got := kinds["lane.culprit"]; len(got) != 1 || got[0] != "two" {
		t.Errorf("lane.culprit for %v, want two", got)
	}
	if got := kinds["lane.repair"]; len(got) != 1 || !strings.HasPrefix(got[0], "fix-two-") {
		t.Errorf("lane.repair %v, want one repair of two", got)
	}
	if len(kinds["lane.reopened"]) != 1 || len(kinds["lane.green"]) == 0 {
		t.Errorf("lane events %v, want green heads and admission reopened once", kinds)
	}
	code, out, errOut := runMain("status", "--repo", dir)
	if code != exitOK || !strings.Contains(out, `lane: "sh test.sh", post gating, on red repair; head`) || !strings.Contains(out, " green") {
		t.Errorf("status exit %d:\n%s%s", code, out, errOut)
	}
	// `publish show` tells the lane's verdict on a publish, with the failing output.
	_, out, _ = runMain("publish", "ls", "--json", "--repo", dir)
	var pubs []supervisor.Publish
	json.Unmarshal([]byte(out), &pubs)
	var two int64
	for _, p := range pubs {
		if p.Task == "two" {
			two = p.ID
		}
	}
	code, out, errOut = runMain("publish", "show", fmt.Sprint(two), "--repo", dir)
	for _, want := range []string{"lane: red at ", "the lane blamed this publish", "FAIL: lib/two.txt is 9"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("publish show %d (exit %d) lacks %q:\n%s%s", two, code, want, out, errOut)
		}
	}
}

// A publish's lane test can be watched from the TUI: while it runs, its output comes
// live from the test's sandbox; once it has ended, from its recording.
func TestTUIShowsAPublishesLaneTest(t *testing.T) {
	requireRoot(t)
	_, plan := fleetRepo(t, `
[fleet]
repo = "."
base = "main"
test = "echo lane-says-hello; sleep 1"

[[task]]
id = "alpha"
agent = "sh agents/edit.sh"
`)
	fl, err := openFleet(plan, false, false)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	b := &tuiBackend{fl: fl}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := fl.sv.RunUntilDone(ctx); done <- err }()
	laneOutput := func() (session string, live bool, out string) {
		snap, err := b.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range snap.Publishes {
			if p.Task == "alpha" && p.LaneSession != "" {
				o, ok := b.Output(p.LaneSession)
				if !ok {
					return p.LaneSession, false, ""
				}
				data, _ := o.Since(0)
				return p.LaneSession, o.Changed() != nil, string(data)
			}
		}
		return "", false, ""
	}
	sawLive := false
	for !sawLive {
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) before the lane test was seen live", err)
		case <-time.After(20 * time.Millisecond):
		}
		_, live, out := laneOutput()
		sawLive = live && strings.Contains(out, "lane-says-hello")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	id, live, out := laneOutput()
	if live || !strings.Contains(out, "lane-says-hello") {
		t.Errorf("after the run, lane test %s: live %v, output %q; want its recording", id, live, out)
	}
}
