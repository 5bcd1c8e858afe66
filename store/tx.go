package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"corral/supervisor"
)

// writeTx is the supervisor.Tx handed to one Update's fn. Its writes go straight into
// the group's transaction, inside fn's savepoint.
type writeTx struct {
	reader
	db     *DB
	events []supervisor.Event // emitted so far, with Seq and Time assigned
	err    error              // first Emit failure; Emit has no error result
}

var _ supervisor.Tx = (*writeTx)(nil)

var (
	upsertFleet    = upsert("fleet", "id", fleetCols...)
	upsertTask     = upsert("tasks", "id", taskCols...)
	upsertSession  = upsert("sessions", "id", sessionCols...)
	upsertPublish  = upsert("publishes", "id", publishCols...)
	insertLease    = insert("leases", leaseCols...)
	insertUsage    = insert("usage", usageCols...)
	insertPublish  = insert("publishes", publishCols...)
	insertConflict = insert("conflicts", conflictCols...)
	insertApproval = insert("approvals", approvalCols...)
	insertCall     = insert("model_calls", modelCallCols...)
	insertLaneRun  = insert("lane_runs", laneRunCols...)
	upsertLaneRun  = upsert("lane_runs", "id", laneRunCols...)
	insertEvent    = insert("events", eventCols[1:]...) // seq is assigned by SQLite
	insertIntent   = insert("intents", "task", "pos", "glob")
)

// PutFleet creates or replaces the fleet.
func (t *writeTx) PutFleet(f supervisor.Fleet) error {
	args, err := fleetArgs(f)
	if err != nil {
		return fmt.Errorf("store: put fleet %q: %w", f.Name, err)
	}
	if _, err := t.q.Exec(upsertFleet, args...); err != nil {
		return fmt.Errorf("store: put fleet %q: %w", f.Name, err)
	}
	return nil
}

// PutTask creates or replaces a task, and its intents rows to match Task.Intent.
func (t *writeTx) PutTask(task supervisor.Task) error {
	if task.ID == "" {
		return errors.New("store: put task: empty id")
	}
	args, err := taskArgs(task)
	if err != nil {
		return fmt.Errorf("store: put task %q: %w", task.ID, err)
	}
	if _, err := t.q.Exec(upsertTask, args...); err != nil {
		return fmt.Errorf("store: put task %q: %w", task.ID, err)
	}
	if err := t.replaceIntents(task.ID, task.Intent); err != nil {
		return fmt.Errorf("store: put task %q: %w", task.ID, err)
	}
	return nil
}

