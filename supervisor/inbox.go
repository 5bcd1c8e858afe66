package supervisor

import (
	"fmt"
	"time"
)

// Inbox item kinds: what an agent waits for from a human.
const (
	InboxNeedsInput  = "needs input"  // a question
	InboxPermission  = "permission"   // a y/N or allow/deny prompt
	InboxDone        = "done"         // the agent says it has finished and waits
	InboxRateLimited = "rate-limited" // the provider's limit stopped it
	InboxHandoff     = "handoff"      // a proposed follow-up task to accept or refuse
)

// Inbox item states.
const (
	InboxOpen      = "open"
	InboxAnswered  = "answered"
	InboxDismissed = "dismissed"
	InboxResolved  = "resolved" // the agent moved on by itself (its terminal spoke again)
)

// Inbox event kinds.
const (
	EvInboxOpened   = "inbox.opened"
	EvInboxAnswered = "inbox.answered"
	EvInboxClosed   = "inbox.closed"
	EvHandoff       = "handoff.proposed"
	EvIntentChanged = "intent.declared"
)

// InboxItem is one thing an agent waits on a human for: a question it asked through
// `ctl ask`, or a prompt corral noticed on its quiet terminal. Answering one that was
// asked returns the answer to the asking call; answering a noticed prompt types the
// answer into the agent's terminal.
type InboxItem struct {
	ID      int64     `json:"id"`
	Kind    string    `json:"kind"`
	Task    string    `json:"task"`
	Session string    `json:"session"`
	Text    string    `json:"text"`             // the question, or the prompt line
	Screen  string    `json:"screen,omitempty"` // the agent's last screen, as text
	Asked   bool      `json:"asked"`            // through ctl/MCP, not noticed on the terminal
	Handoff string    `json:"handoff,omitempty"`
	State   string    `json:"state"`
	Answer  string    `json:"answer,omitempty"`
	Pending string    `json:"pending,omitempty"` // an answer another process recorded, not yet delivered
	Created time.Time `json:"created"`
	Closed  time.Time `json:"closed,omitzero"`
}

// Inbox returns the items of this run, open ones first, each group oldest first.
func (s *Supervisor) Inbox() []InboxItem {
	var open, rest []InboxItem
	s.call(func() {
		for _, it := range s.inboxItems {
			if it.State == InboxOpen {
				open = append(open, *it)
			} else {
				rest = append(rest, *it)
			}
		}
	})
	return append(open, rest...)
}

// openInbox records an item and makes it public as an event. It runs on the loop.
func (s *Supervisor) openInbox(it InboxItem) *InboxItem {
	it.State, it.Created = InboxOpen, s.now()
	_, err := s.commit(func(tx Tx) error {
		id, err := tx.AddInboxItem(it)
		if err != nil {
			return err
		}
		it.ID = id
		data := map[string]any{"id": it.ID, "kind": it.Kind, "text": it.Text}
		if it.Asked {
			data["asked"] = true
		}
		if it.Handoff != "" {
			data["handoff"] = it.Handoff
		}
		tx.Emit(Event{Kind: EvInboxOpened, Task: it.Task, Session: it.Session, Data: jsonData(data)})
		return nil
	})
	if err != nil {
		// Kept in memory all the same, so the human still sees it this run.
		s.log.Error("record inbox item", "session", it.Session, "err", err)
		s.inboxSeq--
		it.ID = s.inboxSeq
	}
	p := &it
	s.inboxItems = append(s.inboxItems, p)
	return p
}

func (s *Supervisor) inboxItem(id int64) *InboxItem {
	for _, it := range s.inboxItems {
		if it.ID == id {
			return it
		}
	}
	return nil
}

// AnswerInbox answers an open item: an asked question gets the text back, a noticed
// prompt gets it typed into the agent's terminal followed by Enter, and a handoff is
// accepted ("y", "yes", "accept") — its task queued — or refused (anything else).
func (s *Supervisor) AnswerInbox(id int64, answer string) error {
	var err error
	s.call(func() { err = s.answerInbox(id, answer) })
	s.kick()
	return err
}

func (s *Supervisor) answerInbox(id int64, answer string) error {
	it := s.inboxItem(id)
	if it == nil {
		return fmt.Errorf("inbox item %d: %w", id, ErrNotFound)
	}
	if it.State != InboxOpen {
		return notApplicable("inbox item %d is %s", id, it.State)
	}
	switch {
	case it.Kind == InboxHandoff:
		if err := s.decideHandoff(it, answer); err != nil {
			return err
		}
	case it.Asked:
		if ch := s.asks[id]; ch != nil {
			ch <- answer // buffered: the asking call may have gone
			delete(s.asks, id)
		}
	default:
		ls := s.sessions[it.Session]
		if ls == nil {
			return notApplicable("inbox item %d: session %s has ended", id, it.Session)
		}
		if _, err := ls.sb.Write([]byte(answer + "\r")); err != nil {
			return fmt.Errorf("inbox item %d: type into %s: %w", id, it.Session, err)
		}
	}
	s.closeInbox(it, InboxAnswered, answer)
	return nil
}

