package supervisor

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

func ev(sec float64, kind, task, session string, data ...any) Event {
	e := Event{Time: at(sec), Kind: kind, Task: task, Session: session}
	if len(data) > 0 {
		e.Data, _ = json.Marshal(data[0])
	}
	return e
}

// scriptedRun is a run whose true figures are known:
//
//	a: queued 0, started 2, publishes at 5 (rejected at 6, content conflict), retried,
//	   second attempt started 8, publishes at 10, accepted at 11, done.
//	b: queued 0, started 1, publishes at 2, escalated at 3, approved by a human at 63,
//	   done at 63 (one human minute).
//	c: queued 0, started 4, paused 5 to 9, killed at 12 (failed), never retried.
func scriptedRun() *History {
	tasks := []Task{
		{ID: "a", Lifetime: OneShot, Retries: 1, Created: t0, State: TaskDone, CPU: 1},
		{ID: "b", Lifetime: OneShot, Retries: 1, Created: t0, State: TaskDone, CPU: 1},
		{ID: "c", Lifetime: OneShot, Retries: 0, Created: t0, State: TaskFailed, CPU: 2},
	}
	code := 0
	sessions := []Session{
		{ID: "a-1", Task: "a", Attempt: 1, Started: at(2), Ended: at(6), State: SessionPublished, ExitCode: &code},
		{ID: "b-1", Task: "b", Attempt: 1, Started: at(1), Ended: at(3), State: SessionPublished, ExitCode: &code},
		{ID: "c-1", Task: "c", Attempt: 1, Started: at(4), Ended: at(12), State: SessionFailed},
		{ID: "a-2", Task: "a", Attempt: 2, Started: at(8), Ended: at(11), State: SessionPublished, ExitCode: &code},
	}
	pubs := []Publish{
		{ID: 1, Task: "b", Session: "b-1", Outcome: OutcomeAccepted, NewHead: "h2", Message: "approved; accepted", Time: at(3)},
		{ID: 2, Task: "a", Session: "a-1", Outcome: OutcomeRejected, Time: at(6)},
		{ID: 3, Task: "a", Session: "a-2", Outcome: OutcomeAccepted, NewHead: "h3", Time: at(11)},
	}
	conflicts := map[int64][]Conflict{2: {{ID: 1, Publish: 2, Path: "x.go", Class: "content"}}}
	approvals := []Approval{{ID: 1, Publish: 1, Decision: DecisionApprove, Time: at(63)}}
	events := []Event{
		ev(0, EvFleetStarted, "", ""),
		ev(0, EvTaskQueued, "a", ""), ev(0, EvTaskQueued, "b", ""), ev(0, EvTaskQueued, "c", ""),
		ev(1, EvSessionStarted, "b", "b-1", map[string]any{"attempt": 1}),
		ev(2, EvSessionStarted, "a", "a-1", map[string]any{"attempt": 1}),
		ev(2, EvPublishQueued, "b", "b-1"),
		ev(3, EvPublishEscalated, "b", "b-1", map[string]any{"publish": 1, "message": "needs approval: go.sum"}),
		ev(4, EvSessionStarted, "c", "c-1", map[string]any{"attempt": 1}),
		ev(5, EvPublishQueued, "a", "a-1"),
		ev(5, EvSessionPaused, "c", "c-1"),
		ev(6, EvPublishRejected, "a", "a-1", map[string]any{"publish": 2, "conflicts": 1}),
		ev(6, EvTaskRetrying, "a", "a-1", map[string]any{"reason": "publish rejected", "attempt": 1, "retries": 1}),
		ev(8, EvSessionStarted, "a", "a-2", map[string]any{"attempt": 2}),
		ev(9, EvSessionResumed, "c", "c-1"),
		ev(10, EvPublishQueued, "a", "a-2"),
		ev(11, EvPublishAccepted, "a", "a-2", map[string]any{"publish": 3, "new_head": "h3"}),
		ev(11, EvTaskDone, "a", "a-2"),
		ev(12, EvSessionKilled, "c", "c-1"),
		ev(12, EvTaskFailed, "c", "c-1", map[string]any{"reason": "killed by the user"}),
		ev(63, EvPublishApproved, "b", "b-1", map[string]any{"publish": 1, "outcome": "accepted", "new_head": "h2"}),
		ev(63, EvTaskDone, "b", "b-1"),
	}
	for i := range events {
		events[i].Seq = int64(i + 1)
	}
	return NewHistory(Fleet{Name: "f", Base: "h1", Head: "h2", Created: t0}, tasks, sessions, nil, pubs, conflicts, approvals, events)
}

