package supervisor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"corral/supervisor"
)

// laneFixture is newFixture's repository with the lane's sample suite
// (testdata/lane/test.sh, a real shell test) and the soft/ values it adds up.
func laneFixture(t *testing.T) *fixture {
	f := newFixture(t)
	data, err := os.ReadFile("../testdata/lane/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := f.repo.WorkTree
	os.WriteFile(filepath.Join(dir, "test.sh"), data, 0o755)
	os.MkdirAll(filepath.Join(dir, "soft"), 0o755)
	os.MkdirAll(filepath.Join(dir, "lib"), 0o755)
	os.WriteFile(filepath.Join(dir, "soft", "a.txt"), []byte("3\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "soft", "b.txt"), []byte("3\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "lib", "base.txt"), []byte("1\n"), 0o644)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "suite")
	return f
}

func (f *fixture) laneSupervisor(lane supervisor.Lane, adm supervisor.Admission) *supervisor.Supervisor {
	f.t.Helper()
	sv, err := supervisor.New(supervisor.Config{
		Repo: f.repo, Store: f.store, SampleEvery: 100 * time.Millisecond,
		Fleet: supervisor.Fleet{Name: "test", BaseRef: "main", HeadRef: "corral/head", Admission: adm,
			Test: "sh test.sh", Lane: lane},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return sv
}

func laneTask(id string, env ...string) supervisor.Task {
	return agentTask(id, "lane.sh", env...)
}

func (f *fixture) laneRuns() []supervisor.LaneRun {
	var runs []supervisor.LaneRun
	f.store.View(func(r supervisor.Reader) error {
		var err error
		runs, err = r.LaneRuns()
		return err
	})
	return runs
}

func (f *fixture) publishes() []supervisor.Publish {
	var pubs []supervisor.Publish
	f.store.View(func(r supervisor.Reader) error {
		var err error
		pubs, err = r.Publishes()
		return err
	})
	return pubs
}

// eventData decodes an event's data.
func eventData(e supervisor.Event) map[string]any {
	m := map[string]any{}
	json.Unmarshal(e.Data, &m)
	return m
}

func firstEvent(evs []supervisor.Event, kind, task string) (supervisor.Event, bool) {
	for _, e := range evs {
		if e.Kind == kind && (task == "" || e.Task == task) {
			return e, true
		}
	}
	return supervisor.Event{}, false
}

// suitePasses runs the sample suite on the host against a commit's tree.
func suitePasses(t *testing.T, f *fixture, commit string) bool {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", f.repo.WorkTree, commit, dir))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("archive %s: %v\n%s", commit, err, out)
	}
	test := exec.Command("sh", "test.sh")
	test.Dir, test.Env = dir, append(os.Environ(), "CORRAL_LANE_ATTEMPT=2")
	return test.Run() == nil
}

// The scenario: eight publishes land as one batch, the fifth breaks the suite.
// The lane tests the newest head (red, twice), bisects the batch to name publish 5,
// narrows admission, opens a repair task for p5 that finds the failing output at
// $CORRAL_FAILURE, and reopens admission when the repair's head is green.
func TestLaneBatchBisectRepair(t *testing.T) {
	f := laneFixture(t)
	// First the eight publishes land with no lane watching, so they form one batch for
	// the lane of the next run (which also shows a restarted lane picks them up).
	plain := f.supervisor(supervisor.Admission{MaxRunning: 1})
	var tasks []supervisor.Task
	for i := 1; i <= 8; i++ {
		tk := laneTask(fmt.Sprintf("p%d", i))
		if i == 5 {
			tk = laneTask("p5", "LANE_VALUE=9")
			tk.Intent = []string{"lib/p5.txt"}
		}
		if i > 1 {
			tk.After = []string{fmt.Sprintf("p%d", i-1)}
		}
		tasks = append(tasks, tk)
	}
	if err := plain.AddTasks(tasks...); err != nil {
		t.Fatal(err)
	}
	if !runToEnd(t, plain, 120*time.Second) {
		t.Fatalf("publishes did not all land: %+v", plain.State().Tasks)
	}
	pubs := f.publishes()
	if len(pubs) != 8 || pubs[4].Task != "p5" || pubs[4].ID != 5 {
		t.Fatalf("publishes %+v, want p1..p8 as 1..8", pubs)
	}

	sv := f.laneSupervisor(supervisor.Lane{Gating: "post", OnRed: "repair", Narrow: "stop", Reruns: 1}, supervisor.Admission{MaxRunning: 2})
	ch, unsub := sv.Subscribe(4096)
	defer unsub()
	added := make(chan error, 1)
	go func() {
		// A task arriving while the head is red waits until it is green again.
		for e := range ch {
			if e.Kind == supervisor.EvLaneNarrowed {
				added <- sv.AddTasks(laneTask("later"))
				return
			}
		}
	}()
	if !runToEnd(t, sv, 180*time.Second) {
		t.Fatalf("not all done: %+v", sv.State().Tasks)
	}
	select {
	case err := <-added:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("the lane never narrowed admission")
	}

	runs := f.laneRuns()
	var head *supervisor.LaneRun
	var probes []int64
	skipped := 0
	for i, r := range runs {
		switch {
		case r.Kind == supervisor.LaneKindHead && r.Outcome == supervisor.LaneSkipped:
			skipped++
		case r.Kind == supervisor.LaneKindHead && head == nil:
			head = &runs[i]
		case r.Kind == supervisor.LaneKindBisect:
			probes = append(probes, r.Publish)
			if want := r.Publish >= 5; (r.Outcome == supervisor.LaneRed) != want {
				t.Errorf("probe of publish %d: %s", r.Publish, r.Outcome)
			}
		}
	}
	if head == nil || head.Outcome != supervisor.LaneRed || head.Culprit != 5 || head.Runs != 2 ||
		!slices.Equal(head.Batch, []int64{1, 2, 3, 4, 5, 6, 7, 8}) || head.Commit != pubs[7].NewHead {
		t.Fatalf("head run %+v, want red at p8's head over batch 1..8 after 2 runs, culprit 5", head)
	}
	if !strings.Contains(head.Output, "FAIL: lib/p5.txt is 9, over 5") {
		t.Errorf("head run output %q lacks the suite's failure", head.Output)
	}
	if skipped != 7 {
		t.Errorf("%d heads skipped, want the 7 the batch covered", skipped)
	}
	if !slices.Equal(probes, []int64{4, 6, 5}) {
		t.Errorf("bisection probed publishes %v, want [4 6 5]", probes)
	}

	evs := f.events()
	culprit, ok := firstEvent(evs, supervisor.EvLaneCulprit, "p5")
	if !ok || eventData(culprit)["publish"] != float64(5) {
		t.Fatalf("no lane.culprit naming publish 5 of p5: %+v", culprit)
	}
	repair, ok := firstEvent(evs, supervisor.EvLaneRepair, "")
	if !ok || eventData(repair)["for"] != "p5" {
		t.Fatalf("no repair task for p5: %+v", repair)
	}
	fix := repair.Task
	var fixTask supervisor.Task
	for _, tk := range sv.State().Tasks {
		if tk.ID == fix {
			fixTask = tk
		}
	}
	if fixTask.State != supervisor.TaskDone || fixTask.Repairs != head.ID || !strings.Contains(fixTask.Prompt, "$CORRAL_FAILURE") {
		t.Errorf("repair task %+v, want done, repairing run %d", fixTask, head.ID)
	}
	blocked := false
	for _, e := range evs {
		if e.Kind == supervisor.EvTaskBlocked && e.Task == "later" && strings.Contains(fmt.Sprint(eventData(e)["reason"]), "lane red, admission stopped") {
			blocked = true
		}
	}
	if !blocked {
		t.Error("later was never blocked by the red lane")
	}
	reopened, ok := firstEvent(evs, supervisor.EvLaneReopened, "")
	started, ok2 := firstEvent(evs, supervisor.EvSessionStarted, "later")
	fixPub, ok3 := firstEvent(evs, supervisor.EvPublishAccepted, fix)
	if !ok || !ok2 || !ok3 || !(fixPub.Seq < reopened.Seq && reopened.Seq < started.Seq) {
		t.Errorf("want repair landed (%d) < admission reopened (%d) < later started (%d)", fixPub.Seq, reopened.Seq, started.Seq)
	}
	st := sv.State()
	if st.Lane.Outcome != supervisor.LaneGreen || st.Lane.Head != st.Fleet.Head {
		t.Errorf("lane status %+v, want the final head green", st.Lane)
	}
	if got := git(t, f.repo.WorkTree, "show", "corral/head:lib/p5.txt"); got != "1" {
		t.Errorf("p5's value on the head = %q, want the repair's 1", got)
	}
	if !suitePasses(t, f, "corral/head") {
		t.Error("the final head fails the suite")
	}
}

// A test that fails and then passes on its re-run is reported flaky: no culprit, no
// narrowing, no repair.
func TestLaneFlakyIsNotBlamed(t *testing.T) {
	f := laneFixture(t)
	sv := f.laneSupervisor(supervisor.Lane{Reruns: 1}, supervisor.Admission{MaxRunning: 1})
	if err := sv.AddTasks(laneTask("flaky", "LANE_FILE=flaky")); err != nil {
		t.Fatal(err)
	}
	if !runToEnd(t, sv, 60*time.Second) {
		t.Fatalf("not all done: %+v", sv.State().Tasks)
	}
	runs := f.laneRuns()
	if len(runs) != 1 || runs[0].Outcome != supervisor.LaneFlaky || runs[0].Runs != 2 || runs[0].Culprit != 0 ||
		!strings.Contains(runs[0].Output, "FAIL: flaky (attempt 1)") {
		t.Fatalf("lane runs %+v, want one flaky run of 2 attempts with the failing attempt's output", runs)
	}
	evs := f.events()
	for _, kind := range []string{supervisor.EvLaneRed, supervisor.EvLaneCulprit, supervisor.EvLaneNarrowed, supervisor.EvLaneRepair} {
		if e, ok := firstEvent(evs, kind, ""); ok {
			t.Errorf("flaky run led to %s: %s", kind, e.Data)
		}
	}
	if _, ok := firstEvent(evs, supervisor.EvLaneFlaky, ""); !ok {
		t.Error("no lane.flaky event")
	}
	if st := sv.State(); st.Lane.Outcome != supervisor.LaneFlaky {
		t.Errorf("lane status %+v, want flaky", st.Lane)
	}
}

// A soft conflict: sa and sb change different files, each passes the suite alone, and
// together they break it. The lane blames the second, and (policy revert) lands a
// commit undoing it — history is not rewritten — after which the head is green.
func TestLaneSoftConflictBlamesSecondAndReverts(t *testing.T) {
	f := laneFixture(t)
	sv := f.laneSupervisor(supervisor.Lane{OnRed: "revert", Narrow: "paths", Reruns: 1}, supervisor.Admission{MaxRunning: 1})
	sa := laneTask("sa", "LANE_FILE=../soft/a", "LANE_VALUE=5")
	sb := laneTask("sb", "LANE_FILE=../soft/b", "LANE_VALUE=5")
	sb.After = []string{"sa"}
	if err := sv.AddTasks(sa, sb); err != nil {
		t.Fatal(err)
	}
	if runToEnd(t, sv, 90*time.Second) {
		t.Fatal("all tasks done, want sb waiting for a human after its revert")
	}
	pubs := f.publishes()
	if len(pubs) != 3 || pubs[0].Task != "sa" || pubs[1].Task != "sb" || !strings.Contains(pubs[2].Message, "revert of publish 2") {
		t.Fatalf("publishes %+v, want sa, sb, and the revert of sb", pubs)
	}
	var red *supervisor.LaneRun
	for i, r := range f.laneRuns() {
		if r.Outcome == supervisor.LaneRed && r.Kind == supervisor.LaneKindHead {
			red = &f.laneRuns()[i]
		}
	}
	if red == nil || red.Culprit != pubs[1].ID || !strings.Contains(red.Output, "soft/ adds up to 10") {
		t.Fatalf("red run %+v, want culprit sb's publish %d", red, pubs[1].ID)
	}
	// sa's head alone passes; sb's does; the revert's head passes again.
	if !suitePasses(t, f, pubs[0].NewHead) || suitePasses(t, f, pubs[1].NewHead) || !suitePasses(t, f, "corral/head") {
		t.Error("the suite does not pass at sa, fail at sb, pass at the revert")
	}
	if parents := git(t, f.repo.WorkTree, "rev-list", "--count", "corral/head"); parents == "" {
		t.Error("no history")
	}
	if got := git(t, f.repo.WorkTree, "rev-parse", "corral/head~1"); got != pubs[1].NewHead {
		t.Errorf("the revert's parent is %s, want sb's commit %s (history kept)", got, pubs[1].NewHead)
	}
	st := sv.State()
	var sbState supervisor.Task
	for _, tk := range st.Tasks {
		if tk.ID == "sb" {
			sbState = tk
		}
	}
	if sbState.State != supervisor.TaskInbox || !strings.Contains(sbState.Reason, "reverted") {
		t.Errorf("sb = %s (%s), want inbox after its revert", sbState.State, sbState.Reason)
	}
	if st.Lane.Outcome != supervisor.LaneGreen {
		t.Errorf("lane status %+v, want green after the revert", st.Lane)
	}
	evs := f.events()
	if _, ok := firstEvent(evs, supervisor.EvLaneReverted, "sb"); !ok {
		t.Error("no lane.reverted event for sb")
	}
	if _, ok := firstEvent(evs, supervisor.EvLaneReopened, ""); !ok {
		t.Error("admission never reopened")
	}
}

// Pre gating: nothing lands unless the lane passed its candidate tree, so the head is
// never red — a breaking change and the second half of a soft conflict are rejected
// with the failure at hand, and every commit on the head passed as a candidate.
func TestLanePreGatingNeverLandsRed(t *testing.T) {
	f := laneFixture(t)
	sv := f.laneSupervisor(supervisor.Lane{Gating: "pre", Reruns: 1, Parallel: 2}, supervisor.Admission{MaxRunning: 5})
	var tasks []supervisor.Task
	for _, tk := range []supervisor.Task{
		laneTask("g1"), laneTask("bad", "LANE_VALUE=9"), laneTask("g2"),
		laneTask("sa", "LANE_FILE=../soft/a", "LANE_VALUE=5"), laneTask("sb", "LANE_FILE=../soft/b", "LANE_VALUE=5"),
	} {
		tasks = append(tasks, tk)
	}
	if err := sv.AddTasks(tasks...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if _, err := sv.RunUntilDone(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("run: %v %v", err, ctx.Err())
	}
	green := map[string]bool{}
	for _, r := range f.laneRuns() {
		t.Logf("run %d %s %.7s %s runs=%d", r.ID, r.Kind, r.Commit, r.Outcome, r.Runs)
		if r.Kind == supervisor.LaneKindCandidate && (r.Outcome == supervisor.LaneGreen || r.Outcome == supervisor.LaneFlaky) {
			green[r.Commit] = true
		}
		if r.Kind != supervisor.LaneKindCandidate {
			t.Errorf("pre gating ran a %s run: %+v", r.Kind, r)
		}
	}
	base := git(t, f.repo.WorkTree, "rev-parse", "main")
	commits := strings.Fields(git(t, f.repo.WorkTree, "rev-list", "--first-parent", base+"..corral/head"))
	if len(commits) != 3 {
		t.Errorf("%d commits landed, want 3 (g1, g2 and one of sa/sb)", len(commits))
	}
	for _, c := range commits {
		if !green[c] {
			t.Errorf("commit %.12s landed without a green candidate run", c)
		}
		if !suitePasses(t, f, c) {
			t.Errorf("commit %.12s on the head fails the suite", c)
		}
	}
	states := map[string]supervisor.TaskState{}
	for _, tk := range sv.State().Tasks {
		states[tk.ID] = tk.State
	}
	if states["g1"] != supervisor.TaskDone || states["g2"] != supervisor.TaskDone || states["bad"] != supervisor.TaskInbox {
		t.Errorf("states %v, want g1 and g2 done, bad in the inbox", states)
	}
	if (states["sa"] == supervisor.TaskDone) == (states["sb"] == supervisor.TaskDone) {
		t.Errorf("states %v: want exactly one of the soft-conflicting pair to land", states)
	}
	rejected := 0
	for _, p := range f.publishes() {
		if p.Outcome == supervisor.OutcomeRejected {
			rejected++
			if !strings.Contains(p.Message, "lane red on the candidate tree") {
				t.Errorf("publish %d of %s rejected for %q", p.ID, p.Task, p.Message)
			}
		}
	}
	if rejected != 2 {
		t.Errorf("%d publishes rejected, want 2 (bad and the second of sa/sb)", rejected)
	}
	if data, err := os.ReadFile(filepath.Join(f.repo.StateDir, "failures", "bad.txt")); err != nil ||
		!strings.Contains(string(data), "FAIL: lib/bad.txt is 9, over 5") {
		t.Errorf("bad's failure report: %q, %v", data, err)
	}
	// Sessions went down when their candidates entered the gate; the landed ones'
	// layers are gone, the rejected ones' kept (as for any rejection).
	for id, st := range states {
		_, err := os.Stat(filepath.Join(f.repo.StateDir, "w", id+"-1"))
		if kept := err == nil; kept != (st != supervisor.TaskDone) {
			t.Errorf("%s (%s): layer kept = %v", id, st, kept)
		}
	}
	if n := len(sv.State().Sessions); n != 0 {
		t.Errorf("%d sessions live after the run", n)
	}
}

// A task's accept check runs in its session before it publishes: a failing one means
// no publish, and the next attempt reads why at $CORRAL_FAILURE; a passing one lets
// the publish through.
func TestAcceptCheckGatesPublish(t *testing.T) {
	f := laneFixture(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 2})
	ok := laneTask("ok", "LANE_VALUE=2")
	ok.Accept = `test "$(cat lib/ok.txt)" -le 5`
	// The scripted agent does not act on an accept report: its retry fails the same way.
	bad := laneTask("bad", "LANE_VALUE=9")
	bad.Accept = `v=$(cat lib/bad.txt); echo "value $v"; test "$v" -le 5`
	bad.Retries = 1
	if err := sv.AddTasks(ok, bad); err != nil {
		t.Fatal(err)
	}
	if runToEnd(t, sv, 60*time.Second) {
		t.Fatal("all done; want bad failed by its accept check")
	}
	var okPub bool
	for _, p := range f.publishes() {
		if p.Task == "bad" {
			t.Errorf("bad published despite its accept check: %+v", p)
		}
		okPub = okPub || (p.Task == "ok" && p.NewHead != "")
	}
	if !okPub {
		t.Error("ok's publish did not land")
	}
	fails := 0
	for _, e := range f.events() {
		if e.Kind == supervisor.EvAcceptFailed && e.Task == "bad" {
			fails++
		}
	}
	if fails != 2 {
		t.Errorf("%d accept.failed events for bad, want 2 (both attempts)", fails)
	}
	data, err := os.ReadFile(filepath.Join(f.repo.StateDir, "failures", "bad.txt"))
	if err != nil || !strings.Contains(string(data), "accept check failed") || !strings.Contains(string(data), "value 9") {
		t.Errorf("bad's failure report %q (%v), want the check's output", data, err)
	}
	for _, tk := range sv.State().Tasks {
		if tk.ID == "bad" && (tk.State != supervisor.TaskFailed || !strings.Contains(tk.Reason, "accept check failed")) {
			t.Errorf("bad = %s (%s), want failed by its accept check", tk.State, tk.Reason)
		}
	}
}

// Policy hold with narrow = paths: the culprit's task waits in the inbox with the
// failure at hand and the run ends rather than hanging. The next run restores the red
// verdict from the store: a task touching the culprit's paths is admitted, one that
// does not waits until that task's head is green.
func TestLaneHoldNarrowsToCulpritPaths(t *testing.T) {
	f := laneFixture(t)
	lane := supervisor.Lane{OnRed: "hold", Narrow: "paths", Reruns: 1}
	sv := f.laneSupervisor(lane, supervisor.Admission{MaxRunning: 1})
	if err := sv.AddTasks(laneTask("brk", "LANE_VALUE=9")); err != nil {
		t.Fatal(err)
	}
	if runToEnd(t, sv, 90*time.Second) {
		t.Fatal("all done; want brk held for a human")
	}
	if b := sv.State().Tasks[0]; b.State != supervisor.TaskInbox || !strings.Contains(b.Reason, "lane red since its publish 1") {
		t.Fatalf("brk = %s (%s), want held in the inbox", b.State, b.Reason)
	}
	if st := sv.State().Lane; st.Outcome != supervisor.LaneRed || st.Culprit != 1 || st.Narrowed != "paths" {
		t.Errorf("lane status %+v, want red, culprit 1, narrowed to paths", st)
	}
	if data, err := os.ReadFile(filepath.Join(f.repo.StateDir, "failures", "brk.txt")); err != nil || !strings.Contains(string(data), "FAIL: lib/brk.txt is 9") {
		t.Errorf("brk's failure report %q (%v)", data, err)
	}

	sv = f.laneSupervisor(lane, supervisor.Admission{MaxRunning: 1})
	near := laneTask("near", "LANE_FILE=brk", "LANE_VALUE=2") // rewrites the culprit's file
	near.Intent = []string{"lib/brk.txt"}
	far := laneTask("far")
	far.Intent, far.Priority = []string{"README.md"}, 10 // first in line, if admission allowed it
	if err := sv.AddTasks(near, far); err != nil {
		t.Fatal(err)
	}
	if runToEnd(t, sv, 90*time.Second) {
		t.Fatal("all done; want brk still in the inbox")
	}
	for _, tk := range sv.State().Tasks {
		if (tk.ID == "near" || tk.ID == "far") && tk.State != supervisor.TaskDone {
			t.Errorf("%s = %s (%s), want done", tk.ID, tk.State, tk.Reason)
		}
	}
	evs := f.events()
	reopened, ok := firstEvent(evs, supervisor.EvLaneReopened, "")
	nearStart, ok2 := firstEvent(evs, supervisor.EvSessionStarted, "near")
	farStart, ok3 := firstEvent(evs, supervisor.EvSessionStarted, "far")
	if !ok || !ok2 || !ok3 || !(nearStart.Seq < reopened.Seq && reopened.Seq < farStart.Seq) {
		t.Errorf("near started %d, admission reopened %d, far started %d: want in that order", nearStart.Seq, reopened.Seq, farStart.Seq)
	}
	blocked := false
	for _, e := range evs {
		if e.Kind == supervisor.EvTaskBlocked && e.Task == "far" && strings.Contains(fmt.Sprint(eventData(e)["reason"]), "only tasks that touch the culprit's paths") {
			blocked = true
		}
	}
	if !blocked {
		t.Error("far was never held back by the narrowed admission")
	}
}

// Pre gating holds approved escalations to the same rule: a human's approval of work
// that breaks the suite does not put it on the head; the lane rejects it.
func TestLanePreGatesApprovedEscalation(t *testing.T) {
	f := newFixture(t)
	f.addFiles(map[string]string{"go.sum": goSum})
	lane := supervisor.Lane{Gating: "pre", Reruns: 0, Parallel: 2}
	newSV := func() *supervisor.Supervisor {
		sv, err := supervisor.New(supervisor.Config{Repo: f.repo, Store: f.store, SampleEvery: 100 * time.Millisecond,
			Fleet: supervisor.Fleet{Name: "test", BaseRef: "main", HeadRef: "corral/head", Admission: supervisor.Admission{MaxRunning: 2},
				Test: "! grep v2.0.0 go.sum", Lane: lane}})
		if err != nil {
			t.Fatal(err)
		}
		return sv
	}
	sv := newSV()
	if err := sv.AddTasks(
		agentTask("bump-a", "lockfile.sh", "DEP=example.com/a", "VERSION=v1.1.0"),
		agentTask("bump-z", "lockfile.sh", "DEP=example.com/z", "VERSION=v2.0.0", "AGENT_WAIT=1")); err != nil {
		t.Fatal(err)
	}
	f.releaseAfter(sv, "bump-z", "bump-a")
	runToEnd(t, sv, 90*time.Second)
	var esc supervisor.Publish
	for _, p := range f.publishes() {
		if p.Outcome == supervisor.OutcomeEscalated {
			esc = p
		}
	}
	if esc.Task != "bump-z" {
		t.Fatalf("publishes %+v, want bump-z escalated", f.publishes())
	}
	// `corral approve` from another process; the next run adopts the decision.
	if _, err := supervisor.RecordDecision(f.store, supervisor.Approval{Publish: esc.ID, Decision: supervisor.DecisionApprove, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	sv = newSV()
	runToEnd(t, sv, 90*time.Second)
	if got := git(t, f.repo.WorkTree, "show", "corral/head:go.sum"); strings.Contains(got, "v2.0.0") {
		t.Fatalf("approved work that fails the suite reached the head:\n%s", got)
	}
	var after supervisor.Publish
	for _, p := range f.publishes() {
		if p.ID == esc.ID {
			after = p
		}
	}
	if after.Outcome != supervisor.OutcomeRejected || !strings.Contains(after.Message, "approved; lane red on the candidate tree") {
		t.Errorf("approved publish = %s (%q), want rejected by the lane", after.Outcome, after.Message)
	}
	red := 0
	for _, r := range f.laneRuns() {
		if r.Kind == supervisor.LaneKindCandidate && r.Outcome == supervisor.LaneRed {
			red++
		}
	}
	if red != 1 {
		t.Errorf("%d red candidate runs, want the approved one", red)
	}
}

// A suite that already fails on the base is nobody's fault: blame that would fall on
// the first publish checks the base first, finds it red, and neither narrows nor
// opens a repair.
func TestLaneRedBaseBlamesNobody(t *testing.T) {
	f := laneFixture(t)
	os.WriteFile(filepath.Join(f.repo.WorkTree, "lib", "base.txt"), []byte("9\n"), 0o644)
	git(t, f.repo.WorkTree, "commit", "-qam", "a broken base")
	sv := f.laneSupervisor(supervisor.Lane{Reruns: 1}, supervisor.Admission{MaxRunning: 1})
	if err := sv.AddTasks(laneTask("one"), laneTask("two")); err != nil {
		t.Fatal(err)
	}
	if !runToEnd(t, sv, 60*time.Second) {
		t.Fatalf("not all done: %+v", sv.State().Tasks)
	}
	baseProbes := 0
	for _, r := range f.laneRuns() {
		if r.Culprit != 0 {
			t.Errorf("run %d blames publish %d for the base's failure", r.ID, r.Culprit)
		}
		if r.Kind == supervisor.LaneKindBisect && r.Publish == 0 {
			baseProbes++
			if r.Outcome != supervisor.LaneRed {
				t.Errorf("base probe %s, want red", r.Outcome)
			}
		}
	}
	if baseProbes != 1 {
		t.Errorf("%d base probes, want 1 (then red without blame)", baseProbes)
	}
	for _, kind := range []string{supervisor.EvLaneCulprit, supervisor.EvLaneNarrowed, supervisor.EvLaneRepair} {
		if e, ok := firstEvent(f.events(), kind, ""); ok {
			t.Errorf("a red base led to %s: %s", kind, e.Data)
		}
	}
	if st := sv.State().Lane; st.Outcome != supervisor.LaneRed || st.Culprit != 0 {
		t.Errorf("lane status %+v, want red with no culprit", st)
	}
}

// While a run is under way publishes keep landing; each later run covers what landed
// meanwhile. Whatever the timing, every landed publish is in exactly one head run's
// batch, the heads a run passed over are recorded skipped, and the last head is judged.
func TestLaneBatchesCoverEveryPublishOnce(t *testing.T) {
	f := laneFixture(t)
	sv, err := supervisor.New(supervisor.Config{Repo: f.repo, Store: f.store, SampleEvery: 100 * time.Millisecond,
		Fleet: supervisor.Fleet{Name: "test", BaseRef: "main", HeadRef: "corral/head", Admission: supervisor.Admission{MaxRunning: 3},
			Test: "sleep 0.3; sh test.sh", Lane: supervisor.Lane{Reruns: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	var tasks []supervisor.Task
	for i := 1; i <= 8; i++ {
		tasks = append(tasks, laneTask(fmt.Sprintf("q%d", i)))
	}
	if err := sv.AddTasks(tasks...); err != nil {
		t.Fatal(err)
	}
	if !runToEnd(t, sv, 120*time.Second) {
		t.Fatalf("not all done: %+v", sv.State().Tasks)
	}
	covered := map[int64]int{}
	heads, skipped := 0, 0
	for _, r := range f.laneRuns() {
		switch {
		case r.Kind == supervisor.LaneKindHead && r.Outcome == supervisor.LaneSkipped:
			skipped++
		case r.Kind == supervisor.LaneKindHead:
			heads++
			if r.Outcome != supervisor.LaneGreen {
				t.Errorf("head run %d: %s", r.ID, r.Outcome)
			}
			for _, p := range r.Batch {
				covered[p]++
			}
			if r.Publish != r.Batch[len(r.Batch)-1] {
				t.Errorf("run %d tested publish %d, not the newest of its batch %v", r.ID, r.Publish, r.Batch)
			}
		}
	}
	for _, p := range f.publishes() {
		if covered[p.ID] != 1 {
			t.Errorf("publish %d covered by %d head runs, want 1", p.ID, covered[p.ID])
		}
	}
	if skipped != 8-heads {
		t.Errorf("%d skipped heads, %d head runs: want 8 publishes between them", skipped, heads)
	}
	t.Logf("8 publishes verified by %d head runs", heads)
	if st := sv.State(); st.Lane.Outcome != supervisor.LaneGreen || st.Lane.Head != st.Fleet.Head {
		t.Errorf("lane status %+v, want the final head green", st.Lane)
	}
}
