package store

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"corral/supervisor"
)

// Every record type goes in through Update and comes back out through View unchanged,
// including nil vs empty slices, zero vs set times, and a nil vs set ExitCode.
func TestRecordsRoundTrip(t *testing.T) {
	db := openTest(t)
	code := 3
	fleet := supervisor.Fleet{Name: "shop", Repo: "/src/shop", BaseRef: "main", Base: "abc", HeadRef: "corral/head",
		Head: "def", Plan: "plan.toml", Test: "go test ./...", Created: t0,
		Admission: supervisor.Admission{MaxRunning: 8, CPU: 3.5, Memory: 8 << 30, Interval: 1500 * time.Millisecond, Overlap: "serialize"}}
	full := supervisor.Task{ID: "checkout", Prompt: "fix the cart", Agent: `claude -p "$CORRAL_PROMPT"`,
		Lifetime: supervisor.Persistent, Intent: []string{"cart/**", "pricing/*.go"}, Ports: []int{4173, 5173},
		CPU: 1.5, Memory: 2 << 30, Pids: 512, Network: "private", EnvFiles: []string{".env"}, Priority: 7,
		After: []string{"schema"}, Retries: 2, State: supervisor.TaskRunning, Attempts: 1, Reason: "why not",
		Created: t0, Updated: t0.Add(time.Minute)}
	bare := supervisor.Task{ID: "bare", Intent: []string{}, Created: t0.Add(time.Second)} // empty, nil, zero
	live := supervisor.Session{ID: "checkout-1", Task: "checkout", Attempt: 1, Base: "abc",
		State: supervisor.SessionRunning, Pid: 4242, Cgroup: "/corral/checkout-1", Layer: "/l/1", Recording: "/r/1.cast",
		Started: t0}
	exited := supervisor.Session{ID: "checkout-2", Task: "checkout", Attempt: 2, State: supervisor.SessionFailed,
		ExitCode: &code, Started: t0.Add(time.Second), Ended: t0.Add(time.Hour), Resumes: "checkout-1"}
	zeroExit := 0
	clean := supervisor.Session{ID: "bare-1", Task: "bare", Attempt: 1, State: supervisor.SessionExited,
		ExitCode: &zeroExit, Started: t0.Add(2 * time.Second)}
	held := supervisor.Lease{Session: "checkout-1", Task: "checkout", Port: 4173, Endpoint: "127.0.0.1:41234", Start: t0}
	done := supervisor.Lease{Session: "checkout-1", Task: "checkout", Name: "db", Port: 5432, Endpoint: "127.0.0.1:41235", Start: t0}
	samples := []supervisor.Usage{
		{Session: "checkout-1", Time: t0, CPU: time.Second, CPUPercent: 12.5, Memory: 1 << 62, MemoryPeak: 1<<63 + 1,
			OOMKills: 1, Throttled: time.Millisecond, Pids: 9},
		{Session: "checkout-1", Time: t0.Add(time.Second), CPU: 2 * time.Second, Memory: 2},
		{Session: "checkout-2", Time: t0.Add(time.Second), Memory: 3},
	}
	queued := supervisor.Publish{Task: "checkout", Session: "checkout-1", Outcome: "queued", Base: "abc", Head: "def"}
	rejected := supervisor.Publish{Task: "checkout", Session: "checkout-2", Outcome: "rejected", Base: "abc", Head: "def",
		Paths: []string{"cart/a.go", "CHANGELOG.md"}, Message: "fix", Time: t0}

	var ids struct{ held, done, queued, rejected, approval int64 }
	update(t, db, func(tx supervisor.Tx) error {
		var err error
		must := func(e error) {
			if err == nil {
				err = e
			}
		}
		must(tx.PutFleet(fleet))
		must(tx.PutTask(full))
		must(tx.PutTask(bare))
		must(tx.PutSession(live))
		must(tx.PutSession(exited))
		must(tx.PutSession(clean))
		var e error
		ids.held, e = tx.AddLease(held)
		must(e)
		ids.done, e = tx.AddLease(done)
		must(e)
		must(tx.EndLease(ids.done, t0.Add(time.Minute)))
		must(tx.AddUsage(samples...))
		ids.queued, e = tx.AddPublish(queued)
		must(e)
		ids.rejected, e = tx.AddPublish(rejected)
		must(e)
		must(tx.AddConflicts(
			supervisor.Conflict{Publish: ids.rejected, Path: "cart/a.go", Class: "content", Base: "b1", Ours: "o1", Theirs: "t1", MovedBy: ids.queued},
			supervisor.Conflict{Publish: ids.rejected, Path: "CHANGELOG.md", Class: "add-add"}))
		ids.approval, e = tx.AddApproval(supervisor.Approval{Publish: ids.rejected, Decision: "deny", Reason: "risky", Time: t0})
		must(e)
		return err
	})
	held.ID, done.ID, done.End = ids.held, ids.done, t0.Add(time.Minute)
	queued.ID, rejected.ID = ids.queued, ids.rejected

	view(t, db, func(r supervisor.Reader) error {
		check(t, "fleet", fleet)(r.Fleet())
		check(t, "task", full)(r.Task("checkout"))
		check(t, "tasks", []supervisor.Task{full, bare})(r.Tasks())
		check(t, "session", exited)(r.Session("checkout-2"))
		check(t, "sessions", []supervisor.Session{live, exited, clean})(r.Sessions())
		check(t, "leases", []supervisor.Lease{held, done})(r.Leases(false))
		check(t, "held leases", []supervisor.Lease{held})(r.Leases(true))
		check(t, "usage", samples[:2])(r.Usage("checkout-1", time.Time{}))
		check(t, "usage since", samples[1:2])(r.Usage("checkout-1", t0.Add(time.Nanosecond)))
		check(t, "latest usage", []supervisor.Usage{samples[1]})(r.LatestUsage()) // checkout-2 is not live
		check(t, "publishes", []supervisor.Publish{queued, rejected})(r.Publishes())
		check(t, "conflicts", []supervisor.Conflict{
			{ID: 1, Publish: ids.rejected, Path: "cart/a.go", Class: "content", Base: "b1", Ours: "o1", Theirs: "t1", MovedBy: ids.queued},
			{ID: 2, Publish: ids.rejected, Path: "CHANGELOG.md", Class: "add-add"}})(r.Conflicts(ids.rejected))
		check(t, "approvals", []supervisor.Approval{{ID: ids.approval, Publish: ids.rejected, Decision: "deny", Reason: "risky", Time: t0}})(r.Approvals())
		check(t, "intents", map[string][]string{"checkout": {"cart/**", "pricing/*.go"}})(r.Intents())
		if _, err := r.Task("nope"); !errors.Is(err, supervisor.ErrNotFound) {
			t.Errorf("Task(nope): %v, want ErrNotFound", err)
		}
		if _, err := r.Session("nope"); !errors.Is(err, supervisor.ErrNotFound) {
			t.Errorf("Session(nope): %v, want ErrNotFound", err)
		}
		return nil
	})

	// Put replaces by id; SetIntents keeps the task and the intents rows in step.
	full.State, full.Attempts, exited.ExitCode = supervisor.TaskDone, 2, nil
	queued.Outcome, queued.NewHead = "accepted", "fed"
	update(t, db, func(tx supervisor.Tx) error {
		if err := tx.PutTask(full); err != nil {
			return err
		}
		if err := tx.SetIntents("checkout", []string{"docs/**"}); err != nil {
			return err
		}
		if err := tx.PutSession(exited); err != nil {
			return err
		}
		return tx.PutPublish(queued)
	})
	full.Intent = []string{"docs/**"}
	view(t, db, func(r supervisor.Reader) error {
		check(t, "replaced task", full)(r.Task("checkout"))
		check(t, "replaced tasks order", []supervisor.Task{full, bare})(r.Tasks())
		check(t, "replaced session", exited)(r.Session("checkout-2"))
		check(t, "replaced publishes", []supervisor.Publish{queued, rejected})(r.Publishes())
		check(t, "set intents", map[string][]string{"checkout": {"docs/**"}})(r.Intents())
		return nil
	})
}

