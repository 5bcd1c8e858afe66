package supervisor

import "io"

// SessionInput returns a writer to a live session's terminal, for the TUI's attach
// mode: what the user types goes to the agent as if it were its keyboard.
func (s *Supervisor) SessionInput(session string) (w io.Writer, ok bool) {
	s.call(func() {
		if ls := s.sessions[session]; ls != nil {
			w, ok = ls.sb, true
		}
	})
	return w, ok
}
