package store

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// nanos encodes a time as unix nanoseconds, and Go's zero time as NULL: the zero time's
// UnixNano is out of int64 range, and NULL keeps "not yet" distinct from 1970.
func nanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// fromNanos decodes nanos' encoding. Times come back in UTC whatever zone they were
// written in (the instant is kept, the zone is not): readers format them for display.
func fromNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// jsonText encodes a slice column. nil becomes "null" and empty "[]", so a record reads
// back exactly as it was written.
func jsonText(what string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", what, err)
	}
	return string(b), nil
}

// fromJSON decodes a slice column written by jsonText.
func fromJSON(what, s string, v any) error {
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return fmt.Errorf("decode %s %q: %w", what, s, err)
	}
	return nil
}

// nullInt64 stores 0 as NULL, for optional references such as Conflict.MovedBy.
func nullInt64(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// upsert builds "INSERT … ON CONFLICT (key) DO UPDATE SET col = excluded.col, …".
// An upsert, not INSERT OR REPLACE: REPLACE deletes the old row first, which would
// trip the foreign keys of its children (a task's sessions) and renumber its rowid,
// which the lists use to break ties in creation order.
func upsert(table, key string, cols ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET ",
		table, strings.Join(cols, ", "), placeholders(len(cols)), key)
	first := true
	for _, c := range cols {
		if c == key {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		fmt.Fprintf(&b, "%s = excluded.%s", c, c)
	}
	return b.String()
}

// insert builds "INSERT INTO table (cols) VALUES (?, …)".
func insert(table string, cols ...string) string {
	return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", table, strings.Join(cols, ", "), placeholders(len(cols)))
}

// selectFrom builds "SELECT cols FROM table".
func selectFrom(table string, cols []string) string {
	return fmt.Sprintf("SELECT %s FROM %s", strings.Join(cols, ", "), table)
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// durationOf decodes a duration stored as INTEGER nanoseconds.
func durationOf(n int64) time.Duration { return time.Duration(n) }
