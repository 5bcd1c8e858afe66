package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestPublishEscalationFromTheCLI: a headless run leaves an escalated publish; the
// CLI lists it, shows its held diff, records an approval, and refuses a second
// decision on it.
func TestPublishEscalationFromTheCLI(t *testing.T) {
	requireRoot(t)
	agent, _ := os.ReadFile("testdata/publish/lockfile.sh")
	dir := gitRepo(t, map[string]string{"go.sum": "example.com/a v1.0.0\nexample.com/m v1.0.0\nexample.com/z v1.0.0\n",
		"agents/lockfile.sh": string(agent)})
	plan := filepath.Join(dir, "plan.toml")
	os.WriteFile(plan, []byte(`
[fleet]
repo = "."
base = "main"
launch_interval = "50ms"
max_running = 2

[[task]]
id = "bump-a"
prompt = "bump a"
agent = "DEP=example.com/a VERSION=v1.1.0 AGENT_SLEEP=1 sh agents/lockfile.sh"

[[task]]
id = "bump-z"
prompt = "bump z"
agent = "DEP=example.com/z VERSION=v2.0.0 AGENT_SLEEP=2.5 sh agents/lockfile.sh"
`), 0o644)
	runMain("run", plan, "--headless")
	code, out, errOut := runMain("publish", "ls", "--repo", dir)
	if code != exitOK || !strings.Contains(out, "escalated") {
		t.Fatalf("publish ls: exit %d\n%s%s", code, out, errOut)
	}
	id := regexp.MustCompile(`(?m)^(\d+)\s+bump-z\s+\S+\s+escalated`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no escalated publish of bump-z in:\n%s", out)
	}
	code, out, _ = runMain("publish", "show", id[1], "--repo", dir)
	if code != exitOK || !strings.Contains(out, "+example.com/z v2.0.0") || !strings.Contains(out, "corral approve "+id[1]) {
		t.Errorf("publish show: exit %d\n%s", code, out)
	}
	if code, out, errOut = runMain("approve", id[1], "--repo", dir); code != exitOK || !strings.Contains(out, "recorded") {
		t.Errorf("approve: exit %d %s%s", code, out, errOut)
	}
	if code, _, errOut = runMain("deny", id[1], "--why", "too late", "--repo", dir); code != exitBadInput || !strings.Contains(errOut, "already decided") {
		t.Errorf("second decision: exit %d %s", code, errOut)
	}
}

// TestBenchPublishRuns is a smoke test of `corral bench publish` on small repositories
// (the figures themselves come from a real run on the Go source tree).
func TestBenchPublishRuns(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < 30; i++ {
		files[filepath.Join("p", "f"+strconv.Itoa(i)+".go")] = "package p\n"
	}
	repo := gitRepo(t, files)
	code, out, errOut := runMain("bench", "publish", "--repo", repo, "--runs", "2", "--files", "3", "--scratch", t.TempDir())
	if code != exitOK || !strings.Contains(out, "vs merge") || !strings.Contains(out, "×") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}
