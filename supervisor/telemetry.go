package supervisor

import "sort"

// sampleUsage reads every live session's cgroup once and stores the samples in one
// transaction; a new OOM kill becomes an event. It runs on the loop about once a second.
func (s *Supervisor) sampleUsage() {
	s.adoptAddedTasks()
	s.adoptAnswers()
	if len(s.sessions) == 0 {
		return
	}
	now := s.now()
	var samples []Usage
	var evs []Event
	for _, ls := range s.sessions {
		st, err := ls.sb.Stats()
		if err != nil {
			continue // the session is going away; its exit is on its way to the loop
		}
		u := Usage{Session: ls.rec.ID, Time: now, CPU: st.CPUUsage, Memory: st.MemoryCurrent,
			MemoryPeak: st.MemoryPeak, OOMKills: st.OOMKills, Throttled: st.ThrottledTime, Pids: st.Pids}
		if dt := now.Sub(ls.lastAt); dt > 0 && ls.lastCPU > 0 {
			u.CPUPercent = 100 * float64(st.CPUUsage-ls.lastCPU) / float64(dt)
		}
		ls.lastCPU, ls.lastAt = st.CPUUsage, now
		if st.OOMKills > ls.oom {
			evs = append(evs, Event{Kind: EvSessionOOM, Task: ls.rec.Task, Session: ls.rec.ID,
				Data: jsonData(map[string]uint64{"oom_kills": st.OOMKills, "memory_peak": st.MemoryPeak})})
			ls.oom = st.OOMKills
		}
		samples = append(samples, u)
	}
	_, err := s.commit(func(tx Tx) error {
		for _, e := range evs {
			tx.Emit(e)
		}
		return tx.AddUsage(samples...)
	})
	if err != nil {
		s.log.Error("record usage", "err", err)
	}
}

// FleetState is a consistent picture of the fleet for the TUI, status and tests.
type FleetState struct {
	Fleet    Fleet
	Tasks    []Task
	Sessions []Session // live sessions only
	Usage    map[string]Usage
	// Reserved is what live tasks hold of the fleet budget.
	ReservedCPU    float64
	ReservedMemory int64
	Running        int
	// Model spend through the gateway: the fleet's, per task and per session; cost
	// per accepted task (all spend over tasks whose work reached the head by an
	// accepted or merged publish) says whether more agents paid off.
	Spend           Spend
	TaskSpend       map[string]Spend
	SessionSpend    map[string]Spend
	CostPerAccepted float64
	Quota           *QuotaView // nil without a [gateway.quota]
	Held            []string   // sessions whose next model request the gateway holds
	FallbackReady   bool       // UseFallback would move the fleet to a fallback upstream
	Lane            LaneStatus
	LaneLive        map[int64]string // lane runs in progress → the test sandbox running each
}

// State returns the fleet as the loop sees it now.
func (s *Supervisor) State() FleetState {
	var st FleetState
	s.call(func() {
		st.Fleet = s.fleet
		st.Lane = s.laneStatus()
		st.LaneLive = s.laneLive.runs()
		for _, id := range s.order {
			st.Tasks = append(st.Tasks, *s.tasks[id])
		}
		for _, ls := range s.sessions {
			st.Sessions = append(st.Sessions, ls.rec)
			t := s.tasks[ls.rec.Task]
			st.ReservedCPU += t.CPU
			st.ReservedMemory += t.Memory
			st.Running++
		}
		st.Spend, st.TaskSpend, st.SessionSpend = s.spendAt()
		st.Quota = s.quotaView()
		st.FallbackReady = s.fallbackReady()
		if s.gw != nil {
			for _, id := range s.gw.Sessions() {
				if s.gw.Held(id) {
					st.Held = append(st.Held, id)
				}
			}
		}
	})
	sort.Slice(st.Sessions, func(i, j int) bool { return st.Sessions[i].Started.Before(st.Sessions[j].Started) })
	st.Usage = map[string]Usage{}
	s.store.View(func(r Reader) error {
		latest, err := r.LatestUsage()
		for _, u := range latest {
			st.Usage[u.Session] = u
		}
		if err != nil || st.Spend.Calls == 0 {
			return err
		}
		pubs, err := r.Publishes()
		accepted := map[string]bool{}
		for _, p := range pubs {
			if p.Outcome == OutcomeAccepted || p.Outcome == OutcomeMerged {
				accepted[p.Task] = true
			}
		}
		if len(accepted) > 0 {
			st.CostPerAccepted = st.Spend.Cost / float64(len(accepted))
		}
		return err
	})
	return st
}

// SessionOutput returns a live session's terminal output, for the session pane.
func (s *Supervisor) SessionOutput(session string) (ring interface {
	Since(int64) ([]byte, int64)
	Changed() <-chan struct{}
}, ok bool) {
	s.call(func() {
		if ls := s.sessions[session]; ls != nil {
			ring, ok = ls.sb.Output(), true
		}
	})
	if !ok {
		if sb := s.laneLive.session(session); sb != nil { // a lane test running now
			ring, ok = sb.Output(), true
		}
	}
	return ring, ok
}

// adoptAddedTasks picks up tasks another process (`corral add`) queued in the store.
func (s *Supervisor) adoptAddedTasks() {
	var stored []Task
	if err := s.store.View(func(r Reader) error {
		var err error
		stored, err = r.Tasks()
		return err
	}); err != nil {
		return
	}
	var added []Task
	for _, t := range stored {
		if _, ok := s.tasks[t.ID]; !ok {
			t := t
			s.tasks[t.ID] = &t
			s.order = append(s.order, t.ID)
			added = append(added, t)
		}
	}
	if len(added) > 0 {
		s.noteOverlaps(added)
		s.kick()
	}
}
