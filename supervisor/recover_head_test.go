package supervisor_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/sandbox"
	"corral/store"
	"corral/supervisor"
)

// TestCrashAfterHeadMoveIsRecorded kills a supervisor at the worst point of a publish —
// the head has moved, the store has not heard — and opens the fleet again: the new
// supervisor finds the landed commit by its trailers and records it, so the store
// agrees with the head, the task is done (not interrupted), and its layer is gone.
func TestCrashAfterHeadMoveIsRecorded(t *testing.T) {
	f := newFixture(t)
	self, _ := os.Executable()
	cmd := exec.Command(self, "-test.run=^TestCrashAfterHeadMoveHelper$")
	cmd.Env = append(os.Environ(), "CORRAL_CRASH_SV_REPO="+f.repo.WorkTree)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("helper did not die right after the head moved: %v\n%s", err, out)
	}
	head := git(t, f.repo.WorkTree, "rev-parse", "corral/head")
	var before supervisor.Fleet
	f.store.View(func(r supervisor.Reader) error { before, _ = r.Fleet(); return nil })
	if before.Head == head || before.Head == "" {
		t.Fatalf("the store already knew head %.12s (recorded %.12s): the crash missed its window", head, before.Head)
	}

	f.supervisor(supervisor.Admission{MaxRunning: 1})
	var pubs []supervisor.Publish
	var fl supervisor.Fleet
	var task supervisor.Task
	var sess supervisor.Session
	f.store.View(func(r supervisor.Reader) error {
		pubs, _ = r.Publishes()
		fl, _ = r.Fleet()
		task, _ = r.Task("land")
		sess, _ = r.Session("land-1")
		return nil
	})
	if len(pubs) != 1 || pubs[0].NewHead != head || pubs[0].Session != "land-1" || pubs[0].Outcome != supervisor.OutcomeAccepted {
		t.Fatalf("publishes after recovery %+v, want land-1 accepted at %.12s", pubs, head)
	}
	if got := strings.Join(pubs[0].Paths, " "); got != "landed.txt" || pubs[0].Head != before.Head {
		t.Errorf("recovered publish paths %q from %.12s, want landed.txt from %.12s", got, pubs[0].Head, before.Head)
	}
	if fl.Head != head {
		t.Errorf("store head %.12s, ref %.12s", fl.Head, head)
	}
	if task.State != supervisor.TaskDone || sess.State != supervisor.SessionPublished {
		t.Errorf("task %s, session %s; want done and published", task.State, sess.State)
	}
	if _, err := os.Stat(sess.Layer); err == nil {
		t.Errorf("the landed session's layer %s is still there", sess.Layer)
	}
	recovered := false
	for _, e := range f.events() {
		if e.Kind == supervisor.EvTaskInterrupted {
			t.Errorf("task interrupted although its work landed: %+v", e)
		}
		recovered = recovered || (e.Kind == "publish.accepted" && strings.Contains(string(e.Data), `"recovered":true`))
	}
	if !recovered {
		t.Errorf("no recovered publish.accepted event")
	}
	// A second recovery adds nothing.
	f.supervisor(supervisor.Admission{MaxRunning: 1})
	f.store.View(func(r supervisor.Reader) error { pubs, _ = r.Publishes(); return nil })
	if len(pubs) != 1 {
		t.Errorf("a second recovery recorded the publish again: %d publishes", len(pubs))
	}
}

// crashAfterLanding dies the moment a publish has moved the head, before the
// supervisor can record it.
type crashAfterLanding struct{ inner supervisor.Publisher }

func (c crashAfterLanding) Publish(req supervisor.PublishRequest) (supervisor.PublishResult, error) {
	res, err := c.inner.Publish(req)
	if res.NewHead != "" {
		os.Exit(7)
	}
	return res, err
}

// TestCrashAfterHeadMoveHelper is the supervisor process the crash test kills.
func TestCrashAfterHeadMoveHelper(t *testing.T) {
	dir := os.Getenv("CORRAL_CRASH_SV_REPO")
	if dir == "" {
		t.Skip("the crash test's helper process")
	}
	repo, err := sandbox.OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(repo.StateDir, "fleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := supervisor.New(supervisor.Config{Repo: repo, Store: db,
		Publisher: crashAfterLanding{&supervisor.GitPublisher{Repo: repo, HeadRef: "corral/head"}},
		Fleet:     supervisor.Fleet{Name: "test", BaseRef: "main", HeadRef: "corral/head", Admission: supervisor.Admission{MaxRunning: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.AddTasks(supervisor.Task{ID: "land", Prompt: "land", Agent: "echo landed > landed.txt", Lifetime: supervisor.OneShot}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sv.RunUntilDone(ctx)
	t.Fatal("the fleet finished without the publish landing")
}
