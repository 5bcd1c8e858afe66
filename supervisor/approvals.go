package supervisor

import (
	"errors"
	"fmt"
	"strings"
)

// Decisions on escalated publishes.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"

	EvPublishApproved = "publish.approved"
	EvPublishDenied   = "publish.denied"
)

// ErrDecided is returned for a publish that is not (or no longer) waiting for a human.
var ErrDecided = errors.New("not waiting for a decision")

// pendingRef is where an escalated publish keeps its work until it is decided.
func pendingRef(session string) string { return "refs/corral/escalated/" + session }

// Approve lands an escalated publish. The publish is re-run against the head as it is
// now — the head has usually moved since the escalation — with the escalated paths
// allowed to merge; a conflict found then rejects it like any other publish (retried
// or sent to the inbox). The decision is recorded as an Approval either way.
func (s *Supervisor) Approve(publishID int64) error {
	var err error
	s.call(func() { err = s.decide(Approval{Publish: publishID, Decision: DecisionApprove, Time: s.now()}, true) })
	return err
}

// Deny turns an escalated publish down: nothing lands, the task fails with the reason.
func (s *Supervisor) Deny(publishID int64, reason string) error {
	var err error
	s.call(func() {
		err = s.decide(Approval{Publish: publishID, Decision: DecisionDeny, Reason: reason, Time: s.now()}, true)
	})
	return err
}

// RecordDecision stores a human's decision on an escalated publish for a supervisor
// to apply (`corral approve` and `deny` from another process: the running supervisor
// picks it up from the store, the way it adopts `corral add` tasks).
func RecordDecision(st Store, a Approval) (int64, error) {
	if a.Decision != DecisionApprove && a.Decision != DecisionDeny {
		return 0, fmt.Errorf("decision %q: want approve or deny", a.Decision)
	}
	var id int64
	_, err := st.Update(func(tx Tx) error {
		p, err := findPublish(tx, a.Publish)
		if err != nil {
			return err
		}
		if p.Outcome != OutcomeEscalated {
			return fmt.Errorf("publish %d is %s: %w", a.Publish, p.Outcome, ErrDecided)
		}
		as, err := tx.Approvals()
		if err != nil {
			return err
		}
		for _, prev := range as {
			if prev.Publish == a.Publish {
				return fmt.Errorf("publish %d: already decided (%s): %w", a.Publish, prev.Decision, ErrDecided)
			}
		}
		id, err = tx.AddApproval(a)
		return err
	})
	return id, err
}

// adoptDecisions applies decisions another process recorded. It runs on the loop, and
// only while some task waits in the inbox (escalated publishes put theirs there), so
// an idle fleet does not read the store for nothing.
func (s *Supervisor) adoptDecisions() {
	waiting := false
	for _, t := range s.tasks {
		waiting = waiting || t.State == TaskInbox
	}
	if !waiting {
		return
	}
	var as []Approval
	var pubs []Publish
	if err := s.store.View(func(r Reader) error {
		var err error
		if as, err = r.Approvals(); err != nil {
			return err
		}
		pubs, err = r.Publishes()
		return err
	}); err != nil {
		return
	}
	escalated := map[int64]bool{}
	for _, p := range pubs {
		escalated[p.ID] = p.Outcome == OutcomeEscalated
	}
	for _, a := range as {
		if escalated[a.Publish] {
			if err := s.decide(a, false); err != nil {
				s.log.Error("apply decision", "publish", a.Publish, "err", err)
			}
		}
	}
}

