package supervisor

import (
	"fmt"
	"os"

	"corral/sandbox"
)

// recover loads the fleet's tasks and makes the records true again after a supervisor
// died: a session the store calls live has no process any more (the init dies with its
// supervisor), so it becomes interrupted with its private layer intact, and its task
// waits to be resumed or discarded. Stale mounts and cgroups of this fleet are cleaned.
func (s *Supervisor) recover() error {
	var tasks []Task
	var sessions []Session
	err := s.store.View(func(r Reader) error {
		var err error
		if tasks, err = r.Tasks(); err != nil {
			return err
		}
		sessions, err = r.Sessions()
		return err
	})
	if err != nil {
		return fmt.Errorf("supervisor: load: %w", err)
	}
	for i := range tasks {
		t := tasks[i]
		s.tasks[t.ID] = &t
		s.order = append(s.order, t.ID)
	}
	var interrupted []Session
	for _, ss := range sessions {
		if ss.State.Live() {
			interrupted = append(interrupted, ss)
		}
	}
	s.reapCtl()
	if err := s.loadInbox(); err != nil {
		return fmt.Errorf("supervisor: load inbox: %w", err)
	}
	rep, err := sandbox.Reap(s.repo, func(string) bool { return false })
	if err != nil {
		s.log.Warn("reap", "err", err)
	}
	if len(interrupted) == 0 && len(rep.Cgroups) == 0 && len(rep.Mounts) == 0 {
		return nil
	}
	_, err = s.commit(func(tx Tx) error {
		for _, ss := range interrupted {
			ss.State, ss.Pid, ss.Ended = SessionInterrupted, 0, s.now()
			if err := tx.PutSession(ss); err != nil {
				return err
			}
			if t := s.tasks[ss.Task]; t != nil && !t.State.Ended() {
				t.State, t.Reason = TaskInterrupted, "supervisor died under session "+ss.ID
				if err := tx.PutTask(*t); err != nil {
					return err
				}
				tx.Emit(Event{Kind: EvTaskInterrupted, Task: t.ID, Session: ss.ID, Data: jsonData(map[string]any{
					"layer": ss.Layer, "layer_kept": dirExists(ss.Layer)})})
			}
		}
		tx.Emit(Event{Kind: EvSupervisorRecover, Data: jsonData(map[string]any{
			"interrupted": len(interrupted), "cgroups_reaped": rep.Cgroups, "mounts_reaped": rep.Mounts})})
		return nil
	})
	return err
}

// resumeTask starts a new attempt of an interrupted task over the private layer its
// last session left, at that session's base: the files survive, the agent reruns.
func (s *Supervisor) resumeTask(id string) error {
	t := s.tasks[id]
	if t == nil {
		return fmt.Errorf("task %s: %w", id, ErrNotFound)
	}
	if t.State != TaskInterrupted {
		return fmt.Errorf("task %s is %s, not interrupted", id, t.State)
	}
	last, err := s.lastSession(id)
	if err != nil {
		return err
	}
	if !dirExists(last.Layer) {
		// Nothing to continue from: start over at the head.
		t.State = TaskQueued
		s.saveTask(t, Event{Kind: EvTaskQueued, Task: id, Data: jsonData(map[string]string{"reason": "layer of " + last.ID + " is gone"})})
		return nil
	}
	s.lastLaunch = s.now()
	return s.startAttempt(t, &last)
}

// lastSession returns the task's newest session record.
func (s *Supervisor) lastSession(task string) (Session, error) {
	var last Session
	err := s.store.View(func(r Reader) error {
		all, err := r.Sessions()
		for _, ss := range all {
			if ss.Task == task && ss.Attempt >= last.Attempt {
				last = ss
			}
		}
		return err
	})
	if err == nil && last.ID == "" {
		err = fmt.Errorf("task %s has no session", task)
	}
	return last, err
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