func states(m Moment) string {
	s := ""
	for _, t := range m.State.Tasks {
		s += fmt.Sprintf("%s:%s:%d ", t.ID, t.State, t.Attempts)
	}
	for _, ss := range m.State.Sessions {
		s += ss.ID + ":" + string(ss.State) + " "
	}
	return s + "head=" + m.State.Fleet.Head
}

func TestHistoryAt(t *testing.T) {
	h := scriptedRun()
	for _, c := range []struct {
		sec  float64
		want string
	}{
		{0, "a:queued:0 b:queued:0 c:queued:0 head=h1"},
		{1.5, "a:queued:0 b:running:1 c:queued:0 b-1:running head=h1"},
		{3, "a:running:1 b:inbox:1 c:queued:0 a-1:running head=h1"},
		{5.5, "a:publishing:1 b:inbox:1 c:paused:1 a-1:running c-1:paused head=h1"},
		{7, "a:retrying:1 b:inbox:1 c:paused:1 c-1:paused head=h1"},
		{9.5, "a:running:2 b:inbox:1 c:running:1 c-1:running a-2:running head=h1"},
		{11, "a:done:2 b:inbox:1 c:running:1 c-1:running head=h3"},
		{20, "a:done:2 b:inbox:1 c:failed:1 head=h3"},
		{63, "a:done:2 b:done:1 c:failed:1 head=h2"},
	} {
		if got := states(h.At(at(c.sec))); got != c.want {
			t.Errorf("at %gs:\n got %s\nwant %s", c.sec, got, c.want)
		}
	}
	// Before the approval the publish was escalated, with the message it had then.
	m := h.At(at(30))
	if p := m.Publishes[0]; p.Outcome != OutcomeEscalated || p.Message != "needs approval: go.sum" || p.NewHead != "" {
		t.Errorf("publish 1 at 30s: %+v, want escalated as it was", p)
	}
	if len(m.Approvals) != 0 {
		t.Errorf("approvals at 30s: %v, want none yet", m.Approvals)
	}
	if got := h.At(at(64)).Publishes[0]; got.Outcome != OutcomeAccepted {
		t.Errorf("publish 1 after the approval: %s", got.Outcome)
	}
	if m := h.At(at(6)); len(m.Conflicts[2]) != 1 {
		t.Errorf("the rejected publish's conflicts at 6s: %v", m.Conflicts)
	}
	// Seek lands on the right event: at an event's time it has happened, just before it has not.
	if n := h.EventsUntil(at(6)); h.Events[n-1].Kind != EvTaskRetrying {
		t.Errorf("events until 6s end with %s", h.Events[n-1].Kind)
	}
	if n := h.EventsUntil(at(6).Add(-time.Nanosecond)); h.Events[n-1].Kind != EvSessionPaused {
		t.Errorf("events until just before 6s end with %s", h.Events[n-1].Kind)
	}
	if i := h.FindEvent(0, 1, EvPublishRejected); i < 0 || h.Events[i].Time != at(6) {
		t.Errorf("next rejection from the start: %d", i)
	}
	if i := h.FindEvent(len(h.Events), -1, EvSessionPaused); i < 0 || h.Events[i].Time != at(5) {
		t.Errorf("previous pause from the end: %d", i)
	}
}

// TestHistoryCheckpoints checks that seeking through checkpoints gives what folding
// every event from the start gives, across several checkpoints.
func TestHistoryCheckpoints(t *testing.T) {
	tasks := []Task{{ID: "p", Lifetime: Persistent, Created: t0}, {ID: "q", Lifetime: OneShot, Created: t0}}
	var events []Event
	events = append(events, ev(0, EvTaskQueued, "p", ""), ev(0, EvTaskQueued, "q", ""),
		ev(0.5, EvSessionStarted, "p", "p-1", map[string]any{"attempt": 1}))
	for i := 0; len(events) < 3*checkpointEvery+17; i++ {
		s := 1 + float64(i)
		switch i % 4 {
		case 0:
			events = append(events, ev(s, EvSessionPaused, "p", "p-1"))
		case 1:
			events = append(events, ev(s, EvSessionResumed, "p", "p-1"))
		case 2:
			events = append(events, ev(s, EvPublishQueued, "p", "p-1"))
		case 3:
			events = append(events, ev(s, EvPublishMerged, "p", "p-1", map[string]any{"new_head": fmt.Sprint("h", i)}),
				ev(s, EvTaskBlocked, "q", "", map[string]any{"reason": fmt.Sprint("waits ", i)}))
		}
	}
	for i := range events {
		events[i].Seq = int64(i + 1)
	}
	h := NewHistory(Fleet{Base: "h0", Created: t0}, tasks, []Session{{ID: "p-1", Task: "p", Started: at(0.5)}}, nil, nil, nil, nil, events)
	if len(h.checkpoints) < 3 {
		t.Fatalf("%d checkpoints for %d events", len(h.checkpoints), len(events))
	}
	for _, sec := range []float64{0, 0.5, 100, 1023.5, 1024, 1025, 2049, 2500.25, 1e6} {
		n := h.EventsUntil(at(sec))
		scratch := foldState{head: h.Fleet.Base, tasks: make([]taskFold, len(tasks)), sessions: map[string]SessionState{}}
		for i := 0; i < n; i++ {
			h.apply(&scratch, i)
		}
		if got := h.foldAt(at(sec)); !reflect.DeepEqual(got, scratch) {
			t.Errorf("at %gs: through checkpoints %+v, from scratch %+v", sec, got, scratch)
		}
	}
}

