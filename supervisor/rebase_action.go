package supervisor

import (
	"fmt"

	"corral/sandbox"
)

// Rebase carries a live session's private layer onto the current head and continues
// it there: paths the head did not touch move as they are, text both sides changed is
// merged, and clashes stay in the workspace — text with conflict markers, anything
// else as the session had it — listed in the result, the session.rebased event and,
// for the agent, the file at $CORRAL_CONFLICT. The agent's processes restart on the
// new base (a paused session stays paused); gitignored files (build output, caches)
// come along. It applies to persistent sessions and to paused one-shot ones; a
// running one-shot session reaches the head by publishing. If the new session cannot
// start, the task is interrupted with its old layer intact, and Resume continues it
// on the old base.
func (s *Supervisor) Rebase(task string) (res RebaseResult, err error) {
	s.call(func() { res, err = s.rebase(task) })
	s.kick()
	return res, err
}

func (s *Supervisor) rebase(task string) (RebaseResult, error) {
	t, err := s.taskOf(task)
	if err != nil {
		return RebaseResult{}, err
	}
	ls := s.liveOf(task)
	switch {
	case ls == nil:
		return RebaseResult{}, notApplicable("task %s has no live session to rebase", task)
	case t.State == TaskPublishing:
		return RebaseResult{}, notApplicable("task %s is publishing; rebase once it lands", task)
	case t.Lifetime != Persistent && ls.rec.State != SessionPaused:
		return RebaseResult{}, notApplicable("task %s is a running one-shot session: pause it first, or let it publish", task)
	case ls.rec.Base == s.fleet.Head:
		return RebaseResult{}, notApplicable("task %s is already on the head %.9s", task, s.fleet.Head)
	}
	rb, ok := s.pub.(Rebaser)
	if !ok {
		return RebaseResult{}, fmt.Errorf("rebase %s: this fleet's publisher cannot rebase", task)
	}
	wasPaused := ls.rec.State == SessionPaused
	if !ls.sb.Frozen() {
		if err := ls.sb.Freeze(); err != nil {
			return RebaseResult{}, err
		}
	}
	// Until the old session is destroyed, any failure leaves it as it was.
	undo := func() {
		if !wasPaused {
			ls.sb.Thaw()
		}
	}
	cs, err := ls.sb.Capture()
	if err != nil {
		undo()
		return RebaseResult{}, err
	}
	res, err := rb.Rebase(RebaseRequest{Session: ls.rec, Changes: cs, Rules: s.planRules()})
	if err != nil {
		undo()
		return res, err
	}
	layer, err := ls.sb.RebaseLayer(res.Layer)
	if err != nil {
		undo()
		return res, err
	}
	old := ls.rec
	id := s.rebasedID(old)
	s.resolveMovedBy(res.Conflicts, res.Moves)
	if len(res.Conflicts) > 0 {
		msg := fmt.Sprintf("rebased onto %.12s: %s (markers left in the workspace)", res.Head, describeConflicts(res.Conflicts))
		if err := s.writeConflictReport(Publish{Task: t.ID, Session: old.ID, Base: old.Base, Paths: changedPaths(cs)},
			PublishResult{Head: res.Head, Message: msg, Moves: res.Moves}, res.Conflicts, t.Attempts); err != nil {
			s.log.Error("write rebase report", "task", t.ID, "err", err)
		}
	}
	s.endSession(ls, true, SessionRebased, nil)
	if err := s.launch(t, launch{id: id, base: res.Head, layer: layer, follows: old.ID}); err != nil {
		// The old session's directory still holds both its own layer and the rebased
		// one; its record says interrupted, so Resume continues it where it was.
		old.State = SessionInterrupted
		t.State, t.Reason = TaskInterrupted, "rebase: "+err.Error()
		s.commit(func(tx Tx) error { return tx.PutSession(old) })
		s.saveTask(t, Event{Kind: EvTaskInterrupted, Task: t.ID, Session: old.ID, Data: jsonData(map[string]string{"reason": t.Reason})})
		return res, fmt.Errorf("rebase %s: %w", task, err)
	}
	if err := sandbox.DiscardSession(s.repo, old.ID); err != nil {
		s.log.Error("drop rebased layer", "session", old.ID, "err", err)
	}
	if wasPaused {
		if nl := s.sessions[id]; nl != nil {
			if err := nl.sb.Freeze(); err != nil {
				s.log.Error("pause rebased session", "session", id, "err", err)
			} else {
				s.recordPause(nl, t, SessionPaused, TaskPaused, EvSessionPaused)
			}
		}
	}
	conflicts := make([]map[string]any, len(res.Conflicts))
	for i, c := range res.Conflicts {
		conflicts[i] = map[string]any{"path": c.Path, "class": c.Class, "moved_by": c.MovedBy}
	}
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvSessionRebased, Task: t.ID, Session: id, Data: jsonData(map[string]any{
			"previous": old.ID, "from": old.Base, "to": res.Head, "moved": len(res.Moved),
			"merged": res.Merged, "conflicts": conflicts})})
		return nil
	})
	return res, nil
}

// rebasedID names the session that continues old on a new base: the same attempt,
// one rebase further ("fix-2" → "fix-2r1" → "fix-2r2"); ids are never reused.
func (s *Supervisor) rebasedID(old Session) string {
	n := 0
	s.store.View(func(r Reader) error {
		all, err := r.Sessions()
		for _, ss := range all {
			if ss.Task == old.Task && ss.Attempt == old.Attempt {
				n++
			}
		}
		return err
	})
	return fmt.Sprintf("%s-%dr%d", old.Task, old.Attempt, n)
}

func changedPaths(cs sandbox.Changeset) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Path
	}
	return out
}
