package supervisor_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"corral/sandbox"
	"corral/store"
	"corral/supervisor"
)

// TestMain lets the test binary serve as the sandbox init when it re-executes itself.
func TestMain(m *testing.M) {
	if sandbox.IsInit() {
		sandbox.InitMain()
		return
	}
	os.Exit(m.Run())
}

type fixture struct {
	t     *testing.T
	repo  sandbox.Repo
	store *store.DB
}

// newFixture makes a real repository holding the scripted agents of testdata/agents,
// and a real SQLite store in its corral state dir.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: real sandboxes (CI runs as root)")
	}
	dir := t.TempDir()
	agents, _ := filepath.Glob("../testdata/agents/*.sh")
	if len(agents) == 0 {
		t.Fatal("no scripted agents in testdata/agents")
	}
	os.MkdirAll(filepath.Join(dir, "agents"), 0o755)
	for _, a := range agents {
		data, _ := os.ReadFile(a)
		os.WriteFile(filepath.Join(dir, "agents", filepath.Base(a)), data, 0o755)
	}
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	os.WriteFile(filepath.Join(dir, "src", "app.go"), []byte("package app\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("fixture\n"), 0o644)
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "fixture")
	repo, err := sandbox.OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(repo.StateDir, 0o700)
	db, err := store.Open(filepath.Join(repo.StateDir, "fleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &fixture{t: t, repo: repo, store: db}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (f *fixture) supervisor(adm supervisor.Admission) *supervisor.Supervisor {
	f.t.Helper()
	sv, err := supervisor.New(supervisor.Config{
		Repo: f.repo, Store: f.store, SampleEvery: 100 * time.Millisecond,
		Fleet: supervisor.Fleet{Name: "test", BaseRef: "main", HeadRef: "corral/head", Admission: adm},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return sv
}

func (f *fixture) events() []supervisor.Event {
	var evs []supervisor.Event
	f.store.View(func(r supervisor.Reader) error {
		var err error
		evs, err = r.Events(0, 100000)
		return err
	})
	return evs
}

func agentTask(id, script string, env ...string) supervisor.Task {
	return supervisor.Task{ID: id, Prompt: "do " + id, Agent: strings.Join(env, " ") + " sh agents/" + script, Lifetime: supervisor.OneShot}
}

func runToEnd(t *testing.T, sv *supervisor.Supervisor, timeout time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ok, err := sv.RunUntilDone(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("fleet did not finish in %s", timeout)
	}
	return ok
}

func TestOneShotChangesetReachesHead(t *testing.T) {
	f := newFixture(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 2})
	if err := sv.AddTasks(agentTask("alpha", "edit.sh"), agentTask("beta", "edit.sh")); err != nil {
		t.Fatal(err)
	}
	if !runToEnd(t, sv, 60*time.Second) {
		t.Fatalf("not all tasks done: %+v", sv.State().Tasks)
	}
	for _, task := range []string{"alpha", "beta"} {
		got := git(t, f.repo.WorkTree, "show", "corral/head:work/"+task+"/result.txt")
		if !strings.Contains(got, "done by "+task) {
			t.Errorf("head lacks %s's work: %q", task, got)
		}
	}
	kinds := map[string]int{}
	for _, e := range f.events() {
		kinds[e.Kind]++
	}
	for kind, n := range map[string]int{"task.queued": 2, "session.started": 2, "session.exited": 2, "publish.queued": 2, "publish.accepted": 2, "task.done": 2} {
		if kinds[kind] != n {
			t.Errorf("%d %s events, want %d (all: %v)", kinds[kind], kind, n, kinds)
		}
	}
	// The user's branch and work tree are untouched.
	if got := git(t, f.repo.WorkTree, "status", "--porcelain"); got != "" {
		t.Errorf("work tree changed:\n%s", got)
	}
	if entries, _ := os.ReadDir(filepath.Join(f.repo.StateDir, "w")); len(entries) != 0 {
		t.Errorf("published sessions left layers: %v", entries)
	}
}

func TestAdmissionNeverExceedsCapOrBudget(t *testing.T) {
	f := newFixture(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 3, CPU: 2, Memory: 8 << 30, Interval: 150 * time.Millisecond})
	var tasks []supervisor.Task
	for _, id := range []string{"t1", "t2", "t3", "t4", "t5", "t6"} {
		tk := agentTask(id, "sleep.sh", "AGENT_STEPS=4", "AGENT_TICK=0.1")
		tk.CPU, tk.Memory = 0.75, 1<<30
		tasks = append(tasks, tk)
	}
	if err := sv.AddTasks(tasks...); err != nil {
		t.Fatal(err)
	}
	if !runToEnd(t, sv, 90*time.Second) {
		t.Fatalf("not all done: %+v", sv.State().Tasks)
	}
	live, maxLive := 0, 0
	for _, e := range f.events() {
		switch e.Kind {
		case "session.started":
			live++
		case "session.exited":
			live--
		}
		maxLive = max(maxLive, live)
	}
	var starts []time.Time
	f.store.View(func(r supervisor.Reader) error {
		all, err := r.Sessions()
		for _, s := range all {
			starts = append(starts, s.Started)
		}
		return err
	})
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	// 2 CPUs / 0.75 per task: at most 2 at once, below the cap of 3.
	if maxLive > 2 {
		t.Errorf("%d sessions live at once; the CPU budget allows 2", maxLive)
	}
	for i := 1; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < 140*time.Millisecond {
			t.Errorf("launches %d and %d only %s apart; the interval is 150ms", i-1, i, gap)
		}
	}
}

func TestDependenciesOrderStarts(t *testing.T) {
	f := newFixture(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 4})
	first := agentTask("first", "sleep.sh", "AGENT_STEPS=3")
	second := agentTask("second", "edit.sh")
	second.After, second.Priority = []string{"first"}, 10
	if err := sv.AddTasks(second, first); err != nil {
		t.Fatal(err)
	}
	if !runToEnd(t, sv, 60*time.Second) {
		t.Fatal("not all done")
	}
	var firstDone, secondStarted int64
	for _, e := range f.events() {
		if e.Kind == "task.done" && e.Task == "first" {
			firstDone = e.Seq
		}
		if e.Kind == "session.started" && e.Task == "second" {
			secondStarted = e.Seq
		}
	}
	if firstDone == 0 || secondStarted < firstDone {
		t.Errorf("second started (seq %d) before first was done (seq %d)", secondStarted, firstDone)
	}
}

