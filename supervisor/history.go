package supervisor

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"corral/sandbox"
)

// History is a recorded fleet run, read once from a store, that can say what the fleet
// looked like at any moment of it: replay and reports read the same events the TUI
// and headless mode do.
//
// State at a time is the fold of every event up to it over the tasks' declared
// records. Folding from the first event at every seek would cost O(events), so the
// fold is kept at checkpoints every checkpointEvery events: a seek copies the nearest
// checkpoint before its time and applies at most that many events.
type History struct {
	Fleet     Fleet // as last recorded (its head is the final head)
	Tasks     []Task
	Sessions  []Session
	Leases    []Lease
	Publishes []Publish
	Conflicts map[int64][]Conflict // by publish
	Approvals []Approval
	Events    []Event

	facts       []eventFacts
	times       []int64          // Events[i].Time as unix nanos, made non-decreasing for search
	pubTimes    []int64          // Publishes[i].Time likewise
	taskPubs    map[string][]int // each task's publishes, by index into Publishes
	escalated   map[int64]string // publish → its message when it was escalated
	heads       map[string]int   // head commit → how many publishes moved the head to it
	checkpoints []foldState
	taskIndex   map[string]int
	sessIndex   map[string]int
	started     map[string]time.Time // session → when its session.started event came
}

// checkpointEvery is how many events lie between two checkpoints of the fold. A seek
// applies fewer than this many events; at ~100 ns an event that is ~0.1 ms, and the
// checkpoints of 100k events hold 100 copies of the tasks' states.
const checkpointEvery = 1024

// eventFacts is what the fold reads from an event's data, decoded once at load.
type eventFacts struct {
	reason, message, newHead, outcome string
	attempt, attempts                 int
	publish                           int64
	hasRetries                        bool
}

// taskFold is the part of a task that changes over a run.
type taskFold struct {
	state    TaskState
	reason   string
	attempts int
	since    time.Time // when it entered its state (its latest event)
	seen     bool      // queued by now
}

// foldState is the fleet after events[:next].
type foldState struct {
	next     int
	head     string
	tasks    []taskFold              // by taskIndex
	sessions map[string]SessionState // sessions started so far, as the events left them
}

func (f foldState) clone() foldState {
	c := foldState{next: f.next, head: f.head, tasks: append([]taskFold(nil), f.tasks...),
		sessions: make(map[string]SessionState, len(f.sessions))}
	for k, v := range f.sessions {
		c.sessions[k] = v
	}
	return c
}

