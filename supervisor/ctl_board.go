package supervisor

import (
	"sort"
	"strconv"
	"strings"
	"time"
)

// Board is the fleet's public coordination state as an agent sees it: who works on
// what, from which base, how far behind the head, what they declared, which services
// they lease, what was published and what collided. It never carries a session's
// files, layer or recording: those are private.
type Board struct {
	Fleet     BoardFleet     `json:"fleet"`
	Tasks     []BoardTask    `json:"tasks"`
	Leases    []BoardLease   `json:"leases"`
	Publishes []BoardPublish `json:"publishes"` // the newest first, at most boardPublishes
	Lanes     BoardLanes     `json:"lanes"`
	Inbox     int            `json:"inbox"` // open items waiting for a human
}

// BoardFleet is the fleet's head and base.
type BoardFleet struct {
	Name    string `json:"name"`
	HeadRef string `json:"head_ref"`
	Head    string `json:"head"`
	Base    string `json:"base"`
}

// BoardTask is one task that is not over.
type BoardTask struct {
	ID       string    `json:"id"`
	State    TaskState `json:"state"`
	Lifetime Lifetime  `json:"lifetime"`
	Session  string    `json:"session,omitempty"` // the live session that owns it
	Base     string    `json:"base,omitempty"`    // the live session's base
	Behind   int       `json:"behind"`            // commits the head is ahead of Base
	Intent   []string  `json:"intent"`
	Overlaps []string  `json:"overlaps,omitempty"` // live tasks whose intent overlaps this one's
	Reason   string    `json:"reason,omitempty"`
}

// BoardLease is a held port or named service.
type BoardLease struct {
	Task     string `json:"task"`
	Session  string `json:"session"`
	Name     string `json:"name,omitempty"`
	Port     int    `json:"port"`     // inside the owner's sandbox
	Endpoint string `json:"endpoint"` // on the host; `ctl endpoint NAME` gives one reachable from a sandbox
}

// BoardPublish is one publish and, for a rejected one, what collided.
type BoardPublish struct {
	ID        int64           `json:"id"`
	Task      string          `json:"task"`
	Session   string          `json:"session"`
	Outcome   string          `json:"outcome"`
	NewHead   string          `json:"new_head,omitempty"`
	Paths     int             `json:"paths"`
	Conflicts []BoardConflict `json:"conflicts,omitempty"`
	Message   string          `json:"message,omitempty"`
	Time      time.Time       `json:"time"`
}

// BoardConflict is a conflicting path and its class.
type BoardConflict struct {
	Path  string `json:"path"`
	Class string `json:"class"`
}

// BoardLanes is how full the fleet is: what admission has and what it allows.
type BoardLanes struct {
	Running    int     `json:"running"`
	MaxRunning int     `json:"max_running"`
	Queued     int     `json:"queued"`
	Waiting    int     `json:"waiting"` // in the inbox
	CPU        float64 `json:"cpu_reserved"`
	CPULimit   float64 `json:"cpu_limit"`
	Memory     int64   `json:"memory_reserved"`
	MemLimit   int64   `json:"memory_limit"`
}

const boardPublishes = 20

// Board returns the public board.
func (s *Supervisor) Board() Board {
	var b Board
	s.call(func() { b = s.boardLocked() })
	pubs, conflicts := s.recentPublishes()
	for _, p := range pubs {
		bp := BoardPublish{ID: p.ID, Task: p.Task, Session: p.Session, Outcome: p.Outcome, NewHead: p.NewHead,
			Paths: len(p.Paths), Message: p.Message, Time: p.Time}
		for _, c := range conflicts[p.ID] {
			bp.Conflicts = append(bp.Conflicts, BoardConflict{Path: c.Path, Class: c.Class})
		}
		b.Publishes = append(b.Publishes, bp)
	}
	for i := range b.Tasks {
		if b.Tasks[i].Base != "" {
			b.Tasks[i].Behind = s.behind(b.Tasks[i].Base, b.Fleet.Head)
		}
	}
	return b
}

