package supervisor

import (
	"fmt"
	"strings"
)

// laneOnRed applies the fleet's red policy once a culprit is named: admission narrows
// (laneGateNow, from now until a green head), and the culprit's task gets a repair
// task, a revert, or a human.
func (s *Supervisor) laneOnRed(run LaneRun, culprit Publish) {
	lane := s.laneConfig()
	gate := s.laneGateNow()
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvLaneNarrowed, Task: culprit.Task, Data: jsonData(map[string]any{
			"run": run.ID, "mode": gate.mode, "paths": gate.paths, "reason": gate.reason})})
		return nil
	})
	report := s.failureReport(run, culprit)
	t := s.tasks[culprit.Task]
	switch {
	case t == nil:
		s.laneHold(run, culprit, nil, "its task is not in this fleet")
	case lane.OnRed == OnRedRepair:
		s.openRepair(run, culprit, t, report)
	case lane.OnRed == OnRedRevert:
		s.revertCulprit(run, culprit, t, report)
	default:
		s.laneHold(run, culprit, t, "the fleet's policy holds a red head for a human")
	}
	s.kick()
}

// failureReport is what a repair (or a retried culprit) reads at $CORRAL_FAILURE.
func (s *Supervisor) failureReport(run LaneRun, culprit Publish) string {
	var b strings.Builder
	fmt.Fprintf(&b, "corral lane: the integration test failed\n")
	fmt.Fprintf(&b, "test:    %s\n", s.fleet.Test)
	fmt.Fprintf(&b, "head:    %s (lane run %d, %d run(s), red every time)\n", run.Commit, run.ID, run.Runs)
	fmt.Fprintf(&b, "culprit: publish %d by task %s (session %s), commit %s\n", culprit.ID, culprit.Task, culprit.Session, culprit.NewHead)
	fmt.Fprintf(&b, "paths:   %s\n", strings.Join(culprit.Paths, " "))
	if run.Record != "" {
		fmt.Fprintf(&b, "output (its tail; all of it on the host at %s):\n", run.Record)
	} else {
		fmt.Fprintf(&b, "output:\n")
	}
	b.WriteString(strings.ReplaceAll(run.Output, "\r\n", "\n"))
	return b.String()
}

// repairID names the repair task of task for lane run run, within the id rules.
func repairID(task string, run int64) string {
	suffix := fmt.Sprintf("-%d", run)
	base := "fix-" + task
	if len(base)+len(suffix) > 48 {
		base = base[:48-len(suffix)]
	}
	return strings.TrimRight(base, "-._") + suffix
}

// openRepair queues a one-shot repair task for the culprit's task: its agent, intent and
// budget, a prompt that says what broke, the failing output at $CORRAL_FAILURE, and a
// priority above the rest so it runs first (admission lets repairs through the gate).
func (s *Supervisor) openRepair(run LaneRun, culprit Publish, orig *Task, report string) {
	prefix := strings.TrimSuffix(repairID(orig.ID, 0), "0")
	for _, id := range s.order {
		if t := s.tasks[id]; t.Repairs != 0 && !t.State.Ended() && strings.HasPrefix(id, prefix) {
			return // one repair at a time for a task: it is already being fixed
		}
	}
	fix := Task{
		ID: repairID(orig.ID, run.ID),
		Prompt: fmt.Sprintf("The fleet's integration test (%s) fails at head %.12s since publish %d of task %s. "+
			"Make it pass again without undoing that task's intent; the failing output is in $CORRAL_FAILURE.\n\nThe task was: %s",
			s.fleet.Test, run.Commit, culprit.ID, orig.ID, orig.Prompt),
		Agent: orig.Agent, Lifetime: OneShot, Intent: orig.Intent, CPU: orig.CPU, Memory: orig.Memory, Pids: orig.Pids,
		Network: orig.Network, EnvFiles: orig.EnvFiles, Priority: orig.Priority + 1000, Retries: orig.Retries,
		Accept: orig.Accept, Repairs: run.ID,
	}
	if err := s.writeFailure(fix.ID, report); err != nil {
		s.log.Error("lane: failure report", "task", fix.ID, "err", err)
	}
	if err := s.addTasks([]Task{fix}); err != nil {
		s.log.Error("lane: open repair", "task", fix.ID, "err", err)
		s.laneHold(run, culprit, orig, "could not open a repair task: "+err.Error())
		return
	}
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvLaneRepair, Task: fix.ID, Data: jsonData(map[string]any{
			"run": run.ID, "culprit": culprit.ID, "for": orig.ID, "failure": s.failureFile(fix.ID)})})
		return nil
	})
}

