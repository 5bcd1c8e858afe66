package store

import (
	"database/sql"
	"fmt"

	"corral/supervisor"
)

// maxGroup bounds how many Updates share one transaction, so one commit cannot grow
// without limit under a burst, and how many can queue before Update callers block.
const maxGroup = 128

// request is one Update waiting for the writer.
type request struct {
	fn   func(supervisor.Tx) error
	done chan struct{} // closed when the fields below are final

	events   []supervisor.Event
	err      error
	panicked any // fn's panic, re-raised in the caller's goroutine
	failed   bool
}

// Update queues fn for the writer goroutine and waits for its transaction to commit.
//
// Group commit: the writer takes every Update already queued (up to maxGroup) into one
// transaction and runs each fn inside its own SAVEPOINT. A fn that returns an error (or
// panics) is rolled back to its savepoint alone; the others commit together. When the
// writer is idle a lone Update commits at once — batching comes only from Updates that
// arrive while a commit is in progress, so it never adds latency.
//
// fn runs on the writer goroutine: it must not block, call Update (deadlock) or keep
// the Tx after returning. Reads through the Tx see the group's earlier writes.
func (db *DB) Update(fn func(supervisor.Tx) error) ([]supervisor.Event, error) {
	req := &request{fn: fn, done: make(chan struct{})}
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return nil, fmt.Errorf("store %s: update: %w", db.path, ErrClosed)
	}
	db.reqs <- req // the writer drains reqs until Close has closed it, so this returns
	db.mu.RUnlock()
	<-req.done
	if req.panicked != nil {
		panic(req.panicked)
	}
	if req.failed {
		return nil, req.err
	}
	return req.events, nil
}

// run is the writer goroutine. It ends when Close closes reqs and the queue is empty.
func (db *DB) run() {
	defer close(db.stopped)
	group := make([]*request, 0, maxGroup)
	for req := range db.reqs {
		group = append(group[:0], req)
	fill:
		for len(group) < maxGroup {
			select {
			case r, ok := <-db.reqs:
				if !ok {
					break fill
				}
				group = append(group, r)
			default:
				break fill
			}
		}
		db.commit(group)
		for _, r := range group {
			close(r.done)
		}
		clear(group) // drop references to finished requests
	}
}

// commit runs one group in one transaction and fills in every request's result.
func (db *DB) commit(group []*request) {
	tx, err := db.w.Begin()
	if err != nil {
		failAll(group, fmt.Errorf("store %s: begin: %w", db.path, err))
		return
	}
	// A group of one needs no savepoint: if its fn fails the whole transaction is
	// rolled back instead. SAVEPOINT and RELEASE cost two statements per Update, about
	// a fifth of a lone single-event Update.
	solo := len(group) == 1
	for _, r := range group {
		if err := db.apply(tx, r, !solo); err != nil {
			// The transaction itself is broken (SQLite rolls it back whole on
			// errors like SQLITE_FULL or IOERR): nothing of the group is kept.
			tx.Rollback()
			failAll(group, err)
			return
		}
	}
	if solo && group[0].failed {
		if err := tx.Rollback(); err != nil {
			group[0].err = fmt.Errorf("%w (and rolling back: store %s: %v)", group[0].err, db.path, err)
		}
		return
	}
	if err := tx.Commit(); err != nil {
		failAll(group, fmt.Errorf("store %s: commit: %w", db.path, err))
		return
	}
	db.groups.Add(1)
	db.updates.Add(int64(len(group)))
}

// failAll gives err to every request that has not already failed on its own.
func failAll(group []*request, err error) {
	for _, r := range group {
		if !r.failed {
			r.failed, r.err, r.events = true, err, nil
		}
	}
}

// apply runs one request's fn, inside a savepoint if asked. It returns an error only
// when the enclosing transaction can no longer be trusted; fn's own failure is recorded
// on r, and without a savepoint the caller must roll the transaction back.
func (db *DB) apply(tx *sql.Tx, r *request, savepoint bool) error {
	if savepoint {
		if _, err := tx.Exec(`SAVEPOINT fn`); err != nil {
			return fmt.Errorf("store %s: savepoint: %w", db.path, err)
		}
	}
	t := &writeTx{reader: reader{q: tx}, db: db}
	err, panicked := call(r.fn, t)
	if err == nil && panicked == nil {
		err = t.err // Emit cannot return its error; it is raised here
	}
	if err == nil && panicked == nil {
		if savepoint {
			if _, err := tx.Exec(`RELEASE fn`); err != nil {
				return fmt.Errorf("store %s: release savepoint: %w", db.path, err)
			}
		}
		r.events = t.events
		return nil
	}
	r.failed, r.err, r.panicked = true, err, panicked
	if !savepoint {
		return nil
	}
	// ROLLBACK TO undoes fn's writes but leaves the savepoint open; RELEASE closes it.
	if _, err := tx.Exec(`ROLLBACK TO fn`); err != nil {
		return fmt.Errorf("store %s: roll back a failed update: %w", db.path, err)
	}
	if _, err := tx.Exec(`RELEASE fn`); err != nil {
		return fmt.Errorf("store %s: release savepoint: %w", db.path, err)
	}
	return nil
}

// call runs fn, turning a panic into a value so the writer goroutine survives it.
func call(fn func(supervisor.Tx) error, t *writeTx) (err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	return fn(t), nil
}
