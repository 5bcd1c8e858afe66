package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
}
