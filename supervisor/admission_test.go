package supervisor

import (
	"strings"
	"testing"
	"time"
)

func task(id string, cpu float64, mem int64, prio int, after ...string) Task {
	return Task{ID: id, CPU: cpu, Memory: mem, Priority: prio, After: after, State: TaskQueued,
		Created: time.Unix(0, 0).Add(time.Duration(len(id)) * time.Second)}
}

func TestAdmitRespectsRunningCapAndBudget(t *testing.T) {
	now := time.Unix(1000, 0)
	v := admissionView{
		limits: Admission{MaxRunning: 2, CPU: 2, Memory: 4 << 30},
		tasks:  []Task{task("a", 1, 1<<30, 0), task("bb", 1, 1<<30, 0), task("ccc", 1, 1<<30, 0)},
		live:   map[string]bool{"a": true, "bb": true}, now: now,
	}
	v.tasks[0].State, v.tasks[1].State = TaskRunning, TaskRunning
	next, verdicts := admit(v)
	if next != nil {
		t.Fatalf("admitted %s past the running cap", next.ID)
	}
	if len(verdicts) != 1 || !strings.Contains(verdicts[0].reason, "2 of 2 sessions running") {
		t.Errorf("verdicts %+v", verdicts)
	}
	v.limits.MaxRunning = 5
	if next, verdicts = admit(v); next != nil || !strings.Contains(verdicts[0].reason, "CPUs") {
		t.Errorf("admitted past the CPU budget: %v %+v", next, verdicts)
	}
	v.limits.CPU = 3
	v.limits.Memory = 2 << 30
	if next, verdicts = admit(v); next != nil || !strings.Contains(verdicts[0].reason, "memory") {
		t.Errorf("admitted past the memory budget: %v %+v", next, verdicts)
	}
}

func TestAdmitOrderPriorityDepsAndStaging(t *testing.T) {
	now := time.Unix(1000, 0)
	v := admissionView{
		limits: Admission{MaxRunning: 4, Interval: time.Second},
		tasks:  []Task{task("low", 0, 0, 0), task("high", 0, 0, 5, "dep"), task("dep", 0, 0, 1)},
		live:   map[string]bool{}, now: now,
	}
	next, _ := admit(v)
	if next == nil || next.ID != "dep" {
		t.Fatalf("next = %v, want dep (high waits for it; dep outranks low)", next)
	}
	v.lastLaunch = now.Add(-300 * time.Millisecond)
	next, verdicts := admit(v)
	if next != nil {
		t.Fatalf("launched %s 300ms after the last launch with a 1s interval", next.ID)
	}
	found := false
	for _, vd := range verdicts {
		found = found || strings.Contains(vd.reason, "staged launch: next in 700ms")
	}
	if !found {
		t.Errorf("no staged-launch reason in %+v", verdicts)
	}
	v.lastLaunch = now.Add(-time.Second)
	v.tasks[2].State = TaskDone
	if next, _ = admit(v); next == nil || next.ID != "high" {
		t.Errorf("next = %v, want high once dep is done", next)
	}
}

func TestAdmitNeverFits(t *testing.T) {
	v := admissionView{
		limits: Admission{MaxRunning: 4, CPU: 2, Memory: 1 << 30},
		tasks:  []Task{task("huge", 4, 0, 0), task("fat", 1, 2<<30, 0), task("orphan", 0, 0, 0, "gone"), task("x", 0, 0, 0, "y"), task("y", 0, 0, 0)},
		live:   map[string]bool{}, now: time.Unix(1000, 0),
	}
	v.tasks[4].State = TaskFailed
	_, verdicts := admit(v)
	never := map[string]string{}
	for _, vd := range verdicts {
		if vd.never {
			never[vd.task.ID] = vd.reason
		}
	}
	for id, want := range map[string]string{"huge": "needs 4 CPUs", "fat": "needs 2.0G of memory", "orphan": "unknown task gone", "x": "depends on y, which failed"} {
		if !strings.Contains(never[id], want) {
			t.Errorf("%s: never-reason %q, want %q", id, never[id], want)
		}
	}
}

func TestAdmitSerializesOverlappingIntents(t *testing.T) {
	a, b := task("a", 0, 0, 0), task("bb", 0, 0, 0)
	a.State = TaskRunning
	v := admissionView{
		limits: Admission{MaxRunning: 4, Overlap: "serialize"},
		tasks:  []Task{a, b}, live: map[string]bool{"a": true}, now: time.Unix(1000, 0),
		overlaps: func(x, y Task) bool { return true },
	}
	next, verdicts := admit(v)
	if next != nil || !strings.Contains(verdicts[0].reason, "intent overlaps live task a") {
		t.Errorf("next %v, verdicts %+v", next, verdicts)
	}
	v.limits.Overlap = "warn"
	if next, _ = admit(v); next == nil {
		t.Errorf("warn policy held an overlapping task back")
	}
}

// A red head narrows admission: "stop" admits only repair tasks; "paths" admits tasks
// whose intent touches a path the culprit changed (and repairs); no gate, no narrowing.
func TestAdmitLaneGate(t *testing.T) {
	now := time.Unix(1000, 0)
	pricing, docs, fix := task("pricing", 0, 0, 0), task("docs", 0, 0, 5), task("fix-pricing", 0, 0, 0)
	pricing.Intent, docs.Intent = []string{"pricing/**"}, []string{"docs/**"}
	fix.Repairs = 3
	v := admissionView{limits: Admission{MaxRunning: 4}, now: now, live: map[string]bool{},
		tasks: []Task{pricing, docs}}
	if next, _ := admit(v); next == nil || next.ID != "docs" {
		t.Fatalf("no gate: admitted %v, want docs (highest priority)", next)
	}
	v.gate = &laneGate{mode: NarrowStop, paths: []string{"pricing/shipping.go"}, reason: "head abc red since publish 5"}
	next, verdicts := admit(v)
	if next != nil {
		t.Fatalf("stop: admitted %s", next.ID)
	}
	for _, vd := range verdicts {
		if !strings.Contains(vd.reason, "admission stopped: head abc red since publish 5") || vd.never {
			t.Errorf("stop: verdict %+v", vd)
		}
	}
	v.tasks = append(v.tasks, fix)
	if next, _ := admit(v); next == nil || next.ID != "fix-pricing" {
		t.Errorf("stop: admitted %v, want the repair task", next)
	}
	v.tasks = v.tasks[:2]
	v.gate.mode = NarrowPaths
	next, verdicts = admit(v)
	if next == nil || next.ID != "pricing" {
		t.Fatalf("paths: admitted %v, want pricing (touches the culprit's path)", next)
	}
	for _, vd := range verdicts {
		if vd.task.ID == "docs" && !strings.Contains(vd.reason, "only tasks that touch the culprit's paths") {
			t.Errorf("paths: docs verdict %+v", vd)
		}
	}
}