func TestFailedAttemptRetriesThenFails(t *testing.T) {
	f := newFixture(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 2})
	tk := agentTask("flaky", "fail.sh")
	tk.Retries = 1
	if err := sv.AddTasks(tk); err != nil {
		t.Fatal(err)
	}
	if runToEnd(t, sv, 60*time.Second) {
		t.Fatal("a failing task counted as done")
	}
	var retrying, failed int
	for _, e := range f.events() {
		if e.Task == "flaky" && e.Kind == "task.retrying" {
			retrying++
		}
		if e.Task == "flaky" && e.Kind == "task.failed" {
			failed++
		}
	}
	if retrying != 1 || failed != 1 {
		t.Errorf("retrying=%d failed=%d, want 1 and 1", retrying, failed)
	}
	// A failed attempt keeps its layer for inspection.
	for _, id := range []string{"flaky-1", "flaky-2"} {
		p := filepath.Join(f.repo.StateDir, "w", id, "u", "failed-flaky.txt")
		if _, err := os.Stat(p); err != nil {
			t.Errorf("failed session %s lost its layer: %v", id, err)
		}
	}
}

func TestPauseResumeAndDiscard(t *testing.T) {
	f := newFixture(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 2})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if err := sv.AddTasks(agentTask("spin", "spin.sh"), agentTask("slow", "sleep.sh", "AGENT_STEPS=100")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both running", func() bool { return sv.State().Running == 2 })
	if err := sv.Pause("spin"); err != nil {
		t.Fatal(err)
	}
	cpu := func() time.Duration {
		var s []supervisor.Usage
		f.store.View(func(r supervisor.Reader) error { s, _ = r.LatestUsage(); return nil })
		for _, u := range s {
			if strings.HasPrefix(u.Session, "spin-") {
				return u.CPU
			}
		}
		return -1
	}
	time.Sleep(300 * time.Millisecond)
	c1 := cpu()
	time.Sleep(400 * time.Millisecond)
	if c2 := cpu(); c2 != c1 {
		t.Errorf("paused session used CPU: %v -> %v", c1, c2)
	}
	if err := sv.Pause("spin"); err == nil {
		t.Errorf("pausing a paused task did not say it does not apply")
	}
	if err := sv.Resume("spin"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	if c3 := cpu(); c3 <= c1 {
		t.Errorf("resumed session did not continue: %v -> %v", c1, c3)
	}
	var layer string
	for _, ss := range sv.State().Sessions {
		if ss.Task == "spin" {
			layer = ss.Layer
		}
	}
	if err := sv.Discard("spin"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(layer)); err == nil {
		t.Errorf("discard left the session's dir %s", filepath.Dir(layer))
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), f.repo.StateDir+"/w/spin") {
		t.Errorf("discard left a mount")
	}
	for _, tk := range sv.State().Tasks {
		if tk.ID == "spin" && tk.State != supervisor.TaskDiscarded {
			t.Errorf("spin is %s after discard", tk.State)
		}
	}
}

