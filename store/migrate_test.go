package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"corral/supervisor"
)

func TestMigrationsEmbedded(t *testing.T) {
	if len(migrations) < 2 {
		t.Fatalf("%d migrations embedded, want at least 2", len(migrations))
	}
	for i, m := range migrations {
		if m.version != i+1 || strings.TrimSpace(m.sql) == "" {
			t.Errorf("migration %d: version %d, %d bytes of SQL", i, m.version, len(m.sql))
		}
	}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":      {"migrations/0001_a.sql": {Data: []byte("x")}, "migrations/0003_c.sql": {Data: []byte("x")}},
		"unpadded": {"migrations/1_a.sql": {Data: []byte("x")}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: loading did not panic", name)
				}
			}()
			mustLoadMigrations(fsys)
		}()
	}
}

func TestOpenCreatesDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".git", "corral", "fleet.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Path() != path {
		t.Errorf("Path() = %q, want %q", db.Path(), path)
	}
	if v, err := db.SchemaVersion(); err != nil || v != len(migrations) {
		t.Errorf("SchemaVersion() = %d, %v; want %d", v, err, len(migrations))
	}
	// Per-connection settings, read on the writer connection (idle: nothing queued).
	for pragma, want := range map[string]string{"journal_mode": "wal", "synchronous": "1", "foreign_keys": "1"} {
		var got string
		if err := db.w.QueryRow("PRAGMA " + pragma).Scan(&got); err != nil || got != want {
			t.Errorf("writer PRAGMA %s = %q, %v; want %q", pragma, got, err, want)
		}
	}
	if _, err := db.r.Exec(`CREATE TABLE intruder (a)`); err == nil {
		t.Error("a read connection accepted a write")
	}
	view(t, db, func(r supervisor.Reader) error {
		if _, err := r.Fleet(); !errors.Is(err, supervisor.ErrNotFound) {
			t.Errorf("Fleet() on a new database: %v, want ErrNotFound", err)
		}
		return nil
	})
}

// A path with the characters a file: URI gives meaning to must name that exact file.
func TestOpenAwkwardPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "we?ird #%20name.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	update(t, db, func(tx supervisor.Tx) error { return tx.PutTask(task("a")) })
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at its path: %v", err)
	}
}

// An older corral's database (version 1) with data in it is migrated up on open, and
// the data survives.
func TestMigrateUpFromOlderSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	old, err := openAt(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := old.SchemaVersion(); v != 1 {
		t.Fatalf("openAt(1): version %d", v)
	}
	// Rows as version 1 wrote them, in its own columns: today's column lists have
	// columns later migrations add.
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO tasks (id, prompt, agent, lifetime, intent, ports, cpu, memory, pids, network, env_files,
			priority, after_tasks, retries, state, attempts, reason, created, updated)
			VALUES ('checkout', '', '', 'one-shot', '["cart/**","pricing/*.go"]', 'null', 0, 0, 0, 'private', 'null',
			0, 'null', 0, 'queued', 0, '', ?, ?)`, []any{t0.UnixNano(), t0.UnixNano()}},
		{`INSERT INTO intents (task, pos, glob) VALUES ('checkout', 0, 'cart/**'), ('checkout', 1, 'pricing/*.go')`, nil},
		{`INSERT INTO sessions (id, task, attempt, base, state, pid, cgroup, layer, recording, started, resumes)
			VALUES ('checkout-1', 'checkout', 1, '', 'running', 0, '', '', '', ?, '')`, []any{t0.UnixNano()}},
		{`INSERT INTO usage (session, time, cpu, cpu_percent, memory, memory_peak, oom_kills, throttled, pids)
			VALUES ('checkout-1', ?, 0, 0, 42, 0, 0, 0, 0)`, []any{t0.UnixNano()}},
		{`INSERT INTO publishes (task, session, outcome, base, head, new_head, paths, message, time)
			VALUES ('checkout', 'checkout-1', 'escalated', '', '', '', 'null', '', ?)`, []any{t0.UnixNano()}},
		{`INSERT INTO events (time, kind, task, session) VALUES (?, ?, 'checkout', '')`, []any{t0.UnixNano(), supervisor.EvTaskQueued}},
	} {
		if _, err := old.w.Exec(q.sql, q.args...); err != nil {
			t.Fatalf("version-1 rows: %v", err)
		}
	}
	if hasTable(t, old, "approvals") {
		t.Fatal("version 1 already has approvals")
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, _ := db.SchemaVersion(); v != len(migrations) {
		t.Fatalf("after reopening: version %d, want %d", v, len(migrations))
	}
	if !hasTable(t, db, "approvals") || !hasIndex(t, db, "usage_session_time") {
		t.Fatal("migration 0002 not applied")
	}
	update(t, db, func(tx supervisor.Tx) error {
		_, err := tx.AddApproval(supervisor.Approval{Publish: 1, Decision: "approve", Time: t0})
		return err
	})
	view(t, db, func(r supervisor.Reader) error {
		tk, err := r.Task("checkout")
		if err != nil || len(tk.Intent) != 2 || !tk.Created.Equal(t0) {
			t.Errorf("task after migration: %+v, %v", tk, err)
		}
		in, err := r.Intents()
		if err != nil || strings.Join(in["checkout"], ",") != "cart/**,pricing/*.go" {
			t.Errorf("intents after migration: %v, %v", in, err)
		}
		us, err := r.Usage("checkout-1", time.Time{})
		if err != nil || len(us) != 1 || us[0].Memory != 42 {
			t.Errorf("usage after migration: %+v, %v", us, err)
		}
		evs, err := r.Events(0, 0)
		if err != nil || len(evs) != 1 || evs[0].Kind != supervisor.EvTaskQueued {
			t.Errorf("events after migration: %+v, %v", evs, err)
		}
		as, err := r.Approvals()
		if err != nil || len(as) != 1 || as[0].Publish != 1 {
			t.Errorf("approvals after migration: %+v, %v", as, err)
		}
		return nil
	})
}

func TestRefuseNewerDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// A binary that knows only version 1 meets the current database.
	_, err = openAt(path, 1)
	if !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("openAt(1) on a version-%d database: %v, want ErrNewerSchema", len(migrations), err)
	}
	for _, want := range []string{path, fmt.Sprintf("schema version %d", len(migrations)), "up to 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// A failing migration leaves the database at the version before it, with nothing of
// the failed migration applied, and the error names it.
func TestFailedMigrationRollsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	next := len(migrations) + 1
	broken := append(migrations[:len(migrations):len(migrations)], migration{
		version: next, name: "9999_broken.sql",
		sql: "CREATE TABLE half_done (a); CREATE TABLE tasks (a);", // the second fails
	})
	err = migrate(db.w, path, broken, time.Now)
	if err == nil || !strings.Contains(err.Error(), "9999_broken.sql") || !strings.Contains(err.Error(), path) {
		t.Errorf("migrate with a broken migration: %v", err)
	}
	if v, _ := db.SchemaVersion(); v != len(migrations) {
		t.Errorf("version after a failed migration: %d, want %d", v, len(migrations))
	}
	if hasTable(t, db, "half_done") {
		t.Error("the failed migration's first statement was kept")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func hasTable(t *testing.T, db *DB, name string) bool {
	return hasSchemaObject(t, db, "table", name)
}

func hasIndex(t *testing.T, db *DB, name string) bool {
	return hasSchemaObject(t, db, "index", name)
}

func hasSchemaObject(t *testing.T, db *DB, typ, name string) bool {
	t.Helper()
	var n int
	if err := db.r.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = ? AND name = ?`, typ, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}