// DismissInbox closes an item without answering it.
func (s *Supervisor) DismissInbox(id int64) error {
	var err error
	s.call(func() {
		it := s.inboxItem(id)
		switch {
		case it == nil:
			err = fmt.Errorf("inbox item %d: %w", id, ErrNotFound)
		case it.State != InboxOpen:
			err = notApplicable("inbox item %d is %s", id, it.State)
		default:
			if ch := s.asks[id]; ch != nil {
				close(ch)
				delete(s.asks, id)
			}
			s.closeInbox(it, InboxDismissed, "")
		}
	})
	return err
}

// closeInbox records an item's end. It runs on the loop.
func (s *Supervisor) closeInbox(it *InboxItem, state, answer string) {
	it.State, it.Answer, it.Closed = state, answer, s.now()
	kind := EvInboxClosed
	if state == InboxAnswered {
		kind = EvInboxAnswered
	}
	it.Pending = ""
	_, err := s.commit(func(tx Tx) error {
		if it.ID > 0 {
			if err := tx.PutInboxItem(*it); err != nil {
				return err
			}
		}
		tx.Emit(Event{Kind: kind, Task: it.Task, Session: it.Session, Data: jsonData(map[string]any{
			"id": it.ID, "kind": it.Kind, "state": state})})
		return nil
	})
	if err != nil {
		s.log.Error("record inbox item", "id", it.ID, "err", err)
	}
}

// RecordAnswer stores an answer to an open item for the fleet's running supervisor to
// deliver (`corral answer` from another process), the way decisions on escalated
// publishes are recorded; the supervisor picks it up within a second.
func RecordAnswer(st Store, id int64, answer string) error {
	_, err := st.Update(func(tx Tx) error {
		items, err := tx.InboxItems(false)
		if err != nil {
			return err
		}
		for _, it := range items {
			if it.ID != id {
				continue
			}
			if it.State != InboxOpen {
				return fmt.Errorf("inbox item %d is %s: %w", id, it.State, ErrNotApplicable)
			}
			it.Pending = answer
			return tx.PutInboxItem(it)
		}
		return fmt.Errorf("inbox item %d: %w", id, ErrNotFound)
	})
	return err
}

// adoptAnswers delivers answers another process recorded. It runs on the loop about
// once a second, and reads the store only while some item is open.
func (s *Supervisor) adoptAnswers() {
	open := false
	for _, it := range s.inboxItems {
		open = open || it.State == InboxOpen
	}
	if !open {
		return
	}
	var stored []InboxItem
	if err := s.store.View(func(r Reader) error {
		var err error
		stored, err = r.InboxItems(true)
		return err
	}); err != nil {
		return
	}
	for _, st := range stored {
		if st.Pending == "" {
			continue
		}
		if err := s.answerInbox(st.ID, st.Pending); err != nil {
			s.log.Error("deliver recorded answer", "id", st.ID, "err", err)
		}
	}
}

// loadInbox picks up, at start, the items a previous supervisor left open: a proposed
// handoff still waits; anything else belonged to a session that died with it.
func (s *Supervisor) loadInbox() error {
	var open []InboxItem
	if err := s.store.View(func(r Reader) error {
		var err error
		open, err = r.InboxItems(true)
		return err
	}); err != nil {
		return err
	}
	for i := range open {
		it := open[i]
		p := &it
		s.inboxItems = append(s.inboxItems, p)
		if t := s.tasks[it.Handoff]; it.Kind == InboxHandoff && t != nil && t.State == TaskInbox {
			continue
		}
		s.closeInbox(p, InboxResolved, "")
	}
	return nil
}

// settleHandoff closes a proposed task's inbox item once the task left the inbox by
// another way (retried or discarded by hand). It runs on the loop.
func (s *Supervisor) settleHandoff(task string) {
	for _, it := range s.inboxItems {
		if it.Kind == InboxHandoff && it.Handoff == task && it.State == InboxOpen {
			s.closeInbox(it, InboxResolved, "")
		}
	}
}

// closeSessionInbox closes what a session left open when it ends.
func (s *Supervisor) closeSessionInbox(session string) {
	for _, it := range s.inboxItems {
		if it.Session == session && it.State == InboxOpen && it.Kind != InboxHandoff {
			if ch := s.asks[it.ID]; ch != nil {
				close(ch)
				delete(s.asks, it.ID)
			}
			s.closeInbox(it, InboxResolved, "")
		}
	}
}
