package supervisor

import (
	"fmt"
	"time"

	"corral/policies"
)

// quotaState follows the fleet's quota window: what it has used, when it resets, at
// which level it stands, and which sessions it paused.
type quotaState struct {
	q            policies.Quota
	start, reset time.Time // the window; zero until the first call opens one
	used         float64   // tokens or cost in the window
	util         float64   // provider-reported utilisation (headers or probe), -1 unknown
	level        policies.QuotaLevel
	paused       []string // sessions the quota paused, in pause order
	resumeQ      []string // sessions to resume, in resume order, staged
	lastResume   time.Time
	onFallback   bool
}

func newQuotaState(q policies.Quota) *quotaState {
	return &quotaState{q: q, util: -1, level: policies.QuotaOK}
}

// roll opens a new window when none is open or the current one has reset.
func (q *quotaState) roll(now time.Time) {
	if q.start.IsZero() || !now.Before(q.reset) {
		q.start, q.reset, q.used, q.util = now, now.Add(q.q.Window), 0, -1
	}
}

// add counts a metered call. A provider's own reset time and utilisation, when its
// headers give them, override the configured window.
func (q *quotaState) add(c ModelCall, now time.Time) {
	at := c.Time
	if at.IsZero() {
		at = now
	}
	q.roll(at)
	switch q.q.Metric {
	case policies.QuotaTokens:
		q.used += float64(c.Tokens())
	case policies.QuotaCost:
		q.used += c.Cost
	}
	if c.Utilization >= 0 {
		q.observe(c.Utilization, c.Reset)
	}
}

// observe takes a provider's (or the probe's) reading of the window.
func (q *quotaState) observe(util float64, reset time.Time) {
	if q.q.Metric != policies.QuotaUtilization {
		return
	}
	q.util = util
	if !reset.IsZero() {
		q.reset, q.start = reset, reset.Add(-q.q.Window)
	}
}

// fraction is how much of the window is used, 0..1 (more when over).
func (q *quotaState) fraction() float64 {
	if q.q.Metric == policies.QuotaUtilization {
		return max(q.util, 0)
	}
	return q.used / q.q.Limit
}

func (q *quotaState) reason() string {
	return policies.QuotaReason(q.fraction(), q.q.Window, q.reset)
}

// checkQuota applies the quota policy on the loop: at a window's reset the sessions
// it paused resume, staged in priority order; crossing soft stops admission (see
// admitNext); crossing hard pauses running sessions, lowest priority first.
func (s *Supervisor) checkQuota() {
	q := s.quota
	if q == nil {
		return
	}
	now := s.now()
	if !q.reset.IsZero() && !now.Before(q.reset) {
		prev, news := q.reset, q.level != policies.QuotaOK || len(q.paused) > 0 || q.onFallback
		q.start, q.reset, q.used, q.util, q.level = time.Time{}, time.Time{}, 0, -1, policies.QuotaOK
		q.resumeQ = append(q.resumeQ, s.resumeOrder(q.paused)...)
		q.paused = nil
		if q.onFallback {
			q.onFallback = false
			s.usePrimaries()
		}
		if news { // a window that passed unnoticed (a restart, an idle fleet) is no news
			s.commit(func(tx Tx) error {
				tx.Emit(Event{Kind: EvQuotaReset, Data: jsonData(map[string]any{
					"reason": "quota window reset at " + prev.Local().Format("15:04"), "resume": q.resumeQ})})
				return nil
			})
		}
	}
	s.stageQuotaResumes(now)
	if q.onFallback {
		return
	}
	level := q.q.Level(q.fraction())
	if level == q.level {
		return
	}
	rising := level == policies.QuotaHard || (level == policies.QuotaSoft && q.level == policies.QuotaOK)
	q.level = level
	if !rising {
		return
	}
	reason := q.reason()
	switch level {
	case policies.QuotaSoft:
		s.commit(func(tx Tx) error {
			tx.Emit(Event{Kind: EvQuotaSoft, Data: jsonData(map[string]any{"reason": "admission stopped: " + reason,
				"fraction": q.fraction(), "soft": q.q.Soft})})
			return nil
		})
	case policies.QuotaHard:
		order := s.pauseOrder()
		s.commit(func(tx Tx) error {
			tx.Emit(Event{Kind: EvQuotaHard, Data: jsonData(map[string]any{"reason": reason, "fraction": q.fraction(),
				"hard": q.q.Hard, "pause": order})})
			return nil
		})
		for _, id := range order {
			if ls := s.sessions[id]; ls != nil && s.pauseFor(ls, TaskPaused, "paused "+id+": "+reason) == nil {
				q.paused = append(q.paused, id)
			}
		}
	}
}

