package store

import (
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"corral/supervisor"
)

// TestMain fails the package if a test leaves the writer goroutine (or a database/sql
// opener) running: every DB must be closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 has nanoseconds so a truncation anywhere shows.
var t0 = time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)

// fixedClock always returns t0, so assigned times are predictable.
func fixedClock() func() time.Time {
	return func() time.Time { return t0 }
}

// openTest opens a fresh database in the test's temp dir and closes it at cleanup.
func openTest(t testing.TB, opts ...Option) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "corral", "fleet.db"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

// update runs Update and fails the test on error.
func update(t testing.TB, db *DB, fn func(supervisor.Tx) error) []supervisor.Event {
	t.Helper()
	evs, err := db.Update(fn)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// view runs View and fails the test on error.
func view(t testing.TB, db *DB, fn func(supervisor.Reader) error) {
	t.Helper()
	if err := db.View(fn); err != nil {
		t.Fatal(err)
	}
}

// holdWriter parks the writer goroutine inside an Update until the returned release is
// called, so Updates queued meanwhile are committed as one group.
func holdWriter(t *testing.T, db *DB) (release func()) {
	t.Helper()
	entered, gate, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		if _, err := db.Update(func(supervisor.Tx) error {
			close(entered)
			<-gate
			return nil
		}); err != nil {
			t.Error(err)
		}
	}()
	<-entered
	return func() { close(gate); <-done }
}

// waitQueued waits until n Updates are queued for the writer.
func waitQueued(t *testing.T, db *DB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(db.reqs) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d updates queued after 10s, want %d", len(db.reqs), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func task(id string) supervisor.Task {
	return supervisor.Task{ID: id, Prompt: "do " + id, Agent: "true", Lifetime: supervisor.OneShot,
		State: supervisor.TaskQueued, Created: t0}
}

func session(id, task string) supervisor.Session {
	return supervisor.Session{ID: id, Task: task, Attempt: 1, State: supervisor.SessionRunning, Started: t0}
}
