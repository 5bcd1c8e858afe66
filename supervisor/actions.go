package supervisor

import (
	"errors"
	"fmt"

	"corral/sandbox"
)

// ErrNotApplicable says an action does not apply to the task in its current state;
// the message says why, for the TUI's disabled keys.
var ErrNotApplicable = errors.New("not applicable")

func notApplicable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotApplicable, fmt.Sprintf(format, args...))
}

// AddTasks adds queued tasks to the fleet (from the plan, or `corral add` while it
// runs). Ids must be new.
func (s *Supervisor) AddTasks(tasks ...Task) error {
	var err error
	s.call(func() { err = s.addTasks(tasks) })
	s.kick()
	return err
}

func (s *Supervisor) addTasks(tasks []Task) error {
	for _, t := range tasks {
		if _, ok := s.tasks[t.ID]; ok {
			return fmt.Errorf("task %s: already in the fleet", t.ID)
		}
	}
	now := s.now()
	_, err := s.commit(func(tx Tx) error {
		for i := range tasks {
			t := &tasks[i]
			t.State, t.Created, t.Updated = TaskQueued, now, now
			if t.Lifetime == "" {
				t.Lifetime = OneShot
			}
			if t.Network == "" {
				t.Network = string(sandbox.NetPrivate)
			}
			if err := tx.PutTask(*t); err != nil {
				return err
			}
			if err := tx.SetIntents(t.ID, t.Intent); err != nil {
				return err
			}
			tx.Emit(Event{Kind: EvTaskQueued, Task: t.ID, Data: jsonData(map[string]any{
				"priority": t.Priority, "after": t.After, "intent": t.Intent})})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := range tasks {
		t := tasks[i]
		s.tasks[t.ID] = &t
		s.order = append(s.order, t.ID)
	}
	s.noteOverlaps(tasks)
	return nil
}

// noteOverlaps makes overlapping intents public as events when tasks arrive.
func (s *Supervisor) noteOverlaps(added []Task) {
	for _, a := range added {
		for _, id := range s.order {
			b := s.tasks[id]
			if b.ID == a.ID || b.State.Ended() || !s.intentsOverlap(a, *b) {
				continue
			}
			s.commit(func(tx Tx) error {
				tx.Emit(Event{Kind: EvIntentOverlap, Task: a.ID, Data: jsonData(map[string]any{
					"with": b.ID, "policy": s.fleet.Admission.Overlap})})
				return nil
			})
		}
	}
}

// taskOf returns a task by id, or an error naming it.
func (s *Supervisor) taskOf(id string) (*Task, error) {
	if t := s.tasks[id]; t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("task %s: %w", id, ErrNotFound)
}

// liveOf returns the live session of a task.
func (s *Supervisor) liveOf(task string) *liveSession {
	for _, ls := range s.sessions {
		if ls.rec.Task == task {
			return ls
		}
	}
	return nil
}

// runningOf returns the task's live session, or why an action needing one does not
// apply.
func (s *Supervisor) runningOf(task string) (*liveSession, error) {
	if ls := s.liveOf(task); ls != nil {
		return ls, nil
	}
	return nil, notApplicable("task %s has no running session", task)
}

// Pause freezes the task's session where it stands.
func (s *Supervisor) Pause(task string) error {
	var err error
	s.call(func() {
		ls, lerr := s.runningOf(task)
		if err = lerr; err != nil {
			return
		}
		if ls.rec.State == SessionPaused {
			err = notApplicable("task %s is already paused", task)
			return
		}
		if err = ls.sb.Freeze(); err != nil {
			return
		}
		s.recordPause(ls, s.tasks[task], SessionPaused, TaskPaused, EvSessionPaused)
	})
	return err
}

// recordPause stores a session frozen or thawed, its task's state, and the event.
func (s *Supervisor) recordPause(ls *liveSession, t *Task, ss SessionState, ts TaskState, kind string) {
	ls.rec.State, t.State = ss, ts
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: kind, Task: t.ID, Session: ls.rec.ID})
		if err := tx.PutSession(ls.rec); err != nil {
			return err
		}
		return tx.PutTask(*t)
	})
}

