package store

import (
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
)

// ErrNewerSchema is returned by Open for a database written by a newer corral: its
// schema has migrations this binary does not know, so reading it could misread data.
var ErrNewerSchema = errors.New("database schema is newer than this corral")

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one embedded SQL file, applied once and recorded in schema_migrations.
type migration struct {
	version int
	name    string // file name, for errors
	sql     string
}

// migrations are the embedded files in version order. They are part of the binary, so
// a malformed set is a build defect: loading panics, and TestMigrationsEmbedded fails.
var migrations = mustLoadMigrations(migrationFiles)

// mustLoadMigrations reads NNNN_name.sql files and checks they number 1, 2, … with no
// gap, so "version N" always means "the first N files".
func mustLoadMigrations(fsys fs.FS) []migration {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		panic(fmt.Sprintf("store: list migrations: %v", err))
	}
	ms := make([]migration, 0, len(names))
	for i, name := range names { // fs.Glob sorts, and names are zero-padded
		base := path.Base(name)
		prefix, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || len(prefix) != 4 {
			panic(fmt.Sprintf("store: migration %s: want a name like 0001_init.sql", base))
		}
		if v != i+1 {
			panic(fmt.Sprintf("store: migration %s: want version %04d (no gaps)", base, i+1))
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			panic(fmt.Sprintf("store: read migration %s: %v", base, err))
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	return ms
}

const createSchemaMigrations = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at INTEGER NOT NULL -- unix nanoseconds
)`

// migrate brings the database at path up to the last of ms. Each migration runs in its
// own transaction together with its schema_migrations row, so a failure leaves the
// database at the previous version, never half-way. The writer connection begins
// IMMEDIATE transactions, so two corral processes opening one database at once
// serialize here and the loser sees the winner's version and skips.
func migrate(db *sql.DB, path string, ms []migration, now func() time.Time) error {
	if _, err := db.Exec(createSchemaMigrations); err != nil {
		return fmt.Errorf("store %s: create schema_migrations: %w", path, err)
	}
	cur, err := schemaVersion(db)
	if err != nil {
		return fmt.Errorf("store %s: read schema version: %w", path, err)
	}
	if cur > len(ms) {
		return fmt.Errorf("store %s: schema version %d, but this corral knows up to %d; upgrade corral: %w",
			path, cur, len(ms), ErrNewerSchema)
	}
	for _, m := range ms[cur:] {
		if err := apply(db, m, now); err != nil {
			return fmt.Errorf("store %s: migrate %04d (%s): %w", path, m.version, m.name, err)
		}
	}
	return nil
}

// apply runs one migration in its own transaction unless another process got there first.
func apply(db *sql.DB, m migration, now func() time.Time) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	var cur int
	if err := tx.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return err
	}
	if cur >= m.version {
		return nil
	}
	if cur != m.version-1 {
		return fmt.Errorf("database is at version %d, want %d first", cur, m.version-1)
	}
	if _, err := tx.Exec(m.sql); err != nil {
		return err
	}
	if _, err := tx.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		m.version, now().UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}

// querier is what both a *sql.DB and a *sql.Tx offer for reading and writing.
type querier interface {
	Exec(query string, args ...any) (sql.Result, error)
	Query(query string, args ...any) (*sql.Rows, error)
	QueryRow(query string, args ...any) *sql.Row
}

// schemaVersion is the highest applied migration, 0 for a database with none.
func schemaVersion(q querier) (int, error) {
	var v int
	err := q.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}
