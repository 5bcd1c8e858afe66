package store

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"corral/supervisor"
)

var errBoom = errors.New("boom")

// A state change and its event commit together: an Update that writes a task, emits
// its event and then fails leaves neither, while a good Update committed in the same
// group keeps both.
func TestFailedUpdateKeepsNothingGroupKeepsTheRest(t *testing.T) {
	db := openTest(t, WithNow(fixedClock()))
	release := holdWriter(t, db)
	groups, updates := db.groups.Load(), db.updates.Load()

	var wg sync.WaitGroup
	var badEvs, goodEvs []supervisor.Event
	var badErr, goodErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		badEvs, badErr = db.Update(func(tx supervisor.Tx) error {
			if err := tx.PutTask(task("bad")); err != nil {
				return err
			}
			tx.Emit(supervisor.Event{Kind: supervisor.EvTaskQueued, Task: "bad"})
			return errBoom
		})
	}()
	waitQueued(t, db, 1) // bad runs first in the group: its rolled-back event must not reach good's
	go func() {
		defer wg.Done()
		goodEvs, goodErr = db.Update(func(tx supervisor.Tx) error {
			if err := tx.PutTask(task("good")); err != nil {
				return err
			}
			tx.Emit(supervisor.Event{Kind: supervisor.EvTaskQueued, Task: "good"})
			return nil
		})
	}()
	waitQueued(t, db, 2)
	release()
	wg.Wait()

	if !errors.Is(badErr, errBoom) || badEvs != nil {
		t.Errorf("bad Update = %v, %v; want nil, errBoom", badEvs, badErr)
	}
	if goodErr != nil || len(goodEvs) != 1 || goodEvs[0].Seq != 1 || !goodEvs[0].Time.Equal(t0) {
		t.Errorf("good Update = %+v, %v; want one event, seq 1, time t0", goodEvs, goodErr)
	}
	if g, u := db.groups.Load()-groups, db.updates.Load()-updates; g != 2 || u != 3 {
		t.Errorf("%d groups carried %d updates, want the gate alone, then bad and good together (2, 3)", g, u)
	}
	view(t, db, func(r supervisor.Reader) error {
		if _, err := r.Task("bad"); !errors.Is(err, supervisor.ErrNotFound) {
			t.Errorf("the failed Update's task was kept: %v", err)
		}
		if _, err := r.Task("good"); err != nil {
			t.Errorf("the good Update's task: %v", err)
		}
		check(t, "events", goodEvs)(r.Events(0, 0))
		return nil
	})
}

// A panicking fn is rolled back alone and its panic re-raised in its caller; the
// writer goroutine survives.
func TestPanicInUpdate(t *testing.T) {
	db := openTest(t)
	release := holdWriter(t, db)
	var wg sync.WaitGroup
	var recovered any
	var goodErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer func() { recovered = recover() }()
		db.Update(func(tx supervisor.Tx) error {
			tx.Emit(supervisor.Event{Kind: "doomed"})
			panic("fn bug")
		})
	}()
	go func() {
		defer wg.Done()
		_, goodErr = db.Update(func(tx supervisor.Tx) error {
			tx.Emit(supervisor.Event{Kind: "fine"})
			return nil
		})
	}()
	waitQueued(t, db, 2)
	release()
	wg.Wait()
	if recovered != "fn bug" || goodErr != nil {
		t.Fatalf("recovered %v, good Update %v", recovered, goodErr)
	}
	// Alone in its group (no savepoint: the transaction is rolled back instead).
	func() {
		defer func() { recovered = recover() }()
		db.Update(func(tx supervisor.Tx) error {
			tx.Emit(supervisor.Event{Kind: "doomed.alone"})
			panic("lone bug")
		})
	}()
	if recovered != "lone bug" {
		t.Fatalf("lone panic: recovered %v", recovered)
	}
	update(t, db, func(tx supervisor.Tx) error { return nil }) // the writer still runs
	view(t, db, func(r supervisor.Reader) error {
		evs, err := r.Events(0, 0)
		if err != nil || len(evs) != 1 || evs[0].Kind != "fine" {
			t.Errorf("events: %+v, %v; want only fine", evs, err)
		}
		return nil
	})
}

// Reads inside an Update see the writes before them in the same group.
func TestUpdateReadsItsGroup(t *testing.T) {
	db := openTest(t)
	release := holdWriter(t, db)
	var wg sync.WaitGroup
	var seen error
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, err := db.Update(func(tx supervisor.Tx) error { return tx.PutTask(task("first")) })
		if err != nil {
			t.Error(err)
		}
	}()
	waitQueued(t, db, 1)
	go func() {
		defer wg.Done()
		_, seen = db.Update(func(tx supervisor.Tx) error {
			_, err := tx.Task("first")
			return err
		})
	}()
	waitQueued(t, db, 2)
	release()
	wg.Wait()
	if seen != nil {
		t.Errorf("second Update of the group could not read the first's task: %v", seen)
	}
}

// Close commits what was queued before it, then refuses new work; every Update that
// returned success is on disk.
func TestCloseDrainsQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, db)
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, err := db.Update(func(tx supervisor.Tx) error {
				tx.Emit(supervisor.Event{Kind: "queued.before.close"})
				return nil
			})
			errs <- err
		})
	}
	waitQueued(t, db, n)
	closed := make(chan error)
	go func() { closed <- db.Close() }()
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("queued Update: %v", err)
		}
	}
	if _, err := db.Update(func(supervisor.Tx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Update after Close: %v, want ErrClosed", err)
	}
	if err := db.View(func(supervisor.Reader) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("View after Close: %v, want ErrClosed", err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	view(t, db, func(r supervisor.Reader) error {
		evs, err := r.Events(0, 0)
		if err != nil || len(evs) != n {
			t.Errorf("after reopening: %d events, %v; want %d", len(evs), err, n)
		}
		return nil
	})
}
