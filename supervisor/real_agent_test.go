package supervisor_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/supervisor"
)

// piBinDir finds the pi coding agent installed from npm (.ci/run installs it under
// ~/.cache/corral-agents; CORRAL_AGENTS_DIR points elsewhere).
func piBinDir(t *testing.T) string {
	dir := os.Getenv("CORRAL_AGENTS_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "corral-agents")
	}
	bin := filepath.Join(dir, "node_modules", ".bin")
	if _, err := os.Stat(filepath.Join(bin, "pi")); err != nil {
		msg := "pi is not installed (npm install --prefix ~/.cache/corral-agents @mariozechner/pi-coding-agent; .ci/run does)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("no node on PATH for pi")
	}
	return bin
}

// A real coding agent from npm runs in a corral session against a scripted upstream
// through the gateway: it asks its model, is told to edit README.md, edits it with
// its own edit tool, and its changeset publishes to the head. Both of its calls are
// metered.
func TestRealAgentThroughGateway(t *testing.T) {
	f := newGatewayFixture(t)
	bin := piBinDir(t)
	// Sessions take their PATH from the supervisor's; a PATH dir under HOME is bound
	// read-only into the sandbox (its top directory, so node_modules comes along).
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	f.up.ToolTurn = "anthropic_tool_edit"
	sv := f.supervisor(supervisor.Admission{MaxRunning: 1})
	task := supervisor.Task{ID: "pi", Prompt: "Note in README.md that pi edited it", Agent: "sh agents/pi.sh"}
	if err := sv.AddTasks(task); err != nil {
		t.Fatal(err)
	}
	if !runToEnd(t, sv, 3*time.Minute) {
		st := sv.State()
		t.Fatalf("not done: %+v", st.Tasks)
	}
	got := git(t, f.repo.WorkTree, "show", "corral/head:README.md")
	if got != "fixture, edited by pi through the corral gateway" {
		t.Errorf("README.md on the head: %q", got)
	}
	changed := git(t, f.repo.WorkTree, "diff", "--name-only", "main", "corral/head")
	if changed != "README.md" {
		t.Errorf("changeset: %q, want README.md alone", changed)
	}
	calls := f.calls("pi-1")
	if len(calls) != 2 {
		t.Fatalf("%d calls metered, want 2 (the tool turn and the answer): %+v", len(calls), calls)
	}
	if c := calls[0]; c.Input != 1200 || c.Output != 58 || !c.Streamed || c.Model != "claude-sonnet-4-5" {
		t.Errorf("tool turn metered %+v", c)
	}
	if c := calls[1]; c.Input != 25 || c.Output != 31 || c.CacheRead != 200 || c.CacheWrite != 50 {
		t.Errorf("answer metered %+v", c)
	}
	reqs := f.up.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), `"tool_result"`) || reqs[0].Header.Get("X-Api-Key") != hostKey {
		t.Errorf("upstream saw %d requests; second carries a tool result: %v", len(reqs), len(reqs) == 2 && strings.Contains(string(reqs[1].Body), "tool_result"))
	}
}
