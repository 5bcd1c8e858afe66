package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/supervisor"
)

// fleetRepo makes a repository with the scripted agents and a plan for it.
func fleetRepo(t *testing.T, plan string) (dir, planPath string) {
	t.Helper()
	files := map[string]string{"src/app.go": "package app\n"}
	agents, _ := filepath.Glob("testdata/agents/*.sh")
	for _, a := range agents {
		data, _ := os.ReadFile(a)
		files["agents/"+filepath.Base(a)] = string(data)
	}
	dir = gitRepo(t, files)
	planPath = filepath.Join(dir, "plan.toml")
	if err := os.WriteFile(planPath, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, planPath
}

func readEvents(t *testing.T, path string) []supervisor.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var evs []supervisor.Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e supervisor.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("event line %q: %v", sc.Text(), err)
		}
		evs = append(evs, e)
	}
	return evs
}

func TestRunHeadlessExitCodesAndEvents(t *testing.T) {
	requireRoot(t)
	_, plan := fleetRepo(t, `
[fleet]
repo = "."
base = "main"
launch_interval = "50ms"

[defaults]
agent = "sh agents/edit.sh"
retries = 0

[[task]]
id = "alpha"
prompt = "write a result"

[[task]]
id = "broken"
prompt = "fail"
agent = "sh agents/fail.sh"
`)
	evPath := filepath.Join(t.TempDir(), "events.jsonl")
	code, _, errOut := runMain("run", plan, "--headless", "--events", evPath)
	if code != exitNotAllDone {
		t.Fatalf("exit %d, want 3 (a task failed); stderr:\n%s", code, errOut)
	}
	evs := readEvents(t, evPath)
	var kinds []string
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Errorf("event %d has seq %d: the stream has a gap", i, e.Seq)
		}
		kinds = append(kinds, e.Kind+":"+e.Task)
	}
	all := strings.Join(kinds, " ")
	for _, want := range []string{"task.queued:alpha", "session.started:alpha", "publish.accepted:alpha", "task.done:alpha", "task.failed:broken"} {
		if !strings.Contains(all, want) {
			t.Errorf("events lack %s: %s", want, all)
		}
	}
	// Bad input exits 2 and names the file and line.
	bad := filepath.Join(filepath.Dir(plan), "bad.toml")
	os.WriteFile(bad, []byte("[fleet]\nrepo = \".\"\n\n[[task]]\nid = \"x\"\npromt = \"typo\"\n"), 0o644)
	code, _, errOut = runMain("run", bad, "--headless")
	if code != exitBadInput || !strings.Contains(errOut, "bad.toml:6") || !strings.Contains(errOut, "promt") {
		t.Errorf("bad plan: exit %d, stderr %q", code, errOut)
	}
}

