package store

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"corral/supervisor"
)

// ReadOnly is a fleet database opened for reading only, by replay, reports and gc: it
// never migrates, never writes, and SQLite itself refuses writes through it (mode=ro).
// It may be opened while a supervisor runs the fleet: in WAL mode its reads see the
// last commit and never block the writer.
type ReadOnly struct {
	path string
	r    *sql.DB
}

// OpenReadOnly opens an existing database. A database from a newer corral, or a
// file that is not one, is refused.
func OpenReadOnly(path string) (*ReadOnly, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	r, err := sql.Open("sqlite3", dsn(abs, readerParams))
	if err != nil {
		return nil, fmt.Errorf("store %s: open read-only: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	v, err := schemaVersion(r)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("store %s: not a corral database: %w", path, err)
	}
	if v > len(migrations) {
		r.Close()
		return nil, fmt.Errorf("store %s: schema version %d, this corral knows %d: %w", path, v, len(migrations), ErrNewerSchema)
	}
	return &ReadOnly{path: path, r: r}, nil
}

// Path returns the database file's path as given.
func (db *ReadOnly) Path() string { return db.path }

// View runs fn against one consistent snapshot of the database.
func (db *ReadOnly) View(fn func(supervisor.Reader) error) error {
	tx, err := db.r.Begin()
	if err != nil {
		return fmt.Errorf("store %s: begin read: %w", db.path, err)
	}
	defer tx.Rollback()
	return fn(reader{q: tx})
}

// Close closes the connections.
func (db *ReadOnly) Close() error { return db.r.Close() }

// UsageBefore returns up to n of a session's samples taken at or before t, oldest
// first: what a telemetry pane showed at t. One index range scan, however long the
// session's history.
func (db *ReadOnly) UsageBefore(session string, t time.Time, n int) ([]supervisor.Usage, error) {
	us, err := list(db.r, fmt.Sprintf("usage of %q", session), scanUsage,
		selectFrom("usage", usageCols)+` WHERE session = ? AND time <= ? ORDER BY time DESC, rowid DESC LIMIT ?`,
		session, t.UnixNano(), n)
	for i, j := 0, len(us)-1; i < j; i, j = i+1, j-1 {
		us[i], us[j] = us[j], us[i]
	}
	return us, err
}

// UsageTotal is what a session used over its life.
type UsageTotal struct {
	Session    string
	CPU        time.Duration // cumulative CPU time at its last sample
	MemoryPeak uint64
	Samples    int
}

// UsageTotals returns every session's totals, for reports.
func (db *ReadOnly) UsageTotals() (map[string]UsageTotal, error) {
	rows, err := list(db.r, "usage totals", func(s scanner) (UsageTotal, error) {
		var u UsageTotal
		var cpu, peak int64
		err := s.Scan(&u.Session, &cpu, &peak, &u.Samples)
		u.CPU, u.MemoryPeak = time.Duration(cpu), uint64(peak)
		return u, err
	}, `SELECT session, MAX(cpu), MAX(memory_peak), COUNT(*) FROM usage GROUP BY session`)
	if err != nil {
		return nil, err
	}
	m := make(map[string]UsageTotal, len(rows))
	for _, u := range rows {
		m[u.Session] = u
	}
	return m, nil
}
