package supervisor

// ctl ask: a question in the human's inbox, answered back to the asking call.

import (
	"errors"
	"fmt"
)

// ctlAsk puts a question in the inbox and, unless nowait, waits for the answer.
func (s *Supervisor) ctlAsk(session, question string, flags map[string]string, cancel <-chan struct{}) (InboxItem, error) {
	kind := flags["kind"]
	switch kind {
	case "":
		kind = InboxNeedsInput
	case InboxNeedsInput, InboxPermission, InboxDone, InboxRateLimited:
	case "needs-input":
		kind = InboxNeedsInput
	default:
		return InboxItem{}, fmt.Errorf("ask --kind %q: want needs-input, permission, done or rate-limited", kind)
	}
	var it *InboxItem
	var ch chan string
	err := s.onSession(session, func(ls *liveSession, _ *Task) error {
		it = s.openInbox(InboxItem{Kind: kind, Task: ls.rec.Task, Session: session, Text: question, Asked: true, Screen: lastScreen(ls)})
		ch = make(chan string, 1)
		s.asks[it.ID] = ch
		return nil
	})
	if err != nil {
		return InboxItem{}, err
	}
	var snapshot InboxItem
	s.call(func() { snapshot = *it })
	if flags["nowait"] != "" {
		return snapshot, nil
	}
	select {
	case ans, ok := <-ch:
		s.call(func() { snapshot = *it })
		if !ok {
			return snapshot, fmt.Errorf("ask: item %d closed without an answer (%s)", snapshot.ID, snapshot.State)
		}
		snapshot.Answer = ans
		return snapshot, nil
	case <-cancel:
		s.call(func() {
			if it.State == InboxOpen {
				delete(s.asks, it.ID)
				s.closeInbox(it, InboxResolved, "")
			}
		})
		return InboxItem{}, errors.New("ask: the call was cut before an answer")
	}
}
