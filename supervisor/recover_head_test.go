package supervisor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	sv := openCrashFleet(t, dir, 1, func(repo sandbox.Repo) supervisor.Publisher {
		return crashAfterLanding{&supervisor.GitPublisher{Repo: repo, HeadRef: "corral/head"}}
	})
	if err := sv.AddTasks(supervisor.Task{ID: "land", Prompt: "land", Agent: "echo landed > landed.txt", Lifetime: supervisor.OneShot}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sv.RunUntilDone(ctx)
	t.Fatal("the fleet finished without the publish landing")
}

// TestSupervisorKilledAtRandomStoreAgreesWithHead SIGKILLs a supervisor publishing a
// stream of one-shot tasks at random moments, again and again. After each kill a new
// supervisor opens the fleet, and then the store and the head must agree: every commit
// on the head since the base is one recorded publish of the session its trailer names,
// in order, and no recorded publish moved the head to a commit it does not have.
func TestSupervisorKilledAtRandomStoreAgreesWithHead(t *testing.T) {
	f := newFixture(t)
	self, _ := os.Executable()
	base := git(t, f.repo.WorkTree, "rev-parse", "HEAD")
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for round := 0; round < 6; round++ {
		cmd := exec.Command(self, "-test.run=^TestSupervisorKilledHelper$")
		cmd.Env = append(os.Environ(), "CORRAL_CRASH_SV_REPO="+f.repo.WorkTree, fmt.Sprintf("CORRAL_CRASH_ROUND=%d", round))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(300+rng.Intn(1200)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()

		f.supervisor(supervisor.Admission{MaxRunning: 4}) // opening the fleet recovers it
		var pubs []supervisor.Publish
		var fl supervisor.Fleet
		f.store.View(func(r supervisor.Reader) error {
			pubs, _ = r.Publishes()
			fl, _ = r.Fleet()
			return nil
		})
		head := git(t, f.repo.WorkTree, "rev-parse", "corral/head")
		if fl.Head != head {
			t.Fatalf("round %d: store head %.12s, ref %.12s", round, fl.Head, head)
		}
		var landed []string // "commit session" of each head commit, oldest first
		if out := git(t, f.repo.WorkTree, "log", "--reverse", "--format=%H %(trailers:key=Corral-Session,valueonly,separator=)", base+".."+head); out != "" {
			landed = strings.Split(out, "\n")
		}
		var recorded []string
		for _, p := range pubs {
			if p.NewHead != "" {
				recorded = append(recorded, p.NewHead+" "+p.Session)
			}
		}
		if strings.Join(landed, "\n") != strings.Join(recorded, "\n") {
			t.Fatalf("round %d: head history and recorded publishes differ\nhead:\n%s\nstore:\n%s", round, strings.Join(landed, "\n"), strings.Join(recorded, "\n"))
		}
		t.Logf("round %d: %d publishes on the head, store agrees", round, len(landed))
	}
	git(t, f.repo.WorkTree, "fsck", "--strict", "--no-dangling", "--no-progress")
}

// TestSupervisorKilledHelper is the supervisor process the random-kill test kills: it
// queues a round of tasks that each add their own file, and runs them.
func TestSupervisorKilledHelper(t *testing.T) {
	dir, round := os.Getenv("CORRAL_CRASH_SV_REPO"), os.Getenv("CORRAL_CRASH_ROUND")
	if dir == "" || round == "" {
		t.Skip("the random-kill test's helper process")
	}
	sv := openCrashFleet(t, dir, 4, nil)
	var tasks []supervisor.Task
	for i := 0; i < 40; i++ {
		tasks = append(tasks, supervisor.Task{ID: fmt.Sprintf("r%s-%d", round, i), Prompt: "add a file", Lifetime: supervisor.OneShot,
			Agent: `echo "$CORRAL_TASK" > "f-$CORRAL_TASK.txt"`})
	}
	if err := sv.AddTasks(tasks...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sv.RunUntilDone(ctx)
}

// openCrashFleet opens, in a helper process, the fleet whose repository the parent
// test made: its store, and a supervisor with publisher(repo) (nil: the default).
func openCrashFleet(t *testing.T, dir string, running int, publisher func(sandbox.Repo) supervisor.Publisher) *supervisor.Supervisor {
	t.Helper()
	repo, err := sandbox.OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(repo.StateDir, "fleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := supervisor.Config{Repo: repo, Store: db,
		Fleet: supervisor.Fleet{Name: "test", BaseRef: "main", HeadRef: "corral/head", Admission: supervisor.Admission{MaxRunning: running}}}
	if publisher != nil {
		cfg.Publisher = publisher(repo)
	}
	sv, err := supervisor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sv
}