// SetIntents replaces a task's declared globs, both the rows Intents reads and the
// task's Intent field, so the two never disagree. The task must exist.
func (t *writeTx) SetIntents(task string, globs []string) error {
	intent, err := jsonText("intent", globs)
	if err != nil {
		return fmt.Errorf("store: set intents of %q: %w", task, err)
	}
	res, err := t.q.Exec(`UPDATE tasks SET intent = ? WHERE id = ?`, intent, task)
	if err != nil {
		return fmt.Errorf("store: set intents of %q: %w", task, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("store: set intents of task %q: %w", task, supervisor.ErrNotFound)
	}
	if err := t.replaceIntents(task, globs); err != nil {
		return fmt.Errorf("store: set intents of %q: %w", task, err)
	}
	return nil
}

func (t *writeTx) replaceIntents(task string, globs []string) error {
	if _, err := t.q.Exec(`DELETE FROM intents WHERE task = ?`, task); err != nil {
		return err
	}
	for i, g := range globs {
		if _, err := t.q.Exec(insertIntent, task, i, g); err != nil {
			return fmt.Errorf("intent %q: %w", g, err)
		}
	}
	return nil
}

// PutSession creates or replaces a session. Its task must exist.
func (t *writeTx) PutSession(s supervisor.Session) error {
	if s.ID == "" {
		return errors.New("store: put session: empty id")
	}
	if _, err := t.q.Exec(upsertSession, sessionArgs(s)...); err != nil {
		return fmt.Errorf("store: put session %q (task %q): %w", s.ID, s.Task, err)
	}
	return nil
}

// AddLease records a lease and returns its id (l.ID if set, else a new one). Its
// session must exist.
func (t *writeTx) AddLease(l supervisor.Lease) (int64, error) {
	res, err := t.q.Exec(insertLease, leaseArgs(l)...)
	if err != nil {
		return 0, fmt.Errorf("store: add lease of port %d to session %q: %w", l.Port, l.Session, err)
	}
	return res.LastInsertId()
}

// EndLease sets a lease's end; a zero end means now.
func (t *writeTx) EndLease(id int64, end time.Time) error {
	if end.IsZero() {
		end = t.db.now()
	}
	res, err := t.q.Exec(`UPDATE leases SET ended = ? WHERE id = ?`, nanos(end), id)
	if err != nil {
		return fmt.Errorf("store: end lease %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("store: end lease %d: %w", id, supervisor.ErrNotFound)
	}
	return nil
}

// AddUsage appends samples; a zero Time means now. Their sessions must exist.
func (t *writeTx) AddUsage(us ...supervisor.Usage) error {
	for _, u := range us {
		if u.Time.IsZero() {
			u.Time = t.db.now()
		}
		if _, err := t.q.Exec(insertUsage, usageArgs(u)...); err != nil {
			return fmt.Errorf("store: add usage of session %q: %w", u.Session, err)
		}
	}
	return nil
}

// AddPublish records a publish and returns its id (p.ID if set, else a new one). Its
// session must exist.
func (t *writeTx) AddPublish(p supervisor.Publish) (int64, error) {
	args, err := publishArgs(p)
	if err != nil {
		return 0, fmt.Errorf("store: add publish of session %q: %w", p.Session, err)
	}
	res, err := t.q.Exec(insertPublish, args...)
	if err != nil {
		return 0, fmt.Errorf("store: add publish of session %q: %w", p.Session, err)
	}
	return res.LastInsertId()
}

// PutPublish creates or replaces a publish by its (non-zero) id, e.g. to record the
// outcome of one added as queued.
func (t *writeTx) PutPublish(p supervisor.Publish) error {
	if p.ID == 0 {
		return fmt.Errorf("store: put publish of session %q: no id (use AddPublish)", p.Session)
	}
	args, err := publishArgs(p)
	if err != nil {
		return fmt.Errorf("store: put publish %d: %w", p.ID, err)
	}
	if _, err := t.q.Exec(upsertPublish, args...); err != nil {
		return fmt.Errorf("store: put publish %d: %w", p.ID, err)
	}
	return nil
}

// AddConflicts records a rejected publish's conflicts. Their publish must exist.
func (t *writeTx) AddConflicts(cs ...supervisor.Conflict) error {
	for _, c := range cs {
		if _, err := t.q.Exec(insertConflict, conflictArgs(c)...); err != nil {
			return fmt.Errorf("store: add conflict on %q to publish %d: %w", c.Path, c.Publish, err)
		}
	}
	return nil
}

// AddApproval records a decision and returns its id. Its publish must exist.
func (t *writeTx) AddApproval(a supervisor.Approval) (int64, error) {
	res, err := t.q.Exec(insertApproval, approvalArgs(a)...)
	if err != nil {
		return 0, fmt.Errorf("store: add approval of publish %d: %w", a.Publish, err)
	}
	return res.LastInsertId()
}

// AddModelCalls appends metered calls; a zero Time means now. Their sessions must exist.
func (t *writeTx) AddModelCalls(cs ...supervisor.ModelCall) error {
	for _, c := range cs {
		if c.Time.IsZero() {
			c.Time = t.db.now()
		}
		args, err := modelCallArgs(c)
		if err == nil {
			_, err = t.q.Exec(insertCall, args...)
		}
		if err != nil {
			return fmt.Errorf("store: add model call of session %q: %w", c.Session, err)
		}
	}
	return nil
}

// AddLaneRun records a lane run and returns its id.
func (t *writeTx) AddLaneRun(r supervisor.LaneRun) (int64, error) {
	args, err := laneRunArgs(r)
	if err != nil {
		return 0, fmt.Errorf("store: add lane run of %.12s: %w", r.Commit, err)
	}
	res, err := t.q.Exec(insertLaneRun, args...)
	if err != nil {
		return 0, fmt.Errorf("store: add lane run of %.12s: %w", r.Commit, err)
	}
	return res.LastInsertId()
}

// PutLaneRun replaces a lane run by its (non-zero) id, e.g. with its outcome.
func (t *writeTx) PutLaneRun(r supervisor.LaneRun) error {
	if r.ID == 0 {
		return fmt.Errorf("store: put lane run of %.12s: no id (use AddLaneRun)", r.Commit)
	}
	args, err := laneRunArgs(r)
	if err != nil {
		return fmt.Errorf("store: put lane run %d: %w", r.ID, err)
	}
	if _, err := t.q.Exec(upsertLaneRun, args...); err != nil {
		return fmt.Errorf("store: put lane run %d: %w", r.ID, err)
	}
	return nil
}

// Emit appends an event in this transaction, so it commits with the state change it
// describes or not at all. A zero Time means now. Emit has no error result: a failure
// is kept and fails the whole Update, and later Emits are skipped.
func (t *writeTx) Emit(e supervisor.Event) {
	if t.err != nil {
		return
	}
	if e.Kind == "" {
		t.err = fmt.Errorf("store: emit: event has no kind (task %q, session %q)", e.Task, e.Session)
		return
	}
	var data any // NULL for no data
	if len(e.Data) > 0 {
		if !json.Valid(e.Data) {
			t.err = fmt.Errorf("store: emit %s: data is not valid JSON: %.80q", e.Kind, e.Data)
			return
		}
		data = string(e.Data)
	}
	if e.Time.IsZero() {
		e.Time = t.db.now().UTC() // as a read returns it (UTC() also drops the monotonic reading)
	}
	res, err := t.q.Exec(insertEvent, nanos(e.Time), e.Kind, e.Task, e.Session, data)
	if err == nil {
		e.Seq, err = res.LastInsertId()
	}
	if err != nil {
		t.err = fmt.Errorf("store: emit %s: %w", e.Kind, err)
		return
	}
	t.events = append(t.events, e)
}
