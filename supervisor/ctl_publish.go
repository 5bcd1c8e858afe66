package supervisor

// ctl publish: a persistent session publishes now and gets the typed outcome.

import (
	"encoding/json"
	"errors"
	"strings"
)

// PublishOutcome is what `ctl publish` returns: the publish record and its conflicts.
type PublishOutcome struct {
	Publish   Publish         `json:"publish"`
	Conflicts []BoardConflict `json:"conflicts,omitempty"`
	Behind    int             `json:"behind"` // after an accepted publish the caller's base is behind its own work
}

// ctlPublish publishes a persistent session's changeset now and waits for the
// outcome (one-shot sessions publish when their agent exits). A failed accept check
// comes back as the error, with the check's output.
func (s *Supervisor) ctlPublish(session, message string, cancel <-chan struct{}) (PublishOutcome, error) {
	events, unsub := s.Subscribe(256)
	defer unsub()
	err := s.onSession(session, func(ls *liveSession, t *Task) error {
		switch {
		case t.Lifetime != Persistent:
			return notApplicable("task %s is one-shot: it publishes when its agent exits", t.ID)
		case t.State == TaskPublishing:
			return notApplicable("task %s is publishing already", t.ID)
		}
		s.publishSessionMsg(ls, 0, false, message)
		return nil
	})
	if err != nil {
		return PublishOutcome{}, err
	}
	for {
		select {
		case <-cancel:
			return PublishOutcome{}, errors.New("publish: the call was cut before the outcome (it may still land; see board)")
		case e, ok := <-events:
			if !ok {
				return PublishOutcome{}, errors.New("publish: the supervisor stopped")
			}
			if e.Session == session && e.Kind == EvAcceptFailed {
				var d struct {
					Report string `json:"report"`
				}
				json.Unmarshal(e.Data, &d)
				return PublishOutcome{}, errors.New(d.Report)
			}
			if e.Session != session || !strings.HasPrefix(e.Kind, "publish.") || e.Kind == EvPublishQueued {
				continue
			}
			var d struct {
				Publish int64 `json:"publish"`
			}
			json.Unmarshal(e.Data, &d)
			return s.publishOutcome(d.Publish)
		}
	}
}

func (s *Supervisor) publishOutcome(id int64) (PublishOutcome, error) {
	var out PublishOutcome
	err := s.store.View(func(r Reader) error {
		p, err := findPublish(r, id)
		if err != nil {
			return err
		}
		out.Publish = p
		cs, err := r.Conflicts(id)
		for _, c := range cs {
			out.Conflicts = append(out.Conflicts, BoardConflict{Path: c.Path, Class: c.Class})
		}
		return err
	})
	return out, err
}
