package store

import (
	"database/sql"
	"errors"
	"fmt"
	"time"

	"corral/supervisor"
)

// reader implements supervisor.Reader over a transaction: a read-only one in View, the
// group's write transaction in Update.
type reader struct {
	q querier
}

var _ supervisor.Reader = reader{}

// The statements, built once from the column lists in columns.go.
var (
	selectFleet     = selectFrom("fleet", fleetCols) + " WHERE id = 1"
	selectTask      = selectFrom("tasks", taskCols) + " WHERE id = ?"
	selectTasks     = selectFrom("tasks", taskCols) + " ORDER BY created, rowid"
	selectSession   = selectFrom("sessions", sessionCols) + " WHERE id = ?"
	selectSessions  = selectFrom("sessions", sessionCols) + " ORDER BY started, rowid"
	selectLeases    = selectFrom("leases", leaseCols) + " ORDER BY id"
	selectHeld      = selectFrom("leases", leaseCols) + " WHERE ended IS NULL ORDER BY id"
	selectUsage     = selectFrom("usage", usageCols) + " WHERE session = ? AND time >= ? ORDER BY time, rowid"
	selectPublishes = selectFrom("publishes", publishCols) + " ORDER BY id"
	selectConflicts = selectFrom("conflicts", conflictCols) + " WHERE publish = ? ORDER BY id"
	selectApprovals = selectFrom("approvals", approvalCols) + " ORDER BY id"
	selectCalls     = selectFrom("model_calls", modelCallCols) + " ORDER BY id"
	selectCallsOf   = selectFrom("model_calls", modelCallCols) + " WHERE session = ? ORDER BY id"
	selectLaneRuns  = selectFrom("lane_runs", laneRunCols) + " ORDER BY id"
	selectEvents    = selectFrom("events", eventCols) + " WHERE seq > ? ORDER BY seq LIMIT ?"
)

// selectLatestUsage finds each live session's newest sample through the (session, time)
// index: one index probe per live session, however long the history is.
var selectLatestUsage = `SELECT ` + qualified("u", usageCols) + `
FROM sessions s
JOIN usage u ON u.rowid = (
	SELECT rowid FROM usage WHERE session = s.id ORDER BY time DESC, rowid DESC LIMIT 1)
WHERE s.state IN (?, ?, ?)
ORDER BY s.started, s.rowid`

func qualified(alias string, cols []string) string {
	s := ""
	for i, c := range cols {
		if i > 0 {
			s += ", "
		}
		s += alias + "." + c
	}
	return s
}

// one reads a single record, mapping "no row" to supervisor.ErrNotFound.
func one[T any](q querier, what string, scan func(scanner) (T, error), query string, args ...any) (T, error) {
	v, err := scan(q.QueryRow(query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return v, fmt.Errorf("store: %s: %w", what, supervisor.ErrNotFound)
	}
	if err != nil {
		return v, fmt.Errorf("store: read %s: %w", what, err)
	}
	return v, nil
}

// list reads every row of a query, in the query's order.
func list[T any](q querier, what string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list %s: %w", what, err)
	}
	defer rows.Close()
	var vs []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list %s: %w", what, err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list %s: %w", what, err)
	}
	return vs, nil
}

// Fleet returns the fleet, or ErrNotFound before PutFleet.
func (r reader) Fleet() (supervisor.Fleet, error) {
	return one(r.q, "fleet", scanFleet, selectFleet)
}

// Task returns one task by id.
func (r reader) Task(id string) (supervisor.Task, error) {
	return one(r.q, fmt.Sprintf("task %q", id), scanTask, selectTask, id)
}

// Tasks returns every task by creation time, ties in insertion order.
func (r reader) Tasks() ([]supervisor.Task, error) {
	return list(r.q, "tasks", scanTask, selectTasks)
}

// Session returns one session by id.
func (r reader) Session(id string) (supervisor.Session, error) {
	return one(r.q, fmt.Sprintf("session %q", id), scanSession, selectSession, id)
}