// revertCulprit lands a new commit on the head that undoes the culprit's commit —
// history is never rewritten — through the publish engine: the culprit's parent is
// offered as a change against the culprit's commit, three-way merged onto the head as
// it is now and moved there by compare-and-swap. The culprit's task is retried with
// the failure at $CORRAL_FAILURE if it has retries left, else it waits in the inbox.
func (s *Supervisor) revertCulprit(run LaneRun, culprit Publish, t *Task, report string) {
	var sess Session
	if err := s.store.View(func(r Reader) error {
		var err error
		sess, err = r.Session(culprit.Session)
		return err
	}); err != nil {
		s.laneHold(run, culprit, t, "cannot revert: "+err.Error())
		return
	}
	sess.Base = culprit.NewHead
	rt := *t
	rt.Prompt = fmt.Sprintf("Revert publish %d: the integration test went red (lane run %d)", culprit.ID, run.ID)
	res, err := s.pub.Publish(PublishRequest{Task: rt, Session: sess, Pending: culprit.Head, Approved: true, Rules: s.planRules()})
	if err != nil || res.NewHead == "" {
		why := res.Message
		if err != nil {
			why = err.Error()
		}
		s.laneHold(run, culprit, t, "the revert did not land: "+why)
		return
	}
	s.advanceHead(res)
	p := Publish{Task: t.ID, Session: culprit.Session, Outcome: res.Outcome, Base: culprit.NewHead, Head: res.Head,
		NewHead: res.NewHead, Paths: culprit.Paths, Message: fmt.Sprintf("revert of publish %d (lane run %d red)", culprit.ID, run.ID), Time: s.now()}
	if err := s.writeFailure(t.ID, report); err != nil {
		s.log.Error("lane: failure report", "task", t.ID, "err", err)
	}
	p.ID = s.recordPublish(t, p, nil)
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvLaneReverted, Task: t.ID, Session: culprit.Session, Data: jsonData(map[string]any{
			"run": run.ID, "culprit": culprit.ID, "publish": p.ID, "new_head": res.NewHead})})
		return nil
	})
	s.rejectAttempt(t, culprit.Session, fmt.Sprintf("publish %d reverted: it turned the integration test red", culprit.ID))
	s.laneLanded(p)
}

// laneHold leaves the red head to a human: the culprit's task waits in the inbox with
// the failure at hand; admission stays narrowed until a green head.
func (s *Supervisor) laneHold(run LaneRun, culprit Publish, t *Task, why string) {
	data := map[string]any{"run": run.ID, "culprit": culprit.ID, "reason": why}
	if t == nil {
		s.commit(func(tx Tx) error {
			tx.Emit(Event{Kind: EvLaneHeld, Task: culprit.Task, Data: jsonData(data)})
			return nil
		})
		return
	}
	if err := s.writeFailure(t.ID, s.failureReport(run, culprit)); err != nil {
		s.log.Error("lane: failure report", "task", t.ID, "err", err)
	}
	t.State, t.Reason = TaskInbox, fmt.Sprintf("lane red since its publish %d: %s", culprit.ID, why)
	s.saveTask(t, Event{Kind: EvLaneHeld, Task: t.ID, Session: culprit.Session, Data: jsonData(data)},
		Event{Kind: EvTaskInbox, Task: t.ID, Session: culprit.Session, Data: jsonData(map[string]any{"reason": t.Reason})})
}

// repairPending reports whether a repair task is queued or under way.
func (s *Supervisor) repairPending() bool {
	for _, id := range s.order {
		if t := s.tasks[id]; t.Repairs != 0 && !t.State.Ended() && t.State != TaskInbox {
			return true
		}
	}
	return false
}