// decide applies a decision on the loop. record: the Approval is not in the store yet.
// An approval runs the publish here, on the loop: decisions are human-paced and a
// publish is a handful of git processes, and it keeps the publish record, the task
// and the fleet's head changing together.
func (s *Supervisor) decide(a Approval, record bool) error {
	var p Publish
	var sess Session
	err := s.store.View(func(r Reader) error {
		var err error
		if p, err = findPublish(r, a.Publish); err != nil {
			return err
		}
		sess, err = r.Session(p.Session)
		return err
	})
	if err != nil {
		return err
	}
	if p.Outcome != OutcomeEscalated {
		return fmt.Errorf("publish %d is %s: %w", p.ID, p.Outcome, ErrDecided)
	}
	t := s.tasks[p.Task]
	if t == nil {
		return fmt.Errorf("publish %d: task %s: %w", p.ID, p.Task, ErrNotFound)
	}
	if record {
		if _, err := RecordDecision(s.store, a); err != nil {
			return err
		}
	}
	ref := pendingRef(p.Session)
	if a.Decision == DecisionDeny {
		defer s.repo.Git("update-ref", "-d", ref) // decided: the held work is no longer needed
		p.Outcome, p.Message = OutcomeDenied, strings.TrimSpace("denied: "+a.Reason)
		t.State, t.Reason = TaskFailed, "publish denied: "+a.Reason
		return s.saveDecision(t, p, nil, Event{Kind: EvPublishDenied, Task: t.ID, Session: p.Session,
			Data: jsonData(map[string]any{"publish": p.ID, "reason": a.Reason})})
	}
	if s.preHolds(p.ID) {
		return nil // approved already, and waiting in the lane's gate
	}
	pending, err := s.repo.Git("rev-parse", "--verify", ref)
	if err != nil {
		return fmt.Errorf("publish %d: held work %s: %w", p.ID, ref, err)
	}
	req := PublishRequest{Task: *t, Session: sess, Pending: strings.TrimSpace(pending), Approved: true, Rules: s.planRules()}
	if _, ok := s.preGated(); ok {
		// Pre gating holds approved work to the same rule: it lands only on a green tree.
		s.preEnqueue(req, p.ID, func(res PublishResult, err error) { s.applyApproval(t, p, ref, res, err) })
		return nil
	}
	res, err := s.pub.Publish(req)
	return s.applyApproval(t, p, ref, res, err)
}

// applyApproval records what re-running an approved publish did, and moves its task on.
func (s *Supervisor) applyApproval(t *Task, p Publish, ref string, res PublishResult, err error) error {
	defer s.repo.Git("update-ref", "-d", ref) // decided: the held work is no longer needed
	if err != nil {
		res = PublishResult{Outcome: OutcomeRejected, Message: err.Error()}
	}
	p.Outcome, p.Head, p.NewHead, p.Message = res.Outcome, res.Head, res.NewHead, "approved; "+res.Message
	s.advanceHead(res)
	approved := Event{Kind: EvPublishApproved, Task: t.ID, Session: p.Session, Data: jsonData(map[string]any{
		"publish": p.ID, "outcome": res.Outcome, "new_head": res.NewHead})}
	switch res.Outcome {
	case OutcomeAccepted, OutcomeMerged, OutcomeEmpty:
		t.State, t.Reason = TaskDone, ""
		err := s.saveDecision(t, p, nil, approved, Event{Kind: EvTaskDone, Task: t.ID, Session: p.Session})
		s.laneLanded(p)
		return err
	}
	// The head moved under the escalation and the re-check found conflicts (or, pre
	// gated, the lane failed it): the same path as any rejection, a fresh attempt at
	// the new head or the inbox.
	s.resolveMovedBy(res.Conflicts, res.Moves)
	if err := s.saveDecision(t, p, res.Conflicts, approved); err != nil {
		return err
	}
	if err := s.writeConflictReport(p, res, res.Conflicts, t.Attempts); err != nil {
		s.log.Error("write conflict report", "task", t.ID, "err", err)
	}
	s.rejectAttempt(t, p.Session, "approved publish rejected at the current head: "+res.Message)
	return nil
}

// saveDecision updates the publish, its task and the fleet's head with their events.
func (s *Supervisor) saveDecision(t *Task, p Publish, conflicts []Conflict, evs ...Event) error {
	t.Updated = s.now()
	for i := range conflicts {
		conflicts[i].Publish = p.ID
	}
	_, err := s.commit(func(tx Tx) error {
		if err := tx.PutPublish(p); err != nil {
			return err
		}
		if err := tx.AddConflicts(conflicts...); err != nil {
			return err
		}
		if err := tx.PutTask(*t); err != nil {
			return err
		}
		if err := tx.PutFleet(s.fleet); err != nil {
			return err
		}
		for _, e := range evs {
			tx.Emit(e)
		}
		return nil
	})
	s.kick()
	return err
}

func findPublish(r Reader, id int64) (Publish, error) {
	pubs, err := r.Publishes()
	if err != nil {
		return Publish{}, err
	}
	for _, p := range pubs {
		if p.ID == id {
			return p, nil
		}
	}
	return Publish{}, fmt.Errorf("publish %d: %w", id, ErrNotFound)
}
