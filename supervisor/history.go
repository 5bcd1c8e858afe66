package supervisor

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"
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
	Calls     []ModelCall // metered model calls, for the report's cost columns

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
	if h.Calls, err = r.ModelCalls(""); err != nil {
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
	h.heads = headOrder(h.Fleet.Base, h.Publishes, h.heads)
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
	if f.newHead != "" && h.heads[f.newHead] >= h.heads[st.head] {
		st.head = f.newHead // never back to a head that landed before it (see headOrder)
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
	case EvTaskInbox: // every task.inbox event carries the task's reason whole
		set(TaskInbox, f.reason)
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

// headOrder numbers the heads a run moved through in the order they landed, 0 for
// its base: the chain of its publish records, each from the head it landed on to the
// one it made. Outcomes can be recorded out of landing order (an approval recorded
// while a publish's outcome was on its way), so the order events first name the heads
// in (byEvent) is kept only when the records do not make one chain covering them all.
func headOrder(base string, pubs []Publish, byEvent map[string]int) map[string]int {
	next := map[string]string{}
	for _, p := range pubs {
		if p.NewHead == "" || p.Head == "" || p.NewHead == p.Head {
			continue
		}
		if prev, ok := next[p.Head]; ok && prev != p.NewHead {
			return byEvent // two publishes on one head: not a chain
		}
		next[p.Head] = p.NewHead
	}
	chain := map[string]int{base: 0}
	for cur, ok := next[base]; ok; cur, ok = next[cur] {
		if _, seen := chain[cur]; seen {
			return byEvent
		}
		chain[cur] = len(chain)
	}
	for head := range byEvent {
		if _, ok := chain[head]; !ok {
			return byEvent
		}
	}
	return chain
}