// boardLocked gathers what the loop owns; it runs on the loop.
func (s *Supervisor) boardLocked() Board {
	b := Board{Fleet: BoardFleet{Name: s.fleet.Name, HeadRef: s.fleet.HeadRef, Head: s.fleet.Head, Base: s.fleet.Base}}
	b.Lanes.MaxRunning, b.Lanes.CPULimit, b.Lanes.MemLimit = s.fleet.Admission.MaxRunning, s.fleet.Admission.CPU, s.fleet.Admission.Memory
	for _, id := range s.order {
		t := s.tasks[id]
		switch {
		case t.State == TaskQueued || t.State == TaskRetrying:
			b.Lanes.Queued++
		case t.State == TaskInbox:
			b.Lanes.Waiting++
		}
		if t.State.Ended() {
			continue
		}
		bt := BoardTask{ID: t.ID, State: t.State, Lifetime: t.Lifetime, Intent: nonNil(t.Intent), Reason: t.Reason}
		if ls := s.liveOf(t.ID); ls != nil {
			bt.Session, bt.Base = ls.rec.ID, ls.rec.Base
			b.Lanes.Running++
			b.Lanes.CPU += t.CPU
			b.Lanes.Memory += t.Memory
		}
		bt.Overlaps = s.overlapping(t)
		b.Tasks = append(b.Tasks, bt)
	}
	for _, l := range s.heldLeases() {
		b.Leases = append(b.Leases, BoardLease{Task: l.Task, Session: l.Session, Name: l.Name, Port: l.Port, Endpoint: l.Endpoint})
	}
	for _, it := range s.inboxItems {
		if it.State == InboxOpen {
			b.Inbox++
		}
	}
	return b
}

// overlapping lists the tasks, not over, whose intent overlaps t's.
func (s *Supervisor) overlapping(t *Task) []string {
	var out []string
	for _, id := range s.order {
		o := s.tasks[id]
		if o.ID != t.ID && !o.State.Ended() && s.intentsOverlap(*t, *o) {
			out = append(out, o.ID)
		}
	}
	return out
}

// heldLeases reads the leases held now.
func (s *Supervisor) heldLeases() []Lease {
	var ls []Lease
	s.store.View(func(r Reader) error {
		var err error
		ls, err = r.Leases(true)
		return err
	})
	return ls
}

// recentPublishes reads the newest publishes with their conflicts.
func (s *Supervisor) recentPublishes() ([]Publish, map[int64][]Conflict) {
	var pubs []Publish
	conflicts := map[int64][]Conflict{}
	s.store.View(func(r Reader) error {
		all, err := r.Publishes()
		if err != nil {
			return err
		}
		sort.Slice(all, func(i, j int) bool { return all[i].ID > all[j].ID })
		if len(all) > boardPublishes {
			all = all[:boardPublishes]
		}
		pubs = all
		for _, p := range pubs {
			if p.Outcome == OutcomeRejected {
				cs, err := r.Conflicts(p.ID)
				if err != nil {
					return err
				}
				conflicts[p.ID] = cs
			}
		}
		return nil
	})
	return pubs, conflicts
}

// behind counts the commits head has that base lacks (0 when unknown). Bases and
// heads are immutable commits, so the count is kept once computed.
func (s *Supervisor) behind(base, head string) int {
	if base == "" || head == "" || base == head {
		return 0
	}
	key := [2]string{base, head}
	s.behindMu.Lock()
	n, ok := s.behindMemo[key]
	s.behindMu.Unlock()
	if ok {
		return n
	}
	out, err := s.repo.Git("rev-list", "--count", base+".."+head)
	if err != nil {
		return 0
	}
	n, _ = strconv.Atoi(strings.TrimSpace(out))
	s.behindMu.Lock()
	s.behindMemo[key] = n
	s.behindMu.Unlock()
	return n
}

