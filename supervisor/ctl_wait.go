package supervisor

// ctl wait: block until the head moves, a publish lands, or a lease is held.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// WaitResult says what a wait saw change.
type WaitResult struct {
	What    string          `json:"what"` // head, publish or lease
	Head    string          `json:"head,omitempty"`
	Behind  int             `json:"behind"` // commits the head is now ahead of the caller's base
	Publish *Publish        `json:"publish,omitempty"`
	Lease   *BoardLease     `json:"lease,omitempty"`
	Event   json.RawMessage `json:"event,omitempty"`
}

// ctlWait blocks until the head moves (head [--from REV]: away from REV, default the
// head now), a publish has an outcome (publish), or a named lease is held (lease NAME:
// at once if it is already), or --timeout passes.
func (s *Supervisor) ctlWait(session string, args []string, flags map[string]string, cancel <-chan struct{}) (WaitResult, error) {
	if len(args) == 0 {
		return WaitResult{}, errors.New("wait: want head, publish or lease NAME")
	}
	var timeout <-chan time.Time
	if v := flags["timeout"]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return WaitResult{}, fmt.Errorf("wait --timeout %q: %w", v, err)
		}
		timer := time.NewTimer(d)
		defer timer.Stop()
		timeout = timer.C
	}
	events, unsub := s.Subscribe(1024)
	defer unsub()
	var base, head string
	if err := s.onSession(session, func(ls *liveSession, _ *Task) error {
		base, head = ls.rec.Base, s.fleet.Head
		return nil
	}); err != nil {
		return WaitResult{}, err
	}
	what := args[0]
	match := func(e Event) (WaitResult, bool) { return WaitResult{}, false }
	switch what {
	case "head":
		from := head
		if v := flags["from"]; v != "" {
			out, err := s.repo.Git("rev-parse", "--verify", "--quiet", v+"^{commit}")
			if err != nil {
				return WaitResult{}, fmt.Errorf("wait head --from %q: not a commit of the repository", v)
			}
			from = strings.TrimSpace(out)
		}
		check := func() (WaitResult, bool) {
			h := s.Fleet().Head
			if h != from {
				return WaitResult{What: what, Head: h, Behind: s.behind(base, h)}, true
			}
			return WaitResult{}, false
		}
		if r, ok := check(); ok {
			return r, nil
		}
		match = func(e Event) (WaitResult, bool) {
			if strings.HasPrefix(e.Kind, "publish.") {
				return check()
			}
			return WaitResult{}, false
		}
	case "publish":
		match = func(e Event) (WaitResult, bool) {
			if !strings.HasPrefix(e.Kind, "publish.") || e.Kind == EvPublishQueued {
				return WaitResult{}, false
			}
			var d struct {
				Publish int64 `json:"publish"`
			}
			json.Unmarshal(e.Data, &d)
			out, err := s.publishOutcome(d.Publish)
			if err != nil {
				return WaitResult{}, false
			}
			h := s.Fleet().Head
			return WaitResult{What: what, Head: h, Behind: s.behind(base, h), Publish: &out.Publish, Event: jsonData(e)}, true
		}
	case "lease":
		if len(args) != 2 {
			return WaitResult{}, errors.New("wait lease: want the lease NAME")
		}
		name := args[1]
		check := func() (WaitResult, bool) {
			for _, l := range s.heldLeases() {
				if l.Name == name {
					return WaitResult{What: what, Lease: &BoardLease{Task: l.Task, Session: l.Session, Name: l.Name, Port: l.Port, Endpoint: l.Endpoint}}, true
				}
			}
			return WaitResult{}, false
		}
		if r, ok := check(); ok {
			return r, nil
		}
		match = func(e Event) (WaitResult, bool) {
			if e.Kind == EvLeaseGranted {
				return check()
			}
			return WaitResult{}, false
		}
	default:
		return WaitResult{}, fmt.Errorf("wait %q: want head, publish or lease NAME", what)
	}
	for {
		select {
		case <-cancel:
			return WaitResult{}, errors.New("wait: cut before anything changed")
		case <-timeout:
			return WaitResult{}, fmt.Errorf("wait %s: nothing changed within %s", what, flags["timeout"])
		case e, ok := <-events:
			if !ok {
				return WaitResult{}, errors.New("wait: the supervisor stopped")
			}
			if r, ok := match(e); ok {
				return r, nil
			}
		}
	}
}
