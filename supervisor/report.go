package supervisor

import (
	"sort"
	"time"
)

// Span is a stretch of time a task spent in one state.
type Span struct {
	State TaskState `json:"state"`
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
}

// Timelines replays every event once and returns each task's states over the run,
// by task id; the last span of a task that had not ended runs to the run's end.
func (h *History) Timelines() map[string][]Span {
	st := foldState{head: h.Fleet.Base, tasks: make([]taskFold, len(h.Tasks)), sessions: map[string]SessionState{}}
	out := map[string][]Span{}
	end := h.End()
	for i := range h.Events {
		ti, ok := h.taskIndex[h.Events[i].Task]
		before := st.tasks[ti]
		h.apply(&st, i)
		if !ok {
			continue
		}
		after := st.tasks[ti]
		if after.state == before.state && before.seen {
			continue
		}
		id, at := h.Tasks[ti].ID, h.Events[i].Time
		spans := out[id]
		if n := len(spans); n > 0 {
			spans[n-1].To = at
		}
		out[id] = append(spans, Span{State: after.state, From: at, To: end})
	}
	return out
}

// UsageTotal is what one session used, from its telemetry.
type UsageTotal struct {
	CPU        time.Duration
	MemoryPeak uint64
}

// TaskReport is one task's figures over a run.
type TaskReport struct {
	Task      string         `json:"task"`
	Outcome   TaskState      `json:"outcome"` // its state at the end of the run
	Accepted  bool           `json:"accepted"`
	Attempts  int            `json:"attempts"`
	Retries   int            `json:"retries"` // attempts started again after a failed or rejected one
	Publishes int            `json:"publishes"`
	Conflicts map[string]int `json:"conflicts"` // by class
	// FirstConflict is from the task's queueing to its first rejected publish.
	FirstConflict *time.Duration `json:"first_conflict_ns,omitempty"`
	// Latency is from queueing to the task's end (or the run's), split by what it waited on.
	Latency          time.Duration `json:"latency_ns"`
	Running          time.Duration `json:"running_ns"` // a session live, publishing included
	Paused           time.Duration `json:"paused_ns"`
	WaitingAdmission time.Duration `json:"waiting_admission_ns"` // queued or retrying
	WaitingHuman     time.Duration `json:"waiting_human_ns"`     // in the inbox, interrupted
	Ended            bool          `json:"ended"`
	CPU              time.Duration `json:"cpu_ns"` // over all its sessions
	MemoryPeak       uint64        `json:"memory_peak"`
	// Cost is the tokens and money of its model calls through the gateway; nil when
	// the run recorded none.
	Cost     *Spend `json:"cost"`
	Timeline []Span `json:"timeline"`
}

// HumanItem is one thing that waited on a human: from entering the inbox to the
// decision that took it out (pending ones have no decision by the run's end).
type HumanItem struct {
	Task    string        `json:"task"`
	What    TaskState     `json:"what"` // inbox, interrupted, failed (out of retries)
	From    time.Time     `json:"from"`
	Waited  time.Duration `json:"waited_ns"`
	Decided bool          `json:"decided"`
}

// FleetReport is a run's figures for the whole fleet.
type FleetReport struct {
	Fleet        string         `json:"fleet"`
	Start        time.Time      `json:"start"`
	End          time.Time      `json:"end"`
	BatchElapsed time.Duration  `json:"batch_elapsed_ns"` // first event to the last task's end
	Tasks        int            `json:"tasks"`
	Outcomes     map[string]int `json:"outcomes"`
	Accepted     int            `json:"accepted"`
	Attempts     int            `json:"attempts"`
	Retries      int            `json:"retries"`
	Publishes    int            `json:"publishes"`
	PublishesBy  map[string]int `json:"publishes_by_outcome"`
	Conflicts    map[string]int `json:"conflicts"` // by class
	RejectRate   float64        `json:"reject_rate"`
	RetryRate    float64        `json:"retry_rate"` // retries per attempt
	// FirstConflict is from the run's start to the first rejected publish.
	FirstConflict *time.Duration `json:"first_conflict_ns,omitempty"`
	HumanMinutes  float64        `json:"human_minutes"` // decided items: inbox entry to decision
	HumanItems    []HumanItem    `json:"human_items"`
	Pending       int            `json:"pending_human_items"`
	// Per accepted task (means): what the seeds ask to compare between runs.
	PerAccepted struct {
		Latency          time.Duration `json:"latency_ns"`
		Running          time.Duration `json:"running_ns"`
		WaitingAdmission time.Duration `json:"waiting_admission_ns"`
		WaitingHuman     time.Duration `json:"waiting_human_ns"`
		Attempts         float64       `json:"attempts"`
		CPU              time.Duration `json:"cpu_ns"`
		// Cost is the whole run's model spend over its accepted tasks: failed and
		// rejected attempts are part of what an accepted change cost.
		Cost *Spend `json:"cost"`
	} `json:"per_accepted_task"`
	CPU  time.Duration `json:"cpu_ns"`
	Cost *Spend        `json:"cost"` // nil when the run recorded no model calls
}

