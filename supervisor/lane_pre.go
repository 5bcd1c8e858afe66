package supervisor

import (
	"fmt"
)

// Pre gating: a publish lands only if the lane is green on the candidate tree — the
// session's changes merged onto everything ahead of it, not the session's own base.
// Candidates queue in the order their sessions finish. Each is built on top of the one
// ahead of it (speculatively: as if those land), and up to Parallel of them are tested
// at once. The front candidate lands (by compare-and-swap) once green; a red front
// candidate is rejected, and every candidate behind it — built on a tree that will
// never exist — is rebuilt onto what is ahead of it now and tested again.

// lander is a publisher that can build candidates and land them later (GitPublisher).
type lander interface {
	Land(commit, old string) error
	Forget(session string)
}

// preCandidate is one publish waiting in the gate: a session's, or an approved
// escalation's (approval is its publish's id).
type preCandidate struct {
	req      PublishRequest
	settle   func(PublishResult, error) // hands the outcome back: landed, or rejected
	approval int64
	ls       *liveSession  // the session whose sandbox went down when it entered the gate
	res      PublishResult // the build: NewHead is the candidate commit, Head what it is built on
	gen      int           // bumped on every rebuild; results of older builds are dropped
	testing  bool
	verdict  *laneResult // the current build's verdict, once known
	run      LaneRun
}

type preQueue struct {
	cands   []*preCandidate
	running int // tests in flight (of current builds or stale ones)
}

func (q *preQueue) busy() bool { return len(q.cands) > 0 || q.running > 0 }

// preGated reports whether publishes go through the gate.
func (s *Supervisor) preGated() (lander, bool) {
	if !s.laneOn() || s.laneConfig().Gating != GatingPre {
		return nil, false
	}
	l, ok := s.pub.(lander)
	return l, ok
}

// preEnqueue builds a candidate for a publish and queues it for the lane; settle
// gets the outcome once it lands or is rejected (at once, and it returns nil, when the
// build itself settles it: a conflict, an escalation, nothing to publish). It runs on the loop: builds are
// ordered, each onto the newest candidate ahead.
func (s *Supervisor) preEnqueue(req PublishRequest, approval int64, settle func(PublishResult, error)) *preCandidate {
	if s.lane.pre == nil {
		s.lane.pre = &preQueue{}
	}
	c := &preCandidate{req: req, settle: settle, approval: approval}
	if !s.preBuild(c, s.preTip()) {
		return nil
	}
	s.lane.pre.cands = append(s.lane.pre.cands, c)
	s.preSchedule()
	return c
}

// preShutdown records the sessions whose candidates wait in the gate as interrupted,
// their layers kept, as shutdown does for live sessions: the next run resumes them.
func (s *Supervisor) preShutdown() {
	if s.lane.pre == nil {
		return
	}
	for _, c := range s.lane.pre.cands {
		if c.ls == nil {
			continue
		}
		s.finishSession(c.ls, SessionInterrupted, nil)
		if t := s.tasks[c.ls.rec.Task]; t != nil && !t.State.Ended() {
			t.State, t.Reason = TaskInterrupted, "supervisor stopped while its publish waited for the lane"
			s.saveTask(t, Event{Kind: EvTaskInterrupted, Task: t.ID, Session: c.ls.rec.ID})
		}
	}
	s.lane.pre.cands = nil
}

// preTip is the commit a new candidate builds on: the newest candidate, or the head.
func (s *Supervisor) preTip() string {
	if q := s.lane.pre; q != nil && len(q.cands) > 0 {
		return q.cands[len(q.cands)-1].res.NewHead
	}
	return s.fleet.Head
}

// preBuild (re)builds c onto onto. A build that would not land anyway (a conflict, an
// escalation, nothing to publish, an error) is settled at once like any publish, and
// preBuild returns false.
func (s *Supervisor) preBuild(c *preCandidate, onto string) bool {
	req := c.req
	req.Onto = onto
	if c.res.Pending != "" {
		req.Pending = c.res.Pending // rebuild from the kept work; the layer may be gone
	}
	res, err := s.pub.Publish(req)
	c.gen++
	c.verdict, c.testing = nil, false
	if err != nil || res.NewHead == "" {
		if c.res.Pending != "" {
			res.Pending = c.res.Pending
		}
		s.preSettle(c, res, err)
		return false
	}
	c.res = res
	return true
}

// preSettle hands a candidate that leaves the gate back to its publish path.
func (s *Supervisor) preSettle(c *preCandidate, res PublishResult, err error) {
	if l, ok := s.pub.(lander); ok {
		l.Forget(c.req.Session.ID)
	}
	c.settle(res, err)
}

// preHolds reports whether an approved escalation waits in the gate.
func (s *Supervisor) preHolds(publish int64) bool {
	if s.lane.pre == nil {
		return false
	}
	for _, c := range s.lane.pre.cands {
		if c.approval == publish {
			return true
		}
	}
	return false
}