// Sessions returns every session by start time, ties in insertion order.
func (r reader) Sessions() ([]supervisor.Session, error) {
	return list(r.q, "sessions", scanSession, selectSessions)
}

// Leases returns leases by id; with active, only those not yet ended.
func (r reader) Leases(active bool) ([]supervisor.Lease, error) {
	if active {
		return list(r.q, "held leases", scanLease, selectHeld)
	}
	return list(r.q, "leases", scanLease, selectLeases)
}

// Usage returns a session's samples at or after since, oldest first; a zero since
// returns them all.
func (r reader) Usage(session string, since time.Time) ([]supervisor.Usage, error) {
	from := int64(-1 << 63)
	if !since.IsZero() {
		from = since.UnixNano()
	}
	return list(r.q, fmt.Sprintf("usage of %q", session), scanUsage, selectUsage, session, from)
}

// LatestUsage returns the newest sample of each live (starting, running or paused)
// session that has one, in session start order.
func (r reader) LatestUsage() ([]supervisor.Usage, error) {
	return list(r.q, "latest usage", scanUsage, selectLatestUsage,
		string(supervisor.SessionStarting), string(supervisor.SessionRunning), string(supervisor.SessionPaused))
}

// Publishes returns every publish by id, which is the order they were offered.
func (r reader) Publishes() ([]supervisor.Publish, error) {
	return list(r.q, "publishes", scanPublish, selectPublishes)
}

// Conflicts returns one publish's conflicts in the order they were added.
func (r reader) Conflicts(publish int64) ([]supervisor.Conflict, error) {
	return list(r.q, fmt.Sprintf("conflicts of publish %d", publish), scanConflict, selectConflicts, publish)
}

// ModelCalls returns a session's metered calls ("" for all), in recorded order.
func (r reader) ModelCalls(session string) ([]supervisor.ModelCall, error) {
	if session == "" {
		return list(r.q, "model calls", scanModelCall, selectCalls)
	}
	return list(r.q, fmt.Sprintf("model calls of %q", session), scanModelCall, selectCallsOf, session)
}

// Approvals returns every decision by id.
func (r reader) Approvals() ([]supervisor.Approval, error) {
	return list(r.q, "approvals", scanApproval, selectApprovals)
}

// LaneRuns returns the lane's runs by id.
func (r reader) LaneRuns() ([]supervisor.LaneRun, error) {
	return list(r.q, "lane runs", scanLaneRun, selectLaneRuns)
}

// Intents returns each task's declared globs in declaration order; tasks that declared
// none are absent from the map.
func (r reader) Intents() (map[string][]string, error) {
	type row struct{ task, glob string }
	rows, err := list(r.q, "intents", func(s scanner) (row, error) {
		var v row
		return v, s.Scan(&v.task, &v.glob)
	}, `SELECT task, glob FROM intents ORDER BY task, pos`)
	if err != nil {
		return nil, err
	}
	m := make(map[string][]string)
	for _, v := range rows {
		m[v.task] = append(m[v.task], v.glob)
	}
	return m, nil
}

// Events returns up to limit events with Seq > after, in sequence order; a limit of
// zero or less means no limit.
func (r reader) Events(after int64, limit int) ([]supervisor.Event, error) {
	if limit <= 0 {
		limit = -1 // SQLite: a negative LIMIT is no limit
	}
	return list(r.q, fmt.Sprintf("events after %d", after), scanEvent, selectEvents, after, limit)
}

// AllConflicts returns every conflict by publish, in one query (replay loads a whole
// run's at once).
func (r reader) AllConflicts() (map[int64][]supervisor.Conflict, error) {
	cs, err := list(r.q, "conflicts", scanConflict, selectFrom("conflicts", conflictCols)+" ORDER BY id")
	if err != nil {
		return nil, err
	}
	m := map[int64][]supervisor.Conflict{}
	for _, c := range cs {
		m[c.Publish] = append(m[c.Publish], c)
	}
	return m, nil
}
