package supervisor

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

func errSessionGone(session string) error {
	return fmt.Errorf("session %s has ended", session)
}

// onSession runs f on the loop with the caller's live session and its task, and
// returns f's error, or errSessionGone when the session has ended: every verb that
// acts for its caller starts here, so a verb racing the session's end fails the same way.
func (s *Supervisor) onSession(session string, f func(ls *liveSession, t *Task) error) error {
	var err error
	s.call(func() {
		ls := s.sessions[session]
		if ls == nil {
			err = errSessionGone(session)
			return
		}
		err = f(ls, s.tasks[ls.rec.Task])
	})
	return err
}

// ctlDispatch runs one verb for session. cancel closes when the caller has gone or the
// session ends: verbs that block give up then.
func (s *Supervisor) ctlDispatch(session string, req CtlRequest, cancel <-chan struct{}) (any, error) {
	a := req.Args
	switch req.Verb {
	case VerbBoard:
		return s.Board(), nil
	case VerbStatus:
		return s.sessionStatus(session)
	case VerbIntent:
		if len(a) < 1 || (a[0] != "add" && a[0] != "drop") {
			return nil, errors.New("intent: want add GLOB… or drop [GLOB…]")
		}
		return s.ctlIntent(session, a[0] == "add", a[1:])
	case VerbLease:
		switch {
		case len(a) == 2 && a[0] == "port":
			port, err := strconv.Atoi(a[1])
			if err != nil {
				return nil, fmt.Errorf("lease port %q: not a number", a[1])
			}
			return s.ctlLease(session, port, req.Flags["name"])
		case len(a) >= 1 && a[0] == "drop":
			return s.ctlLeaseDrop(session, a[1:], req.Flags["name"])
		}
		return nil, errors.New("lease: want port PORT [--name NAME] or drop [PORT] [--name NAME]")
	case VerbEndpoint:
		if len(a) != 1 {
			return nil, errors.New("endpoint: want one NAME")
		}
		return s.ctlEndpoint(session, a[0])
	case VerbPublish:
		return s.ctlPublish(session, req.Flags["message"], cancel)
	case VerbHandoff:
		if len(a) != 1 {
			return nil, errors.New("handoff: want one TASK id")
		}
		return s.ctlHandoff(session, a[0], req.Flags)
	case VerbWait:
		return s.ctlWait(session, a, req.Flags, cancel)
	case VerbAsk:
		if len(a) == 0 || strings.TrimSpace(strings.Join(a, " ")) == "" {
			return nil, errors.New("ask: want the question")
		}
		return s.ctlAsk(session, strings.Join(a, " "), req.Flags, cancel)
	}
	return nil, fmt.Errorf("unknown verb %q (want board, status, intent, lease, endpoint, publish, handoff, wait or ask)", req.Verb)
}