// Report is a run's figures, per task and for the fleet.
type Report struct {
	Fleet FleetReport  `json:"fleet"`
	Tasks []TaskReport `json:"tasks"`
}

// Report computes a run's figures. usage gives each session's totals (nil: none).
func (h *History) Report(usage map[string]UsageTotal) Report {
	end := h.End()
	spans := h.Timelines()
	fr := FleetReport{Fleet: h.Fleet.Name, Start: h.Start(), End: end, Tasks: len(h.Tasks),
		Outcomes: map[string]int{}, PublishesBy: map[string]int{}, Conflicts: map[string]int{}}
	byTask := map[string]*TaskReport{}
	rep := Report{}
	final := h.At(end)
	finalState := map[string]Task{}
	for _, t := range final.State.Tasks {
		finalState[t.ID] = t
	}
	for _, t := range h.Tasks {
		tr := TaskReport{Task: t.ID, Outcome: finalState[t.ID].State, Conflicts: map[string]int{}, Timeline: spans[t.ID]}
		if tr.Outcome == "" {
			tr.Outcome = t.State
		}
		rep.Tasks = append(rep.Tasks, tr)
	}
	for i := range rep.Tasks {
		byTask[rep.Tasks[i].Task] = &rep.Tasks[i]
	}
	for _, s := range h.Sessions {
		if tr := byTask[s.Task]; tr != nil {
			tr.Attempts++
			u := usage[s.ID]
			tr.CPU += u.CPU
			tr.MemoryPeak = max(tr.MemoryPeak, u.MemoryPeak)
		}
	}
	queued := map[string]time.Time{}
	lastEnd := time.Time{}
	for _, e := range h.Events {
		tr := byTask[e.Task]
		switch e.Kind {
		case EvTaskQueued:
			if _, ok := queued[e.Task]; !ok {
				queued[e.Task] = e.Time
			}
		case EvTaskRetrying:
			if tr != nil {
				tr.Retries++
			}
		case EvTaskDone, EvTaskFailed, EvTaskDiscarded:
			lastEnd = e.Time
		case EvPublishRejected:
			if fr.FirstConflict == nil {
				d := e.Time.Sub(fr.Start)
				fr.FirstConflict = &d
			}
			if tr != nil && tr.FirstConflict == nil {
				d := e.Time.Sub(queued[e.Task])
				tr.FirstConflict = &d
			}
		}
	}
	for _, p := range h.Publishes {
		fr.Publishes++
		fr.PublishesBy[p.Outcome]++
		tr := byTask[p.Task]
		if tr != nil {
			tr.Publishes++
			if tr.Outcome == TaskDone && (p.Outcome == OutcomeAccepted || p.Outcome == OutcomeMerged) {
				tr.Accepted = true
			}
		}
		for _, c := range h.Conflicts[p.ID] {
			fr.Conflicts[c.Class]++
			if tr != nil {
				tr.Conflicts[c.Class]++
			}
		}
	}
	for i := range rep.Tasks {
		tr := &rep.Tasks[i]
		tr.Ended = tr.Outcome.Ended()
		for j, sp := range tr.Timeline {
			d := sp.To.Sub(sp.From)
			switch sp.State {
			case TaskRunning, TaskPublishing:
				tr.Running += d
			case TaskPaused:
				tr.Paused += d
			case TaskQueued, TaskRetrying:
				tr.WaitingAdmission += d
			case TaskInbox, TaskInterrupted:
				tr.WaitingHuman += d
			case TaskFailed:
				if j < len(tr.Timeline)-1 {
					tr.WaitingHuman += d // a failed task someone retried later
				}
			}
			if waitsForHuman(sp.State, j, tr.Timeline) {
				item := HumanItem{Task: tr.Task, What: sp.State, From: sp.From, Waited: d, Decided: j < len(tr.Timeline)-1}
				fr.HumanItems = append(fr.HumanItems, item)
				if item.Decided {
					fr.HumanMinutes += d.Minutes()
				} else {
					fr.Pending++
				}
			}
		}
		if n := len(tr.Timeline); n > 0 {
			tr.Latency = tr.Timeline[n-1].To.Sub(tr.Timeline[0].From)
			if tr.Ended {
				tr.Latency = tr.Timeline[n-1].From.Sub(tr.Timeline[0].From)
			}
		}
		fr.Outcomes[string(tr.Outcome)]++
		fr.Attempts += tr.Attempts
		fr.Retries += tr.Retries
		fr.CPU += tr.CPU
		if tr.Accepted {
			fr.Accepted++
			pa := &fr.PerAccepted
			pa.Latency += tr.Latency
			pa.Running += tr.Running
			pa.WaitingAdmission += tr.WaitingAdmission
			pa.WaitingHuman += tr.WaitingHuman
			pa.Attempts += float64(tr.Attempts)
			pa.CPU += tr.CPU
		}
	}
	if len(h.Calls) > 0 {
		taskOf := map[string]string{}
		for _, s := range h.Sessions {
			taskOf[s.ID] = s.Task
		}
		fr.Cost = &Spend{}
		for _, c := range h.Calls {
			fr.Cost.add(c)
			task := c.Task
			if task == "" {
				task = taskOf[c.Session]
			}
			if tr := byTask[task]; tr != nil {
				if tr.Cost == nil {
					tr.Cost = &Spend{}
				}
				tr.Cost.add(c)
			}
		}
		if n := fr.Accepted; n > 0 {
			c := *fr.Cost
			c.Calls /= n
			c.Input, c.Output = c.Input/int64(n), c.Output/int64(n)
			c.CacheRead, c.CacheWrite = c.CacheRead/int64(n), c.CacheWrite/int64(n)
			c.Cost /= float64(n)
			fr.PerAccepted.Cost = &c
		}
	}
	if n := fr.Accepted; n > 0 {
		pa := &fr.PerAccepted
		d := time.Duration(n)
		pa.Latency, pa.Running, pa.WaitingAdmission, pa.WaitingHuman, pa.CPU =
			pa.Latency/d, pa.Running/d, pa.WaitingAdmission/d, pa.WaitingHuman/d, pa.CPU/d
		pa.Attempts /= float64(n)
	}
	if fr.Publishes > 0 {
		fr.RejectRate = float64(fr.PublishesBy[OutcomeRejected]) / float64(fr.Publishes)
	}
	if fr.Attempts > 0 {
		fr.RetryRate = float64(fr.Retries) / float64(fr.Attempts)
	}
	allEnded := true
	for _, tr := range rep.Tasks {
		allEnded = allEnded && tr.Ended
	}
	fr.BatchElapsed = end.Sub(fr.Start)
	if allEnded && !lastEnd.IsZero() {
		fr.BatchElapsed = lastEnd.Sub(fr.Start)
	}
	sort.Slice(fr.HumanItems, func(i, j int) bool { return fr.HumanItems[i].From.Before(fr.HumanItems[j].From) })
	rep.Fleet = fr
	return rep
}

// waitsForHuman says whether a span is an item in the inbox: escalated or out of
// retries (inbox), interrupted, or failed and later retried by a human.
func waitsForHuman(s TaskState, i int, spans []Span) bool {
	switch s {
	case TaskInbox, TaskInterrupted:
		return true
	case TaskFailed:
		return i < len(spans)-1
	}
	return false
}
