package supervisor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
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
	crashLanding(t, f)
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

// The supervisor's recorded head follows landing order: an outcome that arrives
// after a later head was recorded does not take the head back.
func TestAdvanceHeadNeverGoesBack(t *testing.T) {
	f := newFixture(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 1})
	c := []string{sv.Fleet().Head}
	for i := range 3 {
		git(t, f.repo.WorkTree, "commit", "-q", "--allow-empty", "-m", fmt.Sprint("c", i+1))
		c = append(c, git(t, f.repo.WorkTree, "rev-parse", "HEAD"))
	}
	git(t, f.repo.WorkTree, "merge-base", "--is-ancestor", c[0], c[1]) // one line of history
	step := func(res supervisor.PublishResult, want string, why string) {
		t.Helper()
		sv.AdvanceHead(res)
		if got := sv.Fleet().Head; got != want {
			t.Errorf("%s: head %.7s, want %.7s", why, got, want)
		}
	}
	step(supervisor.PublishResult{Head: c[1], NewHead: c[2]}, c[2], "landed second, arrives first")
	step(supervisor.PublishResult{Head: c[0], NewHead: c[1]}, c[2], "landed first, arrives late")
	step(supervisor.PublishResult{Head: c[2], NewHead: c[3]}, c[3], "in order")
	step(supervisor.PublishResult{Outcome: supervisor.OutcomeRejected}, c[3], "a rejection")
}

// A publish's outcome can be recorded after a later one's (an approval lands on the
// loop while the publish's outcome is on its way). If the supervisor dies in between,
// the recorded head is already past the unrecorded commit; recovery looks a few
// publishes back from it and records that one too.
func TestLateOutcomeLostInACrashIsRecorded(t *testing.T) {
	f := newFixture(t)
	crashLanding(t, f)
	landed := git(t, f.repo.WorkTree, "rev-parse", "corral/head")
	// Another publish lands on it and is recorded, with the head, before the first.
	// Between them, a commit of a session this store never had (as on a head reused
	// from an earlier run of the fleet): looking back must not adopt it.
	tree := git(t, f.repo.WorkTree, "rev-parse", landed+"^{tree}")
	ghost := git(t, f.repo.WorkTree, "commit-tree", tree, "-p", landed, "-m",
		"ghost: earlier run\n\nCorral-Task: ghost\nCorral-Session: ghost-1\nCorral-Base: "+landed+"\nCorral-Outcome: accepted")
	later := git(t, f.repo.WorkTree, "commit-tree", tree, "-p", ghost, "-m",
		"other: later\n\nCorral-Task: other\nCorral-Session: other-1\nCorral-Base: "+ghost+"\nCorral-Outcome: accepted")
	git(t, f.repo.WorkTree, "update-ref", "refs/heads/corral/head", later, landed)
	if _, err := f.store.Update(func(tx supervisor.Tx) error {
		if err := tx.PutTask(supervisor.Task{ID: "other", Prompt: "other", Lifetime: supervisor.OneShot,
			State: supervisor.TaskDone, Attempts: 1, Created: time.Now()}); err != nil {
			return err
		}
		if err := tx.PutSession(supervisor.Session{ID: "other-1", Task: "other", Attempt: 1, Base: ghost,
			State: supervisor.SessionPublished, Started: time.Now(), Ended: time.Now()}); err != nil {
			return err
		}
		if _, err := tx.AddPublish(supervisor.Publish{Task: "other", Session: "other-1", Outcome: supervisor.OutcomeAccepted,
			Head: ghost, NewHead: later, Time: time.Now()}); err != nil {
			return err
		}
		fl, err := tx.Fleet()
		if err != nil {
			return err
		}
		fl.Head = later
		return tx.PutFleet(fl)
	}); err != nil {
		t.Fatal(err)
	}

	f.supervisor(supervisor.Admission{MaxRunning: 1})
	var pubs []supervisor.Publish
	var task supervisor.Task
	var fl supervisor.Fleet
	f.store.View(func(r supervisor.Reader) error {
		pubs, _ = r.Publishes()
		task, _ = r.Task("land")
		fl, _ = r.Fleet()
		return nil
	})
	var got []string
	for _, p := range pubs {
		got = append(got, fmt.Sprintf("%s@%.7s", p.Session, p.NewHead))
	}
	if want := []string{"other-1@" + later[:7], "land-1@" + landed[:7]}; !reflect.DeepEqual(got, want) {
		t.Errorf("publishes after recovery %v, want %v", got, want)
	}
	if task.State != supervisor.TaskDone || fl.Head != later {
		t.Errorf("task land %s, recorded head %.7s; want done at %.7s", task.State, fl.Head, later)
	}
}

// crashLanding runs the crash helper: a supervisor that dies right after its publish
// has moved the head, before recording it.
func crashLanding(t *testing.T, f *fixture) {
	t.Helper()
	self, _ := os.Executable()
	cmd := exec.Command(self, "-test.run=^TestCrashAfterHeadMoveHelper$")
	cmd.Env = append(os.Environ(), "CORRAL_CRASH_SV_REPO="+f.repo.WorkTree)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("helper did not die right after the head moved: %v\n%s", err, out)
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
