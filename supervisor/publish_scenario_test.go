package supervisor_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/supervisor"
)

// addFiles commits files (and the agents of testdata/publish) to the fixture's repo
// before its supervisor opens the fleet, so they are in the base.
func (f *fixture) addFiles(files map[string]string) {
	f.t.Helper()
	dir := f.repo.WorkTree
	agents, _ := filepath.Glob("../testdata/publish/*.sh")
	for _, a := range agents {
		data, _ := os.ReadFile(a)
		files["agents/"+filepath.Base(a)] = string(data)
	}
	for p, c := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644)
	}
	git(f.t, dir, "add", "-A")
	git(f.t, dir, "commit", "-q", "-m", "scenario files")
}

// releaseAfter lets task's agent (AGENT_WAIT) finish once after's publish has an
// outcome, by typing a line into its terminal: both start from one base, and the
// order of their publishes is the test's, not the machine's timing.
func (f *fixture) releaseAfter(sv *supervisor.Supervisor, task, after string) {
	stop := make(chan struct{})
	f.t.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			landed := false
			for _, e := range f.events() {
				landed = landed || (e.Task == after && strings.HasPrefix(e.Kind, "publish.") && e.Kind != supervisor.EvPublishQueued)
			}
			if !landed {
				continue
			}
			for _, s := range sv.State().Sessions {
				if w, ok := sv.SessionInput(s.ID); ok && s.Task == task {
					w.Write([]byte("go\r"))
					return
				}
			}
		}
	}()
}

const shippingGo = "package pricing\n\n// FreeShippingThreshold is the order total above which shipping is free.\nconst FreeShippingThreshold = 50\n"

// TestSeedScenarioRejectRetryAccept is the seeds' scenario: two tasks change the same
// shipping threshold from one base, one also edits an unrelated file. The first lands;
// the second is rejected whole — its unrelated edit does not leak onto the head — then
// retried at the new head with $CORRAL_CONFLICT, and accepted.
func TestSeedScenarioRejectRetryAccept(t *testing.T) {
	f := newFixture(t)
	f.addFiles(map[string]string{"pricing/shipping.go": shippingGo, "docs/notes.md": "notes\n"})
	sv := f.supervisor(supervisor.Admission{MaxRunning: 2})
	first := agentTask("raise", "threshold.sh", "THRESHOLD=60")
	second := agentTask("lower", "threshold.sh", "THRESHOLD=40", "EXTRA=1", "AGENT_WAIT=1")
	second.Retries = 1
	if err := sv.AddTasks(first, second); err != nil {
		t.Fatal(err)
	}
	f.releaseAfter(sv, "lower", "raise")
	if !runToEnd(t, sv, 90*time.Second) {
		t.Fatalf("not all done: %+v", sv.State().Tasks)
	}
	var pubs []supervisor.Publish
	var conflicts []supervisor.Conflict
	f.store.View(func(r supervisor.Reader) error {
		pubs, _ = r.Publishes()
		for _, p := range pubs {
			cs, _ := r.Conflicts(p.ID)
			conflicts = append(conflicts, cs...)
		}
		return nil
	})
	var outcomes []string
	for _, p := range pubs {
		outcomes = append(outcomes, p.Task+":"+p.Outcome)
	}
	if got := strings.Join(outcomes, " "); got != "raise:accepted lower:rejected lower:accepted" {
		t.Fatalf("publishes %q, want raise accepted, lower rejected then accepted", got)
	}
	if len(conflicts) != 1 || conflicts[0].Path != "pricing/shipping.go" || conflicts[0].Class != supervisor.ConflictContent {
		t.Fatalf("conflicts %+v, want one content conflict on pricing/shipping.go", conflicts)
	}
	if conflicts[0].MovedBy != pubs[0].ID {
		t.Errorf("conflict moved by publish %d, want %d (raise's)", conflicts[0].MovedBy, pubs[0].ID)
	}
	// The rejection left the head where raise put it: the unrelated edit did not leak.
	if pubs[1].NewHead != "" {
		t.Errorf("rejected publish moved the head to %s", pubs[1].NewHead)
	}
	if got := git(t, f.repo.WorkTree, "show", pubs[0].NewHead+":docs/notes.md"); got != "notes" {
		t.Errorf("after the rejection docs/notes.md = %q", got)
	}
	// The retry started at the new head, saw the conflict report, and landed both edits.
	head := git(t, f.repo.WorkTree, "show", "corral/head:pricing/shipping.go")
	if !strings.Contains(head, "FreeShippingThreshold = 40") {
		t.Errorf("head shipping.go:\n%s", head)
	}
	if got := git(t, f.repo.WorkTree, "show", "corral/head:docs/notes.md"); !strings.Contains(got, "unrelated edit by lower") {
		t.Errorf("head notes %q lacks the retry's edit", got)
	}
	if pubs[2].Base != pubs[0].NewHead {
		t.Errorf("retry based on %.12s, want the new head %.12s", pubs[2].Base, pubs[0].NewHead)
	}
	saw := git(t, f.repo.WorkTree, "show", "corral/head:retry-lower.txt")
	if !strings.Contains(saw, "conflict-lower-2.json") {
		t.Errorf("retry did not get $CORRAL_CONFLICT: %q", saw)
	}
	if !strings.Contains(saw, `"class": "content"`) || !strings.Contains(saw, `"task": "raise"`) {
		t.Errorf("retry could not read the conflict report (class and the moving task):\n%s", saw)
	}
}

// TestRejectedWithoutRetriesGoesToInbox: the last rejected attempt puts the task in
// the human inbox with its conflict report, not into silence.
func TestRejectedWithoutRetriesGoesToInbox(t *testing.T) {
	f := newFixture(t)
	f.addFiles(map[string]string{"pricing/shipping.go": shippingGo, "docs/notes.md": "notes\n"})
	sv := f.supervisor(supervisor.Admission{MaxRunning: 2})
	if err := sv.AddTasks(agentTask("raise", "threshold.sh", "THRESHOLD=60"),
		agentTask("lower", "threshold.sh", "THRESHOLD=40", "AGENT_WAIT=1")); err != nil {
		t.Fatal(err)
	}
	f.releaseAfter(sv, "lower", "raise")
	runToEnd(t, sv, 90*time.Second)
	f.store.View(func(r supervisor.Reader) error {
		tk, _ := r.Task("lower")
		if tk.State != supervisor.TaskInbox || !strings.Contains(tk.Reason, "content conflict on pricing/shipping.go") {
			t.Errorf("lower is %s (%s), want inbox with the conflict", tk.State, tk.Reason)
		}
		return nil
	})
	if !hasEvent(f, supervisor.EvTaskInbox) {
		t.Error("no task.inbox event")
	}
	report, err := os.ReadFile(filepath.Join(f.repo.StateDir, "conflicts", "lower.json"))
	if err != nil || !strings.Contains(string(report), `"paths": [`) {
		t.Errorf("conflict report: %v\n%s", err, report)
	}
}