// Missing targets and invalid input are errors that name the record, and roll back
// only the Update that made them.
func TestWriteErrors(t *testing.T) {
	db := openTest(t)
	update(t, db, func(tx supervisor.Tx) error { return tx.PutTask(task("a")) })
	for name, fn := range map[string]func(tx supervisor.Tx) error{
		"session of unknown task": func(tx supervisor.Tx) error { return tx.PutSession(session("x-1", "x")) },
		"set intents of unknown":  func(tx supervisor.Tx) error { return tx.SetIntents("x", []string{"a"}) },
		"end unknown lease":       func(tx supervisor.Tx) error { return tx.EndLease(99, t0) },
		"put publish without id":  func(tx supervisor.Tx) error { return tx.PutPublish(supervisor.Publish{Session: "a-1"}) },
		"task without id":         func(tx supervisor.Tx) error { return tx.PutTask(supervisor.Task{}) },
		"conflict of no publish":  func(tx supervisor.Tx) error { return tx.AddConflicts(supervisor.Conflict{Publish: 7}) },
		"event without kind":      func(tx supervisor.Tx) error { tx.Emit(supervisor.Event{Task: "a"}); return nil },
		"event with bad data": func(tx supervisor.Tx) error {
			tx.Emit(supervisor.Event{Kind: "task.queued", Data: json.RawMessage(`{"oops"`)})
			return nil
		},
	} {
		evs, err := db.Update(func(tx supervisor.Tx) error {
			tx.Emit(supervisor.Event{Kind: "before.error"})
			if err := tx.PutTask(task("b")); err != nil {
				return err
			}
			return fn(tx)
		})
		if err == nil || evs != nil {
			t.Errorf("%s: Update = %v, %v; want an error", name, evs, err)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
	view(t, db, func(r supervisor.Reader) error {
		check(t, "events", []supervisor.Event(nil))(r.Events(0, 0))
		if _, err := r.Task("b"); !errors.Is(err, supervisor.ErrNotFound) {
			t.Errorf("a failed Update's task was kept: %v", err)
		}
		return nil
	})
}

// check compares a reader's result with want, for use as check(t, what, want)(r.X()).
func check[T any](t *testing.T, what string, want T) func(T, error) {
	t.Helper()
	return func(got T, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
		}
	}
}
