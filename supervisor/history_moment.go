package supervisor

import (
	"sort"
	"time"
)

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
		task.State, task.Reason, task.Attempts = f.state, f.reason, f.attempts
		if !f.seen && f.state == "" {
			// Created, its task.queued not come yet: every task starts queued.
			task.State, task.Updated = TaskQueued, rec.Created
		} else if !f.since.IsZero() {
			task.Updated = f.since
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
