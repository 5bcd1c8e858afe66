package supervisor

// ctl intent: declare or narrow what a session will touch; overlaps are told at once.

import (
	"errors"
	"fmt"
	"slices"

	"corral/policies"
)

// IntentResult is what `ctl intent` reports: the caller's intent now and every live
// task it overlaps, told at once.
type IntentResult struct {
	Intent   []string        `json:"intent"`
	Overlaps []IntentOverlap `json:"overlaps"`
}

// IntentOverlap is another task whose intent covers files this one's does.
type IntentOverlap struct {
	Task    string   `json:"task"`
	Session string   `json:"session,omitempty"`
	State   string   `json:"state"`
	Intent  []string `json:"intent"`
	Files   []string `json:"files,omitempty"` // base files both match, at most a few
}

// ctlIntent adds globs to (or drops them from; none: all) the caller's task intent.
// Each overlap becomes an intent.overlap event naming both tasks, which both see on
// the board and in their status.
func (s *Supervisor) ctlIntent(session string, add bool, globs []string) (IntentResult, error) {
	for _, g := range globs {
		if err := policies.ValidIntent(g); err != nil {
			return IntentResult{}, fmt.Errorf("intent: %w", err)
		}
	}
	if add && len(globs) == 0 {
		return IntentResult{}, errors.New("intent add: want at least one GLOB")
	}
	var res IntentResult
	err := s.onSession(session, func(_ *liveSession, t *Task) error {
		next := slices.Clone(t.Intent)
		if add {
			for _, g := range globs {
				if !slices.Contains(next, g) {
					next = append(next, g)
				}
			}
		} else if len(globs) == 0 {
			next = nil
		} else {
			next = slices.DeleteFunc(next, func(g string) bool { return slices.Contains(globs, g) })
		}
		t.Intent = next
		res.Intent = nonNil(next)
		res.Overlaps = []IntentOverlap{}
		var evs []Event
		for _, id := range s.order {
			o := s.tasks[id]
			if o.ID == t.ID || o.State.Ended() || !s.intentsOverlap(*t, *o) {
				continue
			}
			ov := IntentOverlap{Task: o.ID, State: string(o.State), Intent: nonNil(o.Intent), Files: s.overlapFiles(*t, *o, 5)}
			if ols := s.liveOf(o.ID); ols != nil {
				ov.Session = ols.rec.ID
			}
			res.Overlaps = append(res.Overlaps, ov)
			evs = append(evs, Event{Kind: EvIntentOverlap, Task: t.ID, Session: session, Data: jsonData(map[string]any{
				"with": o.ID, "with_session": ov.Session, "files": ov.Files, "policy": s.fleet.Admission.Overlap})})
		}
		t.Updated = s.now()
		_, err := s.commit(func(tx Tx) error {
			if err := tx.PutTask(*t); err != nil {
				return err
			}
			tx.Emit(Event{Kind: EvIntentChanged, Task: t.ID, Session: session, Data: jsonData(map[string]any{"intent": res.Intent})})
			for _, e := range evs {
				tx.Emit(e)
			}
			return nil
		})
		return err
	})
	return res, err
}

// overlapFiles lists up to n base files both tasks' intents match, or the globs they
// share when no base file matches (new files).
func (s *Supervisor) overlapFiles(a, b Task, n int) []string {
	var out []string
	for _, f := range s.baseFiles {
		if matchAny(a.Intent, f) && matchAny(b.Intent, f) {
			if out = append(out, f); len(out) == n {
				return out
			}
		}
	}
	if len(out) == 0 {
		for _, g := range a.Intent {
			if slices.Contains(b.Intent, g) {
				out = append(out, g)
			}
		}
	}
	return out
}