// stageQuotaResumes resumes the next session waiting for it once the fleet's launch
// interval has passed since the last, so a reset grows the fleet back in steps.
func (s *Supervisor) stageQuotaResumes(now time.Time) {
	q := s.quota
	if len(q.resumeQ) == 0 || now.Sub(q.lastResume) < s.fleet.Admission.Interval {
		return
	}
	s.resumeNextQuotaPaused("quota window reset")
	q.lastResume = now
	if len(q.resumeQ) > 0 && s.fleet.Admission.Interval > 0 {
		s.admitDue = s.fleet.Admission.Interval
	}
}

func (s *Supervisor) resumeNextQuotaPaused(why string) {
	q := s.quota
	id := q.resumeQ[0]
	q.resumeQ = q.resumeQ[1:]
	ls := s.sessions[id]
	if ls == nil || ls.rec.State != SessionPaused || s.tasks[ls.rec.Task].State != TaskPaused {
		return // ended, or the user already resumed it
	}
	if err := s.resumeFor(ls, fmt.Sprintf("resumed %s: %s", id, why)); err != nil {
		s.log.Error("resume after quota reset", "session", id, "err", err)
	}
}

// pauseOrder lists the running sessions lowest priority first.
func (s *Supervisor) pauseOrder() []string {
	var cs []policies.QuotaCandidate
	for id, ls := range s.sessions {
		if ls.rec.State == SessionRunning {
			cs = append(cs, policies.QuotaCandidate{Session: id, Priority: s.tasks[ls.rec.Task].Priority, Started: ls.rec.Started})
		}
	}
	return policies.PauseOrder(cs)
}

// resumeOrder orders sessions highest priority first.
func (s *Supervisor) resumeOrder(ids []string) []string {
	var cs []policies.QuotaCandidate
	for _, id := range ids {
		if ls := s.sessions[id]; ls != nil {
			cs = append(cs, policies.QuotaCandidate{Session: id, Priority: s.tasks[ls.rec.Task].Priority, Started: ls.rec.Started})
		}
	}
	return policies.ResumeOrder(cs)
}

// quotaHold is why admission must wait for the quota, or "" when it need not.
func (s *Supervisor) quotaHold() string {
	q := s.quota
	if q == nil || q.onFallback || q.level == policies.QuotaOK {
		return ""
	}
	return fmt.Sprintf("quota: %s (new sessions wait below %.0f%%)", q.reason(), 100*q.q.Soft)
}

// QuotaView is the quota as the TUI header and `corral status` show it.
type QuotaView struct {
	Metric   string        `json:"metric"`
	Used     float64       `json:"used"`
	Limit    float64       `json:"limit,omitempty"`
	Fraction float64       `json:"fraction"`
	Soft     float64       `json:"soft"`
	Hard     float64       `json:"hard"`
	Level    string        `json:"level"`
	Window   time.Duration `json:"window"`
	Reset    time.Time     `json:"reset,omitzero"`
	Reason   string        `json:"reason"`
	Paused   []string      `json:"paused,omitempty"`
	Fallback bool          `json:"fallback,omitempty"`
}

func (s *Supervisor) quotaView() *QuotaView {
	q := s.quota
	if q == nil {
		return nil
	}
	v := &QuotaView{Metric: q.q.Metric, Used: q.used, Limit: q.q.Limit, Fraction: q.fraction(), Soft: q.q.Soft,
		Hard: q.q.Hard, Level: string(q.level), Window: q.q.Window, Reset: q.reset, Reason: q.reason(),
		Paused: append([]string(nil), q.paused...), Fallback: q.onFallback}
	if q.q.Metric == policies.QuotaUtilization {
		v.Used = max(q.util, 0)
	}
	return v
}
