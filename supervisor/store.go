package supervisor

import (
	"errors"
	"time"
)

// ErrNotFound is what a Reader returns for a record that does not exist.
var ErrNotFound = errors.New("not found")

// Store keeps the fleet's public coordination state as typed, durable records. store/
// implements it over SQLite; the supervisor never sees SQL.
//
// Writes go through Update: every record changed and every event emitted by one fn
// commit together or not at all. The implementation may group several Updates into
// one transaction (group commit), so fn must not block or do I/O of its own.
type Store interface {
	// Update runs fn in a write transaction and returns the events it emitted, with
	// their sequence numbers and times assigned. If fn returns an error nothing of it
	// is kept.
	Update(fn func(Tx) error) ([]Event, error)
	// View runs fn against a consistent snapshot; it never waits for a writer.
	View(fn func(Reader) error) error
	// Close flushes pending writes and closes the database.
	Close() error
}

// Reader reads records. Lists are ordered: tasks by creation, sessions by start,
// events by sequence.
type Reader interface {
	Fleet() (Fleet, error) // ErrNotFound before the fleet is created
	Task(id string) (Task, error)
	Tasks() ([]Task, error)
	Session(id string) (Session, error)
	Sessions() ([]Session, error)
	// Leases returns leases; active only those without an end.
	Leases(active bool) ([]Lease, error)
	// Usage returns a session's samples at or after since, oldest first.
	Usage(session string, since time.Time) ([]Usage, error)
	// LatestUsage returns each live session's newest sample.
	LatestUsage() ([]Usage, error)
	Publishes() ([]Publish, error)
	Conflicts(publish int64) ([]Conflict, error)
	Approvals() ([]Approval, error)
	// ModelCalls returns the metered calls of a session ("" for every session), in
	// the order they were recorded.
	ModelCalls(session string) ([]ModelCall, error)
	// LaneRuns returns the integration lane's runs by id (the order they started).
	LaneRuns() ([]LaneRun, error)
	// Intents returns the declared path globs of every task, by task id.
	Intents() (map[string][]string, error)
	// Events returns up to limit events with Seq > after, in order.
	Events(after int64, limit int) ([]Event, error)
	// InboxItems returns agents' inbox items by id; open only those still open.
	InboxItems(open bool) ([]InboxItem, error)
}

// Tx is a write transaction. Put* insert or replace by id; Add* insert and return the
// new id; Emit appends an event (Seq and, if zero, Time are assigned at commit).
type Tx interface {
	Reader
	PutFleet(Fleet) error
	PutTask(Task) error
	PutSession(Session) error
	SetIntents(task string, globs []string) error
	AddLease(Lease) (int64, error)
	EndLease(id int64, end time.Time) error
	AddUsage(...Usage) error
	AddPublish(Publish) (int64, error)
	PutPublish(Publish) error
	AddConflicts(...Conflict) error
	AddApproval(Approval) (int64, error)
	AddModelCalls(...ModelCall) error
	AddInboxItem(InboxItem) (int64, error)
	PutInboxItem(InboxItem) error
	AddLaneRun(LaneRun) (int64, error)
	PutLaneRun(LaneRun) error
	Emit(Event)
}