// LoadHistory reads a run's records and events and builds the fold's checkpoints.
func LoadHistory(r Reader) (*History, error) {
	h := &History{Conflicts: map[int64][]Conflict{}}
	var err error
	if h.Fleet, err = r.Fleet(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if h.Tasks, err = r.Tasks(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if h.Sessions, err = r.Sessions(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if h.Leases, err = r.Leases(false); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if h.Publishes, err = r.Publishes(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if all, ok := r.(interface {
		AllConflicts() (map[int64][]Conflict, error)
	}); ok {
		// One query, not one per publish: a long run has tens of thousands.
		if h.Conflicts, err = all.AllConflicts(); err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
	} else {
		for _, p := range h.Publishes {
			if h.Conflicts[p.ID], err = r.Conflicts(p.ID); err != nil {
				return nil, fmt.Errorf("history: %w", err)
			}
		}
	}
	if h.Approvals, err = r.Approvals(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if h.Events, err = r.Events(0, 0); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	h.index()
	return h, nil
}

// NewHistory builds a history from records already read (tests, benchmarks).
func NewHistory(f Fleet, tasks []Task, sessions []Session, leases []Lease, pubs []Publish,
	conflicts map[int64][]Conflict, approvals []Approval, events []Event) *History {
	if conflicts == nil {
		conflicts = map[int64][]Conflict{}
	}
	h := &History{Fleet: f, Tasks: tasks, Sessions: sessions, Leases: leases, Publishes: pubs,
		Conflicts: conflicts, Approvals: approvals, Events: events}
	h.index()
	return h
}

func (h *History) index() {
	h.taskIndex = make(map[string]int, len(h.Tasks))
	for i, t := range h.Tasks {
		h.taskIndex[t.ID] = i
	}
	h.sessIndex = make(map[string]int, len(h.Sessions))
	for i, s := range h.Sessions {
		h.sessIndex[s.ID] = i
	}
	h.started = map[string]time.Time{}
	h.escalated = map[int64]string{}
	h.heads = map[string]int{h.Fleet.Base: 0}
	h.facts = make([]eventFacts, len(h.Events))
	h.times = make([]int64, len(h.Events))
	var last int64
	for i, e := range h.Events {
		h.facts[i] = parseFacts(e.Data)
		last = max(last, e.Time.UnixNano())
		h.times[i] = last
		if nh := h.facts[i].newHead; nh != "" {
			if _, seen := h.heads[nh]; !seen {
				h.heads[nh] = len(h.heads)
			}
		}
		switch e.Kind {
		case EvSessionStarted:
			h.started[e.Session] = e.Time
		case EvPublishEscalated:
			// A decision rewrites the record; the event keeps what it said before.
			h.escalated[h.facts[i].publish] = h.facts[i].message
		}
	}
	// A publish shows from its outcome's event on: its record's time is stamped a
	// moment before that commits.
	outcomeAt := map[int64]int64{}
	for i, e := range h.Events {
		switch e.Kind {
		case EvPublishAccepted, EvPublishMerged, EvPublishRejected, EvPublishEscalated, EvPublishEmpty:
			if id := h.facts[i].publish; id != 0 {
				if _, seen := outcomeAt[id]; !seen {
					outcomeAt[id] = h.times[i]
				}
			}
		}
	}
	h.pubTimes = make([]int64, len(h.Publishes))
	h.taskPubs = map[string][]int{}
	last = 0
	for i, p := range h.Publishes {
		at, ok := outcomeAt[p.ID]
		if !ok {
			at = p.Time.UnixNano()
		}
		last = max(last, at)
		h.pubTimes[i] = last
		h.taskPubs[p.Task] = append(h.taskPubs[p.Task], i)
	}
	st := foldState{head: h.Fleet.Base, tasks: make([]taskFold, len(h.Tasks)), sessions: map[string]SessionState{}}
	h.checkpoints = []foldState{st.clone()}
	for i := range h.Events {
		h.apply(&st, i)
		if st.next%checkpointEvery == 0 {
			h.checkpoints = append(h.checkpoints, st.clone())
		}
	}
}

func parseFacts(data json.RawMessage) eventFacts {
	var f eventFacts
	if len(data) == 0 || data[0] != '{' {
		return f
	}
	var m struct {
		Reason   string          `json:"reason"`
		Message  string          `json:"message"`
		NewHead  string          `json:"new_head"`
		Outcome  string          `json:"outcome"`
		Attempt  int             `json:"attempt"`
		Attempts int             `json:"attempts"`
		Publish  int64           `json:"publish"`
		Retries  json.RawMessage `json:"retries"`
	}
	if json.Unmarshal(data, &m) != nil {
		return f
	}
	return eventFacts{reason: m.Reason, message: m.Message, newHead: m.NewHead, outcome: m.Outcome,
		attempt: m.Attempt, attempts: m.Attempts, publish: m.Publish, hasRetries: len(m.Retries) > 0}
}

// apply folds events[i] into st. The rules mirror the supervisor's transitions, which
// record each task change with the event named here.
func (h *History) apply(st *foldState, i int) {
	e, f := h.Events[i], h.facts[i]
	st.next = i + 1
	if f.newHead != "" {
		st.head = f.newHead
	}
	if e.Session != "" {
		switch e.Kind {
		case EvSessionStarted:
			st.sessions[e.Session] = SessionRunning
		case EvSessionPaused:
			st.sessions[e.Session] = SessionPaused
		case EvSessionResumed:
			st.sessions[e.Session] = SessionRunning
		}
	}
	ti, ok := h.taskIndex[e.Task]
	if !ok {
		return
	}
	t := &st.tasks[ti]
	set := func(s TaskState, reason string) { t.state, t.reason, t.since = s, reason, e.Time }
	switch e.Kind {
	case EvTaskQueued:
		t.seen = true
		set(TaskQueued, f.reason)
	case EvTaskBlocked:
		t.reason, t.since = f.reason, e.Time
	case EvSessionStarted:
		set(TaskRunning, "")
		if f.attempt > 0 {
			t.attempts = f.attempt
		}
	case EvSessionPaused:
		t.state = TaskPaused
	case EvSessionResumed:
		t.state = TaskRunning
	case EvPublishQueued:
		t.state = TaskPublishing
	case EvPublishAccepted, EvPublishMerged, EvPublishEmpty, EvPublishRejected:
		// A persistent task's session goes on after a publish it asked for; when the
		// publish was its last (the agent exited), the task's own event follows.
		if h.Tasks[ti].Lifetime == Persistent {
			t.state = TaskRunning
		}
	case EvPublishEscalated:
		set(TaskInbox, "publish escalated: "+f.message)
	case EvPublishDenied:
		set(TaskFailed, "publish denied: "+f.reason)
	case EvTaskRetrying:
		if f.hasRetries {
			set(TaskRetrying, f.reason)
		} else { // a user's retry queues the task again
			set(TaskQueued, f.reason)
		}
	case EvTaskDone:
		set(TaskDone, "")
	case EvTaskFailed:
		set(TaskFailed, f.reason)
	case EvTaskDiscarded:
		set(TaskDiscarded, "discarded by the user")
	case EvTaskInterrupted:
		if e.Data == nil {
			set(TaskInterrupted, "supervisor stopped")
		} else {
			set(TaskInterrupted, "supervisor died under session "+e.Session)
		}
	case EvTaskInbox:
		set(TaskInbox, fmt.Sprintf("out of retries after %d attempt(s): %s", f.attempts, f.reason))
	}
}

// Start is the time of the run's first event, End of its last.
func (h *History) Start() time.Time {
	if len(h.Events) == 0 {
		return h.Fleet.Created
	}
	return h.Events[0].Time
}

func (h *History) End() time.Time {
	if len(h.Events) == 0 {
		return h.Fleet.Created
	}
	return time.Unix(0, h.times[len(h.times)-1]).UTC()
}

// EventsUntil returns how many events happened at or before t.
func (h *History) EventsUntil(t time.Time) int {
	n := t.UnixNano()
	return sort.Search(len(h.times), func(i int) bool { return h.times[i] > n })
}

// foldAt is the fold after every event at or before t.
func (h *History) foldAt(t time.Time) foldState {
	n := h.EventsUntil(t)
	st := h.checkpoints[n/checkpointEvery].clone()
	for i := st.next; i < n; i++ {
		h.apply(&st, i)
	}
	return st
}

// Moment is the fleet at one time of a run: the live supervisor's picture of it
// (FleetState, usage aside) and the records that existed then.
type Moment struct {
	Time   time.Time
	State  FleetState // Usage is left empty: samples are read per moment by the caller
	Leases []Lease    // held at Time
	// Publishes offered by Time, outcomes as they stood then: the latest
	// MomentPublishes of them, and each task's latest.
	Publishes []Publish
	Conflicts map[int64][]Conflict // of those publishes, as they stood then
	Approvals []Approval           // decided by Time
	Events    int                  // how many events happened by Time
}

// At returns the fleet as it was at t.
func (h *History) At(t time.Time) Moment {
	st := h.foldAt(t)
	m := Moment{Time: t, Events: st.next}
	m.State.Fleet = h.Fleet
	m.State.Fleet.Head = st.head
	m.State.Usage = map[string]Usage{}
	for i, rec := range h.Tasks {
		f := st.tasks[i]
		if !f.seen && rec.Created.After(t) {
			continue // added later in the run
		}
		task := rec
		if f.seen {
			task.State, task.Reason, task.Attempts = f.state, f.reason, f.attempts
			if !f.since.IsZero() {
				task.Updated = f.since
			}
		}
		m.State.Tasks = append(m.State.Tasks, task)
	}
	for id, state := range st.sessions {
		si, ok := h.sessIndex[id]
		if !ok {
			continue
		}
		rec := h.Sessions[si]
		if !rec.Ended.IsZero() && !rec.Ended.After(t) {
			continue
		}
		rec.State, rec.Ended, rec.ExitCode = state, time.Time{}, nil
		m.State.Sessions = append(m.State.Sessions, rec)
		if ti, ok := h.taskIndex[rec.Task]; ok {
			m.State.ReservedCPU += h.Tasks[ti].CPU
			m.State.ReservedMemory += h.Tasks[ti].Memory
		}
		m.State.Running++
	}
	sort.Slice(m.State.Sessions, func(i, j int) bool { return m.State.Sessions[i].Started.Before(m.State.Sessions[j].Started) })
	for _, l := range h.Leases {
		if !l.Start.After(t) && (l.End.IsZero() || l.End.After(t)) {
			m.Leases = append(m.Leases, l)
		}
	}
	decidedAt := map[int64]time.Time{}
	for _, a := range h.Approvals {
		if !a.Time.After(t) {
			m.Approvals = append(m.Approvals, a)
		} else {
			decidedAt[a.Publish] = a.Time
		}
	}
	n := sort.Search(len(h.pubTimes), func(i int) bool { return h.pubTimes[i] > t.UnixNano() })
	pick := map[int]bool{}
	for i := max(n-MomentPublishes, 0); i < n; i++ {
		pick[i] = true
	}
	for _, idx := range h.taskPubs {
		k := sort.SearchInts(idx, n) - 1 // the task's last publish before n
		if k >= 0 {
			pick[idx[k]] = true
		}
	}
	order := make([]int, 0, len(pick))
	for i := range pick {
		order = append(order, i)
	}
	sort.Ints(order)
	m.Conflicts = map[int64][]Conflict{}
	for _, i := range order {
		p := h.Publishes[i]
		if _, later := decidedAt[p.ID]; later {
			// Decided after t: it was still waiting for a human then.
			p.Outcome, p.NewHead, p.Message = OutcomeEscalated, "", h.escalated[p.ID]
		} else if cs := h.Conflicts[p.ID]; len(cs) > 0 {
			m.Conflicts[p.ID] = cs
		}
		m.Publishes = append(m.Publishes, p)
	}
	return m
}

// MomentPublishes is how many of the latest publishes a Moment carries besides each
// task's latest: the publishes pane shows the recent ones, and copying tens of
// thousands at every seek would cost more than the rest of the seek.
const MomentPublishes = 200

// SessionStarted is when a session's start was recorded (its terminal recording
// begins within milliseconds of it); false for an unknown session.
func (h *History) SessionStarted(id string) (time.Time, bool) {
	t, ok := h.started[id]
	if !ok {
		if i, ok2 := h.sessIndex[id]; ok2 {
			return h.Sessions[i].Started, true
		}
	}
	return t, ok
}

// Session returns a session's record.
func (h *History) Session(id string) (Session, bool) {
	i, ok := h.sessIndex[id]
	if !ok {
		return Session{}, false
	}
	return h.Sessions[i], true
}

// FindEvent returns the index of the first event after index from (dir > 0) or the
// last before it (dir < 0) whose kind is one of kinds (any kind when none given), or -1.
func (h *History) FindEvent(from, dir int, kinds ...string) int {
	match := func(k string) bool {
		if len(kinds) == 0 {
			return true
		}
		for _, want := range kinds {
			if k == want {
				return true
			}
		}
		return false
	}
	if dir > 0 {
		for i := max(from+1, 0); i < len(h.Events); i++ {
			if match(h.Events[i].Kind) {
				return i
			}
		}
		return -1
	}
	for i := min(from-1, len(h.Events)-1); i >= 0; i-- {
		if match(h.Events[i].Kind) {
			return i
		}
	}
	return -1
}

// RecordingPath is where a session's terminal recording lives: apart from its
// session directory (which goes when the session is published or discarded), under
// its run, so replay outlives sessions and `corral gc` can drop a whole run's at once.
func RecordingPath(repo sandbox.Repo, f Fleet, session string) string {
	return filepath.Join(RecordingsDir(repo, f), session+".cast")
}

// RecordingsDir is a run's recordings directory: one per fleet database (a fresh run
// of the same fleet has a new creation time, so its own directory).
func RecordingsDir(repo sandbox.Repo, f Fleet) string {
	return filepath.Join(repo.StateDir, "rec", f.Name+"-"+f.Created.UTC().Format("20060102T150405.000"))
}

// Behind counts the commits the head moved past base on its way to head, from the
// run's own publishes: each accepted publish adds one commit with the previous head as
// its only parent, so this is what git rev-list --count base..head says, without a git
// process per seek. ok is false for a commit the run did not make its head.
func (h *History) Behind(base, head string) (n int, ok bool) {
	b, okb := h.heads[base]
	t, okh := h.heads[head]
	if !okb || !okh || t < b {
		return 0, false
	}
	return t - b, true
}