func TestEventsReachSubscribersWithoutBlocking(t *testing.T) {
	f := newFixture(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 2})
	slow, _ := sv.Subscribe(1) // never read: must not stall the fleet
	_ = slow
	fast, unsub := sv.Subscribe(4096)
	defer unsub()
	sv.AddTasks(agentTask("one", "edit.sh"))
	if !runToEnd(t, sv, 60*time.Second) {
		t.Fatal("not done")
	}
	var kinds []string
	for len(fast) > 0 {
		e := <-fast
		kinds = append(kinds, e.Kind)
	}
	if !strings.Contains(strings.Join(kinds, " "), "task.done") {
		t.Errorf("subscriber saw %v", kinds)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func (f *fixture) eventsOf(kind string) []supervisor.Event {
	var out []supervisor.Event
	for _, e := range f.events() {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent waits for the task's first event of a kind and returns it.
func (f *fixture) waitEvent(t *testing.T, kind, task string) supervisor.Event {
	t.Helper()
	var found supervisor.Event
	waitFor(t, kind+" of "+task, func() bool {
		for _, e := range f.eventsOf(kind) {
			if e.Task == task {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// layerHas reports whether a live session's private layer holds file with exactly
// want (a file just created may still be empty).
func layerHas(sv *supervisor.Supervisor, file, want string) bool {
	for _, s := range sv.State().Sessions {
		if data, err := os.ReadFile(filepath.Join(s.Layer, file)); err == nil && string(data) == want {
			return true
		}
	}
	return false
}

// publishNowLands publishes the persistent preview task's work while it runs, waits
// for the publish, and checks what it put on the head and that the session goes on.
func (f *fixture) publishNowLands(t *testing.T, sv *supervisor.Supervisor, notes string) {
	t.Helper()
	if err := sv.PublishNow("preview"); err != nil {
		t.Fatal(err)
	}
	f.waitEvent(t, "publish.accepted", "preview")
	if got := git(t, f.repo.WorkTree, "show", "corral/head:notes.txt"); got != notes {
		t.Errorf("head notes.txt = %q, want %q", got, notes)
	}
	if st := sv.State(); st.Running != 1 {
		t.Errorf("the persistent session stopped after publishing: %d running", st.Running)
	}
}

var _ = json.Marshal

func TestPersistentPublishesOnRequest(t *testing.T) {
	f := newFixture(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 2})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	preview := supervisor.Task{ID: "preview", Prompt: "serve", Lifetime: supervisor.Persistent,
		Agent: "echo draft > notes.txt; echo ready; sleep 60"}
	if err := sv.AddTasks(preview); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the draft", func() bool { return layerHas(sv, "notes.txt", "draft\n") })
	f.publishNowLands(t, sv, "draft")
	if err := sv.PublishNow("nope"); err == nil {
		t.Errorf("publishing an unknown task did not fail")
	}
}

// A persistent task's accept check runs in its live session before a publish made
// while its agent runs: failing, it publishes nothing and the agent goes on; once the
// work passes, the publish lands.
func TestPersistentPublishNowPassesAcceptCheck(t *testing.T) {
	f := newFixture(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 2})
	preview := supervisor.Task{ID: "preview", Prompt: "serve", Lifetime: supervisor.Persistent,
		Agent:  "echo draft > notes.txt; echo ready; read line; echo final > notes.txt; echo fixed; sleep 60",
		Accept: "cat notes.txt; grep -qx final notes.txt"}
	if err := sv.AddTasks(preview); err != nil {
		t.Fatal(err)
	}
	start(t, sv)
	waitFor(t, "the draft", func() bool { return layerHas(sv, "notes.txt", "draft\n") })
	if err := sv.PublishNow("preview"); err != nil {
		t.Fatal(err)
	}
	failed := f.waitEvent(t, supervisor.EvAcceptFailed, "preview")
	if !strings.Contains(string(failed.Data), "exit 1") || !strings.Contains(string(failed.Data), "draft") {
		t.Errorf("accept.failed carries %s, want the exit and the check's output", failed.Data)
	}
	st := sv.State()
	if st.Running != 1 || st.Tasks[0].State != supervisor.TaskRunning || !strings.Contains(st.Tasks[0].Reason, "accept check failed") {
		t.Errorf("after the failed check: %d running, task %s (%s)", st.Running, st.Tasks[0].State, st.Tasks[0].Reason)
	}
	if pubs := f.publishes(); len(pubs) != 0 {
		t.Errorf("a publish was recorded despite the failed check: %+v", pubs)
	}
	w, ok := sv.SessionInput(st.Sessions[0].ID)
	if !ok {
		t.Fatal("no input to the session")
	}
	w.Write([]byte("go\r"))
	waitFor(t, "the fix", func() bool { return layerHas(sv, "notes.txt", "final\n") })
	f.publishNowLands(t, sv, "final")
}

func TestOverlappingIntentsAreReportedAndSerialized(t *testing.T) {
	f := newFixture(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 4, Overlap: "serialize"})
	a := agentTask("a", "sleep.sh", "AGENT_STEPS=3")
	b := agentTask("b", "sleep.sh", "AGENT_STEPS=3")
	c := agentTask("c", "sleep.sh", "AGENT_STEPS=3")
	a.Intent, b.Intent, c.Intent = []string{"src/**"}, []string{"src/*.go"}, []string{"README.md"}
	if err := sv.AddTasks(a, b, c); err != nil {
		t.Fatal(err)
	}
	if !runToEnd(t, sv, 60*time.Second) {
		t.Fatal("not all done")
	}
	overlap := false
	live := map[string]bool{}
	for _, e := range f.events() {
		switch e.Kind {
		case "intent.overlap":
			overlap = overlap || (e.Task == "b" && strings.Contains(string(e.Data), `"with":"a"`))
		case "session.started":
			live[e.Task] = true
			if live["a"] && live["b"] {
				t.Errorf("a and b ran at once although their intents overlap under serialize")
			}
		case "session.exited":
			delete(live, e.Task)
		}
	}
	if !overlap {
		t.Errorf("no intent.overlap event for b and a")
	}
}
