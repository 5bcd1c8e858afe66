package store

import (
	"bytes"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"corral/supervisor"
)

// TestReadOnlyNeverWrites opens a fleet read-only, beside a writer and after it
// closed: reads see the records, writes are refused by SQLite, and the file does not
// change.
func TestReadOnlyNeverWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	db, err := Open(path, WithNow(fixedClock()))
	if err != nil {
		t.Fatal(err)
	}
	update(t, db, func(tx supervisor.Tx) error {
		if err := tx.PutFleet(supervisor.Fleet{Name: "f", Created: t0}); err != nil {
			return err
		}
		if err := tx.PutTask(supervisor.Task{ID: "a", State: supervisor.TaskRunning, Created: t0}); err != nil {
			return err
		}
		if err := tx.PutSession(supervisor.Session{ID: "a-1", Task: "a", State: supervisor.SessionRunning, Started: t0}); err != nil {
			return err
		}
		var us []supervisor.Usage
		for i := 0; i < 30; i++ {
			us = append(us, supervisor.Usage{Session: "a-1", Time: t0.Add(time.Duration(i) * time.Second), CPU: time.Duration(i) * time.Millisecond, MemoryPeak: uint64(i)})
		}
		if err := tx.AddUsage(us...); err != nil {
			return err
		}
		tx.Emit(supervisor.Event{Kind: supervisor.EvTaskQueued, Task: "a"})
		return nil
	})
	// Beside a live writer (a fleet still running).
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	var h *supervisor.History
	if err := ro.View(func(r supervisor.Reader) error {
		h, err = supervisor.LoadHistory(r)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(h.Tasks) != 1 || len(h.Events) != 1 {
		t.Errorf("history: %d tasks %d events", len(h.Tasks), len(h.Events))
	}
	us, err := ro.UsageBefore("a-1", t0.Add(10*time.Second), 4)
	if err != nil || len(us) != 4 || !us[3].Time.Equal(t0.Add(10*time.Second)) || !us[0].Time.Equal(t0.Add(7*time.Second)) {
		t.Errorf("usage before 10s: %v (%v), want samples 7..10 oldest first", us, err)
	}
	tot, err := ro.UsageTotals()
	if err != nil || tot["a-1"].CPU != 29*time.Millisecond || tot["a-1"].Samples != 30 {
		t.Errorf("usage totals: %+v (%v)", tot, err)
	}
	if _, err := ro.r.Exec(`DELETE FROM tasks`); err == nil {
		t.Errorf("a read-only connection deleted rows")
	}
	ro.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// After the fleet closed: the file stays byte for byte.
	before, _ := os.ReadFile(path)
	ro, err = OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	ro.View(func(r supervisor.Reader) error { _, err := supervisor.LoadHistory(r); return err })
	ro.Close()
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Errorf("reading changed the database file")
	}
}

func TestReadOnlyRefusesStrangers(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenReadOnly(filepath.Join(dir, "missing.db")); err == nil {
		t.Errorf("opened a missing file")
	}
	other := filepath.Join(dir, "other.db")
	raw, _ := sql.Open("sqlite3", other)
	raw.Exec(`CREATE TABLE x (y)`)
	raw.Close()
	if _, err := OpenReadOnly(other); err == nil {
		t.Errorf("opened a database that is not corral's")
	}
	newer := filepath.Join(dir, "newer.db")
	db, err := Open(newer)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw, _ = sql.Open("sqlite3", newer)
	if _, err := raw.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (999, 0)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := OpenReadOnly(newer); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("newer schema: %v, want ErrNewerSchema", err)
	}
}