// TestRunSurvivesSupervisorKill kills a headless run with SIGKILL mid-task, then runs
// the plan again: the interrupted session is found with its layer and resumed to the
// end without redoing the work it had done.
func TestRunSurvivesSupervisorKill(t *testing.T) {
	requireRoot(t)
	dir, plan := fleetRepo(t, `
[fleet]
repo = "."
base = "main"

[[task]]
id = "long"
prompt = "ten slow steps"
agent = "AGENT_STEPS=10 AGENT_TICK=0.3 sh agents/sleep.sh"
`)
	evPath := filepath.Join(t.TempDir(), "first.jsonl")
	self, _ := os.Executable()
	cmd := exec.Command(self, "run", plan, "--headless", "--events", evPath)
	cmd.Env = append(os.Environ(), "CORRAL_TEST_MAIN=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	layer := filepath.Join(dir, ".git", "corral", "w", "long-1", "u", "steps", "long")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if entries, _ := os.ReadDir(layer); len(entries) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the agent never got 3 steps in")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var initPid int
	for _, e := range readEvents(t, evPath) {
		if e.Kind == "session.started" {
			var d struct{ Pid int }
			json.Unmarshal(e.Data, &d)
			initPid = d.Pid
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// The sandbox died with its supervisor, but its layer did not.
	waitGone(t, initPid)
	before, _ := os.ReadDir(layer)
	if len(before) < 3 {
		t.Fatalf("layer lost its work: %d steps", len(before))
	}

	evPath2 := filepath.Join(t.TempDir(), "second.jsonl")
	code, _, errOut := runMain("run", plan, "--headless", "--events", evPath2)
	if code != 0 {
		t.Fatalf("second run: exit %d\n%s", code, errOut)
	}
	var resumed, interrupted bool
	for _, e := range readEvents(t, evPath2) {
		if e.Kind == "task.interrupted" && e.Session == "long-1" {
			interrupted = true
		}
		if e.Kind == "session.started" && e.Session == "long-2" && strings.Contains(string(e.Data), `"resumes":"long-1"`) {
			resumed = true
		}
	}
	if !interrupted || !resumed {
		t.Errorf("interrupted=%v resumed=%v", interrupted, resumed)
	}
	out := gitOut(t, dir, "ls-tree", "-r", "--name-only", "corral/head", "steps/long")
	if n := len(strings.Fields(out)); n != 10 {
		t.Errorf("head has %d steps, want 10:\n%s", n, out)
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	if pid == 0 {
		t.Fatal("no init pid in the events")
	}
	for i := 0; i < 200; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Errorf("sandbox init %d outlived its supervisor", pid)
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestAddToRunningFleetAndStatus queues a task into a fleet while it runs, and reads
// the fleet with corral status.
func TestAddToRunningFleetAndStatus(t *testing.T) {
	requireRoot(t)
	dir, plan := fleetRepo(t, `
[fleet]
repo = "."
base = "main"
name = "live"

[defaults]
agent = "sh agents/edit.sh"

[[task]]
id = "slow"
prompt = "take a while"
agent = "AGENT_STEPS=15 AGENT_TICK=0.1 sh agents/sleep.sh"
`)
	type result struct {
		code   int
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, _, errOut := runMain("run", plan, "--headless", "--events", filepath.Join(t.TempDir(), "ev.jsonl"))
		done <- result{code, errOut}
	}()
	db := filepath.Join(dir, ".git", "corral", "fleets", "live.db")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code, out, _ := runMain("status", "--repo", dir); code == 0 && hasRow(out, "slow", "running") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fleet never showed slow running (db %s)", db)
		}
		time.Sleep(50 * time.Millisecond)
	}
	more := filepath.Join(dir, "more.toml")
	os.WriteFile(more, []byte("[[task]]\nid = \"late\"\nprompt = \"arrive late\"\n"), 0o644)
	code, out, errOut := runMain("add", "--repo", dir, more)
	if code != 0 || !strings.Contains(out, "queued late in fleet live") {
		t.Fatalf("add: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut = runMain("add", "--repo", dir, more); code != exitBadInput || !strings.Contains(errOut, "late") {
		t.Errorf("adding the same id twice: exit %d %s", code, errOut)
	}
	r := <-done
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	code, out, _ = runMain("status", "--repo", dir, "--json")
	if code != 0 {
		t.Fatalf("status --json: exit %d", code)
	}
	var st statusReport
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	states := map[string]supervisor.TaskState{}
	for _, tk := range st.Tasks {
		states[tk.ID] = tk.State
	}
	if states["slow"] != supervisor.TaskDone || states["late"] != supervisor.TaskDone {
		t.Errorf("states after the run: %v", states)
	}
	if got := gitOut(t, dir, "show", "corral/head:work/late/result.txt"); !strings.Contains(got, "done by late") {
		t.Errorf("the added task's work is not on the head: %q", got)
	}
}

// hasRow reports whether a table printed by status has a row starting with fields.
func hasRow(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(fields) && strings.Join(f[:len(fields)], " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}