// TestReportFigures checks the report against the scripted run's known figures.
func TestReportFigures(t *testing.T) {
	h := scriptedRun()
	rep := h.Report(map[string]UsageTotal{"a-1": {CPU: time.Second}, "a-2": {CPU: 2 * time.Second, MemoryPeak: 5 << 20}})
	by := map[string]TaskReport{}
	for _, tr := range rep.Tasks {
		by[tr.Task] = tr
	}
	a, b, c := by["a"], by["b"], by["c"]
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", what, got, want)
		}
	}
	check("a attempts", a.Attempts, 2)
	check("a retries", a.Retries, 1)
	check("a accepted", a.Accepted, true)
	check("a conflicts", a.Conflicts, map[string]int{"content": 1})
	check("a first conflict", *a.FirstConflict, sec(6))
	check("a latency", a.Latency, sec(11))
	check("a running", a.Running, sec(4+3)) // 2→6, 8→11
	check("a waiting admission", a.WaitingAdmission, sec(2+2))
	check("a waiting human", a.WaitingHuman, time.Duration(0))
	check("a cpu", a.CPU, 3*time.Second)
	check("a memory peak", a.MemoryPeak, uint64(5<<20))
	check("b latency", b.Latency, sec(63))
	check("b waiting human", b.WaitingHuman, sec(60))
	check("b running", b.Running, sec(2))
	check("b waiting admission", b.WaitingAdmission, sec(1))
	check("c outcome", c.Outcome, TaskFailed)
	check("c paused", c.Paused, sec(4))
	check("c running", c.Running, sec(1+3))
	check("c accepted", c.Accepted, false)
	f := rep.Fleet
	check("accepted", f.Accepted, 2)
	check("attempts", f.Attempts, 4)
	check("retries", f.Retries, 1)
	check("publishes", f.Publishes, 3)
	check("reject rate", f.RejectRate, 1.0/3)
	check("conflicts", f.Conflicts, map[string]int{"content": 1})
	check("first conflict", *f.FirstConflict, sec(6))
	check("human minutes", f.HumanMinutes, 1.0)
	check("pending", f.Pending, 0)
	check("batch elapsed", f.BatchElapsed, sec(63))
	check("per accepted latency", f.PerAccepted.Latency, sec((11+63)/2.0))
	check("per accepted waiting human", f.PerAccepted.WaitingHuman, sec(30))
	check("per accepted attempts", f.PerAccepted.Attempts, 1.5)
	check("cost without calls", f.Cost == nil && a.Cost == nil, true)

	// With metered calls: per task (a call of a's session found by its session), the
	// fleet, and the whole spend over the two accepted tasks.
	h.Calls = []ModelCall{
		{Session: "a-1", Task: "a", Input: 100, Output: 10, CacheRead: 1000, Cost: 0.5},
		{Session: "a-2", Input: 50, Output: 5, Cost: 0.25},
		{Session: "c-1", Task: "c", Input: 10, Output: 1, CacheWrite: 20, Cost: 0.75},
	}
	rep = h.Report(nil)
	by = map[string]TaskReport{}
	for _, tr := range rep.Tasks {
		by[tr.Task] = tr
	}
	check("a cost", *by["a"].Cost, Spend{Calls: 2, Input: 150, Output: 15, CacheRead: 1000, Cost: 0.75})
	check("b cost", by["b"].Cost == nil, true)
	check("c cost", *by["c"].Cost, Spend{Calls: 1, Input: 10, Output: 1, CacheWrite: 20, Cost: 0.75})
	check("fleet cost", rep.Fleet.Cost.Cost, 1.5)
	check("fleet tokens", rep.Fleet.Cost.Tokens(), int64(1196))
	check("cost per accepted task", rep.Fleet.PerAccepted.Cost.Cost, 0.75)
}