// preSchedule starts tests for built candidates, front first, up to the limit.
func (s *Supervisor) preSchedule() {
	q := s.lane.pre
	if q == nil || s.ctx == nil || s.ctx.Err() != nil {
		return
	}
	limit := s.laneConfig().Parallel
	for _, c := range q.cands {
		if q.running >= limit {
			break
		}
		if c.testing || c.verdict != nil {
			continue
		}
		c.testing = true
		q.running++
		c.run = LaneRun{Kind: LaneKindCandidate, Commit: c.res.NewHead, Outcome: LaneRunning, Started: s.now()}
		s.commit(func(tx Tx) error {
			id, err := tx.AddLaneRun(c.run)
			c.run.ID = id
			tx.Emit(Event{Kind: EvLaneStarted, Task: c.req.Task.ID, Session: c.req.Session.ID, Data: jsonData(map[string]any{
				"run": id, "kind": LaneKindCandidate, "commit": c.res.NewHead, "onto": c.res.Head})})
			return err
		})
		c, gen, run := c, c.gen, c.run
		s.laneStart(run, func(res laneResult) { s.onCandidate(c, gen, run, res) })
	}
}

// onCandidate takes a candidate's verdict; a verdict on an older build only frees its
// slot (the run is recorded as skipped).
func (s *Supervisor) onCandidate(c *preCandidate, gen int, run LaneRun, res laneResult) {
	q := s.lane.pre
	q.running--
	if c.gen != gen || !s.preQueued(c) {
		res.Outcome = LaneSkipped
		s.finishRun(&run, res, map[string]any{"reason": "rebuilt: a candidate ahead of it failed"})
		s.preSchedule()
		return
	}
	c.testing = false
	if res.Outcome == LaneError {
		// No verdict is not a green one: the candidate does not land untested.
		res.Outcome = LaneRed
		res.Output = "the lane could not run the test: " + res.Output
	}
	s.finishRun(&c.run, res, map[string]any{"task": c.req.Task.ID})
	c.verdict = &res
	s.preAdvance()
	s.preSchedule()
}

func (s *Supervisor) preQueued(c *preCandidate) bool {
	for _, o := range s.lane.pre.cands {
		if o == c {
			return true
		}
	}
	return false
}

// preAdvance lands green candidates from the front and rejects a red front one,
// rebuilding what was built on it.
func (s *Supervisor) preAdvance() {
	q := s.lane.pre
	l, _ := s.pub.(lander)
	for len(q.cands) > 0 && q.cands[0].verdict != nil {
		c := q.cands[0]
		q.cands = q.cands[1:]
		if c.verdict.Outcome == LaneRed {
			s.preReject(c)
			s.preRebuild(s.fleet.Head)
			continue
		}
		if err := l.Land(c.res.NewHead, c.res.Head); err != nil {
			// The head moved outside the gate (an approval, a revert): build again on it.
			s.log.Warn("lane: land candidate", "session", c.req.Session.ID, "err", err)
			q.cands = append([]*preCandidate{c}, q.cands...)
			head, herr := s.repo.Git("rev-parse", "refs/heads/"+s.fleet.HeadRef)
			if herr != nil {
				return
			}
			s.fleet.Head = trimSpace(head)
			s.preRebuild(s.fleet.Head)
			return
		}
		s.lane.verified, s.lane.verifiedAs = c.res.NewHead, c.verdict.Outcome
		s.preSettle(c, c.res, nil)
	}
}

// preReject rejects a red candidate: nothing of it lands, and its task's next attempt
// finds the failing output at $CORRAL_FAILURE.
func (s *Supervisor) preReject(c *preCandidate) {
	v := c.verdict
	report := fmt.Sprintf("corral lane: the integration test failed on this task's candidate tree, so it did not land\n"+
		"test:      %s\ncandidate: %s (onto %s, lane run %d)\noutput:\n%s", s.fleet.Test, c.res.NewHead, c.res.Head, c.run.ID, v.Output)
	if err := s.writeFailure(c.req.Task.ID, report); err != nil {
		s.log.Error("lane: failure report", "task", c.req.Task.ID, "err", err)
	}
	res := PublishResult{Outcome: OutcomeRejected, Head: c.res.Head,
		Message: fmt.Sprintf("lane red on the candidate tree (lane run %d): %s", c.run.ID, firstLine(lastLine(v.Output)))}
	s.preSettle(c, res, nil)
}

// preRebuild rebuilds every queued candidate in order, the first onto base.
func (s *Supervisor) preRebuild(base string) {
	q := s.lane.pre
	old := q.cands
	q.cands = nil
	onto := base
	for _, c := range old {
		if s.preBuild(c, onto) {
			q.cands = append(q.cands, c)
			onto = c.res.NewHead
		}
	}
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	return s
}
