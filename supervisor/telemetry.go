package supervisor

import "sort"

// sampleUsage reads every live session's cgroup once and stores the samples in one
// transaction; a new OOM kill becomes an event. It runs on the loop about once a second.
func (s *Supervisor) sampleUsage() {
	s.adoptAddedTasks()
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
	Lane           LaneStatus
}

// State returns the fleet as the loop sees it now.
func (s *Supervisor) State() FleetState {
	var st FleetState
	s.call(func() {
		st.Fleet = s.fleet
		st.Lane = s.laneStatus()
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
	})
	sort.Slice(st.Sessions, func(i, j int) bool { return st.Sessions[i].Started.Before(st.Sessions[j].Started) })
	st.Usage = map[string]Usage{}
	s.store.View(func(r Reader) error {
		latest, err := r.LatestUsage()
		for _, u := range latest {
			st.Usage[u.Session] = u
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