// Resume thaws a paused task's session, or resumes an interrupted task over the layer
// its last session left.
func (s *Supervisor) Resume(task string) error {
	var err error
	s.call(func() {
		t, terr := s.taskOf(task)
		if err = terr; err != nil {
			return
		}
		if t.State == TaskInterrupted {
			err = s.resumeTask(task)
			return
		}
		ls := s.liveOf(task)
		if ls == nil || ls.rec.State != SessionPaused {
			err = notApplicable("task %s is not paused", task)
			return
		}
		if err = ls.sb.Thaw(); err != nil {
			return
		}
		if s.gw != nil {
			s.gw.Release(ls.rec.ID)
		}
		if t.State == TaskInbox {
			ls.budgetWaived = true // the user chose to let it spend past its budget
		}
		s.recordPause(ls, t, SessionRunning, TaskRunning, EvSessionResumed)
	})
	return err
}

// Discard kills the task's session, destroys its sandbox and drops its layer; the
// task ends discarded.
func (s *Supervisor) Discard(task string) error {
	var err error
	s.call(func() {
		t, terr := s.taskOf(task)
		if err = terr; err != nil {
			return
		}
		if t.State.Ended() {
			err = notApplicable("task %s already ended %s", task, t.State)
			return
		}
		if ls := s.liveOf(task); ls != nil {
			s.endSession(ls, false, SessionDiscarded, nil)
		} else if last, lerr := s.lastSession(task); lerr == nil && dirExists(last.Layer) {
			// An interrupted or failed attempt's kept layer goes too.
			sandbox.DiscardSession(s.repo, last.ID)
		}
		t.State, t.Reason = TaskDiscarded, "discarded by the user"
		s.saveTask(t, Event{Kind: EvTaskDiscarded, Task: task})
		s.settleHandoff(task)
	})
	s.kick()
	return err
}

// Kill ends the task's agent now; the layer is kept and the task fails (Retry runs it
// again).
func (s *Supervisor) Kill(task string) error {
	var err error
	s.call(func() {
		ls, lerr := s.runningOf(task)
		if err = lerr; err != nil {
			return
		}
		code := 137
		s.endSession(ls, true, SessionFailed, &code)
		t := s.tasks[task]
		t.State, t.Reason = TaskFailed, "killed by the user"
		s.saveTask(t, Event{Kind: EvSessionKilled, Task: task, Session: ls.rec.ID},
			Event{Kind: EvTaskFailed, Task: task, Session: ls.rec.ID, Data: jsonData(map[string]string{"reason": t.Reason})})
	})
	s.kick()
	return err
}

// Retry queues a new attempt of a failed, interrupted or inbox task.
func (s *Supervisor) Retry(task string) error {
	var err error
	s.call(func() {
		t, terr := s.taskOf(task)
		if err = terr; err != nil {
			return
		}
		if ls := s.liveOf(task); ls != nil {
			// An over-budget task waits in the inbox with its session paused, work intact.
			err = notApplicable("task %s has a paused session %s: resume or discard it", task, ls.rec.ID)
			return
		}
		switch t.State {
		case TaskFailed, TaskInterrupted, TaskInbox:
		default:
			err = notApplicable("task %s is %s; only failed, interrupted or inbox tasks retry", task, t.State)
			return
		}
		t.State, t.Reason = TaskQueued, "retry asked by the user"
		if t.Attempts > t.Retries {
			t.Retries = t.Attempts // one more attempt than it has had
		}
		s.saveTask(t, Event{Kind: EvTaskRetrying, Task: task, Data: jsonData(map[string]any{"reason": t.Reason, "attempt": t.Attempts + 1})})
		s.settleHandoff(task)
	})
	s.kick()
	return err
}

// PublishNow publishes a persistent task's current changeset; its session goes on.
func (s *Supervisor) PublishNow(task string) error {
	var err error
	s.call(func() {
		t := s.tasks[task]
		ls := s.liveOf(task)
		switch {
		case t == nil:
			err = fmt.Errorf("task %s: %w", task, ErrNotFound)
		case t.Lifetime != Persistent:
			err = notApplicable("task %s is one-shot: it publishes when its agent exits", task)
		case ls == nil:
			_, err = s.runningOf(task)
		case t.State == TaskPublishing:
			err = notApplicable("task %s is publishing already", task)
		default:
			s.publishSession(ls, 0, false)
		}
	})
	return err
}
