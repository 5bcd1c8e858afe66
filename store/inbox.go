package store

import (
	"database/sql"
	"fmt"

	"corral/supervisor"
)

var inboxCols = []string{"id", "kind", "task", "session", "text", "screen", "asked", "handoff", "state", "answer",
	"pending", "created", "closed"}

var (
	selectInbox     = selectFrom("inbox", inboxCols) + " ORDER BY id"
	selectOpenInbox = selectFrom("inbox", inboxCols) + " WHERE state = 'open' ORDER BY id"
	insertInbox     = insert("inbox", inboxCols...)
	upsertInbox     = upsert("inbox", "id", inboxCols...)
)

// inboxArgs passes id 0 as NULL so SQLite picks the next one, and no pending answer
// as NULL.
func inboxArgs(it supervisor.InboxItem) []any {
	asked := 0
	if it.Asked {
		asked = 1
	}
	var pending any
	if it.Pending != "" {
		pending = it.Pending
	}
	return []any{nullInt64(it.ID), it.Kind, it.Task, it.Session, it.Text, it.Screen, asked, it.Handoff, it.State,
		it.Answer, pending, nanos(it.Created), nanos(it.Closed)}
}

func scanInbox(s scanner) (supervisor.InboxItem, error) {
	var (
		it              supervisor.InboxItem
		asked           int
		pending         sql.NullString
		created, closed sql.NullInt64
	)
	err := s.Scan(&it.ID, &it.Kind, &it.Task, &it.Session, &it.Text, &it.Screen, &asked, &it.Handoff, &it.State,
		&it.Answer, &pending, &created, &closed)
	it.Asked, it.Pending = asked == 1, pending.String
	it.Created, it.Closed = fromNanos(created), fromNanos(closed)
	return it, err
}

// InboxItems returns agents' inbox items by id; with open, only those still open.
func (r reader) InboxItems(open bool) ([]supervisor.InboxItem, error) {
	if open {
		return list(r.q, "open inbox items", scanInbox, selectOpenInbox)
	}
	return list(r.q, "inbox items", scanInbox, selectInbox)
}

// AddInboxItem records an item and returns its id (it.ID if set, else a new one).
func (t *writeTx) AddInboxItem(it supervisor.InboxItem) (int64, error) {
	res, err := t.q.Exec(insertInbox, inboxArgs(it)...)
	if err != nil {
		return 0, fmt.Errorf("store: add inbox item of session %q: %w", it.Session, err)
	}
	return res.LastInsertId()
}

// PutInboxItem replaces an item by its (non-zero) id.
func (t *writeTx) PutInboxItem(it supervisor.InboxItem) error {
	if it.ID == 0 {
		return fmt.Errorf("store: put inbox item of session %q: no id (use AddInboxItem)", it.Session)
	}
	if _, err := t.q.Exec(upsertInbox, inboxArgs(it)...); err != nil {
		return fmt.Errorf("store: put inbox item %d: %w", it.ID, err)
	}
	return nil
}