// SessionStatus is one session's own view of itself (`ctl status`).
type SessionStatus struct {
	Session  string        `json:"session"`
	Task     string        `json:"task"`
	State    TaskState     `json:"state"`
	Lifetime Lifetime      `json:"lifetime"`
	Attempt  int           `json:"attempt"`
	Base     string        `json:"base"`
	Head     string        `json:"head"`
	Behind   int           `json:"behind"` // commits the head is ahead of Base
	Intent   []string      `json:"intent"`
	Overlaps []string      `json:"overlaps,omitempty"`
	Leases   []BoardLease  `json:"leases"`
	Budget   StatusBudget  `json:"budget"`
	Usage    *Usage        `json:"usage,omitempty"` // the newest sample
	Gateway  StatusGateway `json:"gateway"`
	Inbox    []InboxItem   `json:"inbox,omitempty"` // this session's open items
}

// StatusBudget is what the task may use (0: no limit of its own).
type StatusBudget struct {
	CPU    float64 `json:"cpu"`
	Memory int64   `json:"memory"`
	Pids   int64   `json:"pids"`
}

// StatusGateway is the model gateway's account of the session: what it spent, what
// its task spent over all attempts against the task's budgets, and the fleet quota.
// Without a [gateway] in the plan, Tokens and CostUSD are null and Note says why.
type StatusGateway struct {
	Tokens        *int64     `json:"tokens"` // this session's, every category
	CostUSD       *float64   `json:"cost_usd"`
	Calls         int        `json:"calls"`
	TaskTokens    int64      `json:"task_tokens"` // over all the task's attempts
	TaskCostUSD   float64    `json:"task_cost_usd"`
	BudgetTokens  int64      `json:"budget_tokens,omitempty"` // the task's caps (0: none)
	BudgetCostUSD float64    `json:"budget_cost_usd,omitempty"`
	Held          bool       `json:"held,omitempty"` // its next model request waits (quota or budget)
	Quota         *QuotaView `json:"quota,omitempty"`
	Note          string     `json:"note,omitempty"`
}

// gatewayStatus is the session's account at the gateway; it runs on the loop.
func (s *Supervisor) gatewayStatus(session string, t *Task) StatusGateway {
	if s.gw == nil {
		return StatusGateway{Note: "no model gateway runs in this fleet (the plan has no [gateway]): token and cost accounting are not available"}
	}
	sp, tsp := s.spendSession[session], s.spendTask[t.ID]
	tokens, cost := sp.Tokens(), sp.Cost
	return StatusGateway{Tokens: &tokens, CostUSD: &cost, Calls: sp.Calls, TaskTokens: tsp.Tokens(), TaskCostUSD: tsp.Cost,
		BudgetTokens: t.BudgetTokens, BudgetCostUSD: t.BudgetCost, Held: s.gw.Held(session), Quota: s.quotaView()}
}

// sessionStatus returns the caller's own status.
func (s *Supervisor) sessionStatus(session string) (SessionStatus, error) {
	var st SessionStatus
	err := s.onSession(session, func(ls *liveSession, t *Task) error {
		st = SessionStatus{Session: session, Task: t.ID, State: t.State, Lifetime: t.Lifetime, Attempt: ls.rec.Attempt,
			Base: ls.rec.Base, Head: s.fleet.Head, Intent: nonNil(t.Intent), Overlaps: s.overlapping(t),
			Budget:  StatusBudget{CPU: t.CPU, Memory: t.Memory, Pids: t.Pids},
			Gateway: s.gatewayStatus(session, t)}
		for _, it := range s.inboxItems {
			if it.Session == session && it.State == InboxOpen {
				st.Inbox = append(st.Inbox, *it)
			}
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	st.Behind = s.behind(st.Base, st.Head)
	st.Leases = []BoardLease{}
	for _, l := range s.heldLeases() {
		if l.Session == session {
			st.Leases = append(st.Leases, BoardLease{Task: l.Task, Session: l.Session, Name: l.Name, Port: l.Port, Endpoint: l.Endpoint})
		}
	}
	s.store.View(func(r Reader) error {
		latest, err := r.LatestUsage()
		for i := range latest {
			if latest[i].Session == session {
				u := latest[i]
				st.Usage = &u
			}
		}
		return err
	})
	return st, nil
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}
