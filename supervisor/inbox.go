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

// openInbox adds an item and makes it public as an event. It runs on the loop.
func (s *Supervisor) openInbox(it InboxItem) *InboxItem {
	s.inboxSeq++
	it.ID, it.State, it.Created = s.inboxSeq, InboxOpen, s.now()
	p := &it
	s.inboxItems = append(s.inboxItems, p)
	data := map[string]any{"id": it.ID, "kind": it.Kind, "text": it.Text}
	if it.Asked {
		data["asked"] = true
	}
	if it.Handoff != "" {
		data["handoff"] = it.Handoff
	}
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvInboxOpened, Task: it.Task, Session: it.Session, Data: jsonData(data)})
		return nil
	})
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
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: kind, Task: it.Task, Session: it.Session, Data: jsonData(map[string]any{
			"id": it.ID, "kind": it.Kind, "state": state})})
		return nil
	})
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
