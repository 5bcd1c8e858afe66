package supervisor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"corral/supervisor"
)

const goSum = "example.com/a v1.0.0\nexample.com/m v1.0.0\nexample.com/z v1.0.0\n"

// escalatedFleet runs two tasks that both bump a dependency in go.sum from one base:
// the first lands, the second escalates (go.sum is a lockfile) and waits in the inbox.
func escalatedFleet(t *testing.T) (*fixture, *supervisor.Supervisor, supervisor.Publish) {
	f := newFixture(t)
	f.addFiles(map[string]string{"go.sum": goSum})
	sv := f.supervisor(supervisor.Admission{MaxRunning: 2})
	err := sv.AddTasks(
		agentTask("bump-a", "lockfile.sh", "DEP=example.com/a", "VERSION=v1.1.0"),
		agentTask("bump-z", "lockfile.sh", "DEP=example.com/z", "VERSION=v2.0.0", "AGENT_WAIT=1"))
	if err != nil {
		t.Fatal(err)
	}
	f.releaseAfter(sv, "bump-z", "bump-a")
	runToEnd(t, sv, 90*time.Second)
	var esc supervisor.Publish
	f.store.View(func(r supervisor.Reader) error {
		pubs, _ := r.Publishes()
		for _, p := range pubs {
			if p.Outcome == supervisor.OutcomeEscalated {
				esc = p
			}
		}
		tk, _ := r.Task("bump-z")
		if tk.State != supervisor.TaskInbox {
			t.Errorf("escalated task is %s, want inbox", tk.State)
		}
		return nil
	})
	if esc.ID == 0 || esc.Task != "bump-z" {
		t.Fatalf("no escalated publish of bump-z")
	}
	if got := git(t, f.repo.WorkTree, "show", "corral/head:go.sum"); strings.Contains(got, "v2.0.0") || git(t, f.repo.WorkTree, "ls-tree", "corral/head", "src/bump-z") != "" {
		t.Fatalf("escalated work reached the head")
	}
	return f, sv, esc
}

// TestApproveLandsEscalatedPublish: approval re-checks at the current head, merges the
// lockfile, records the Approval and emits publish.approved.
func TestApproveLandsEscalatedPublish(t *testing.T) {
	f, sv, esc := escalatedFleet(t)
	if err := sv.Approve(esc.ID); err != nil {
		t.Fatal(err)
	}
	got := git(t, f.repo.WorkTree, "show", "corral/head:go.sum")
	if got != "example.com/a v1.1.0\nexample.com/m v1.0.0\nexample.com/z v2.0.0" {
		t.Errorf("head go.sum after approval:\n%s", got)
	}
	git(t, f.repo.WorkTree, "cat-file", "-e", "corral/head:src/bump-z/bump-z.go")
	f.store.View(func(r supervisor.Reader) error {
		as, _ := r.Approvals()
		if len(as) != 1 || as[0].Decision != "approve" || as[0].Publish != esc.ID {
			t.Errorf("approvals %+v", as)
		}
		tk, _ := r.Task("bump-z")
		if tk.State != supervisor.TaskDone {
			t.Errorf("task %s after approval", tk.State)
		}
		return nil
	})
	if !hasEvent(f, "publish.approved") {
		t.Error("no publish.approved event")
	}
	if err := sv.Approve(esc.ID); !errors.Is(err, supervisor.ErrDecided) {
		t.Errorf("second approval: %v, want ErrDecided", err)
	}
}

// TestDenyKeepsHeadAndFailsTask: a denial lands nothing and says why.
func TestDenyKeepsHeadAndFailsTask(t *testing.T) {
	f, sv, esc := escalatedFleet(t)
	head := git(t, f.repo.WorkTree, "rev-parse", "corral/head")
	if err := sv.Deny(esc.ID, "pin z at v1"); err != nil {
		t.Fatal(err)
	}
	if got := git(t, f.repo.WorkTree, "rev-parse", "corral/head"); got != head {
		t.Error("denial moved the head")
	}
	f.store.View(func(r supervisor.Reader) error {
		tk, _ := r.Task("bump-z")
		if tk.State != supervisor.TaskFailed || !strings.Contains(tk.Reason, "pin z at v1") {
			t.Errorf("task %s (%s) after denial", tk.State, tk.Reason)
		}
		return nil
	})
	if !hasEvent(f, "publish.denied") {
		t.Error("no publish.denied event")
	}
}

// TestRunningSupervisorAdoptsRecordedDecision: `corral approve` from another process
// records the decision in the store; the running supervisor applies it.
func TestRunningSupervisorAdoptsRecordedDecision(t *testing.T) {
	f, _, esc := escalatedFleet(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 2})
	if err := sv.AddTasks(agentTask("idle", "sleep.sh", "AGENT_STEPS=30", "AGENT_TICK=0.1")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { sv.RunUntilDone(ctx); close(done) }()
	if _, err := supervisor.RecordDecision(f.store, supervisor.Approval{Publish: esc.ID, Decision: "approve", Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for !hasEvent(f, "publish.approved") {
		select {
		case <-done:
			t.Fatal("fleet ended before applying the decision")
		case <-time.After(50 * time.Millisecond):
		}
	}
	<-done
	git(t, f.repo.WorkTree, "cat-file", "-e", "corral/head:src/bump-z/bump-z.go")
}

func hasEvent(f *fixture, kind string) bool {
	for _, e := range f.events() {
		if e.Kind == kind {
			return true
		}
	}
	return false
}
