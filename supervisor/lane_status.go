package supervisor

// LaneStatus is the lane as the TUI's header and `corral status` show it.
type LaneStatus struct {
	On       bool   `json:"on"`
	Gating   string `json:"gating,omitempty"`
	Head     string `json:"head,omitempty"`    // the head it speaks of
	Outcome  string `json:"outcome,omitempty"` // green, red, flaky, testing, or untested
	Culprit  int64  `json:"culprit,omitempty"` // red: the publish blamed
	Task     string `json:"task,omitempty"`    // red: the culprit's task
	Narrowed string `json:"narrowed,omitempty"`
	Queue    int    `json:"queue,omitempty"` // pre gating: candidates waiting
}

// laneStatus is the lane's state now (on the loop).
func (s *Supervisor) laneStatus() LaneStatus {
	if !s.laneOn() {
		return LaneStatus{}
	}
	st := LaneStatus{On: true, Gating: s.laneConfig().Gating, Head: s.fleet.Head}
	switch {
	case s.lane.red != nil:
		st.Outcome, st.Culprit = LaneRed, s.lane.red.Culprit
		if c := s.lane.culprit; c != nil {
			st.Task = c.Task
		}
		st.Narrowed = s.laneGateNow().mode
	case s.lane.baseRed && s.lane.verifiedAs == "":
		st.Outcome = LaneRed // since the base: nobody's fault
	case s.lane.verified == s.fleet.Head:
		st.Outcome = s.lane.verifiedAs
		if st.Outcome == "" {
			st.Outcome = LaneGreen
		}
	case s.lane.job != nil:
		st.Outcome = "testing"
	default:
		st.Outcome = "untested"
	}
	if q := s.lane.pre; q != nil {
		st.Queue = len(q.cands)
	}
	return st
}
