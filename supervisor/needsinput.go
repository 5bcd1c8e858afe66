package supervisor

import (
	"regexp"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// Needs-input detection: an agent that waits for a human (a permission prompt, a
// question) goes quiet with a prompt on its last line. When a session's terminal has
// said nothing for NeedsInputAfter and its last line looks like a prompt, the prompt
// becomes an inbox item with the agent's last screen; answering it types into the
// terminal. Output after that means the agent moved on, and an item still open is
// closed as resolved.

const defaultNeedsInputAfter = 10 * time.Second

var (
	permissionPrompt = regexp.MustCompile(`(?i)(\[y/n\]|\(y/n\)|\[yes/no\]|\(yes/no\)|\by/n\b|\ballow\b|\bpermission\b|\bapprove\b|do you want to|proceed\?|continue\?)`)
	rateLimited      = regexp.MustCompile(`(?i)(rate.?limit|usage limit|quota exceeded|too many requests|limit reached|try again (later|in))`)
	questionPrompt   = regexp.MustCompile(`([?:>›❯»]\s*$)`)
	menuPrompt       = regexp.MustCompile(`(?m)^\s*[>›❯»]\s*\d+[.)]`) // "❯ 1. Yes": a selection menu's cursor
)

// classifyPrompt says what kind of inbox item a quiet screen is, from its last line
// (and, for a rate limit, the few lines above), or "" if it does not look like a wait.
func classifyPrompt(screen string) (kind, line string) {
	lines := strings.Split(screen, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			line = l
			tail := strings.Join(lines[max(0, i-3):i+1], "\n")
			switch {
			case rateLimited.MatchString(tail):
				return InboxRateLimited, line
			case permissionPrompt.MatchString(line):
				return InboxPermission, line
			case questionPrompt.MatchString(line) || menuPrompt.MatchString(tail):
				// A menu or bare prompt under an allow/deny question is a permission.
				if permissionPrompt.MatchString(tail) {
					return InboxPermission, line
				}
				return InboxNeedsInput, line
			}
			return "", line
		}
	}
	return "", ""
}

// screenText renders the tail of a terminal stream as plain lines: escape sequences
// dropped, carriage returns overwriting, at most n lines.
func screenText(raw []byte, n int) string {
	text := ansi.Strip(string(raw))
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		if i := strings.LastIndex(l, "\r"); i >= 0 {
			l = l[i+1:]
		}
		out = append(out, strings.TrimRight(l, " \t"))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}

// lastScreen is the session's last lines of output.
func lastScreen(ls *liveSession) string {
	ring := ls.sb.Output()
	if ring == nil {
		return ""
	}
	_, total := ring.Since(1 << 62)
	raw, _ := ring.Since(max(0, total-16<<10))
	return screenText(raw, 30)
}

// watchQuiet starts the session's needs-input watcher; close(ls.quiet) stops it.
func (s *Supervisor) watchQuiet(ls *liveSession) {
	after := s.cfg.NeedsInputAfter
	if after == 0 {
		after = defaultNeedsInputAfter
	}
	ls.quiet = make(chan struct{})
	if after < 0 {
		return
	}
	ring := ls.sb.Output()
	stop := ls.quiet
	go func() {
		timer := time.NewTimer(after)
		defer timer.Stop()
		noticed := false
		for {
			changed := ring.Changed()
			select {
			case <-stop:
				return
			case <-changed:
				timer.Reset(after)
				if noticed {
					noticed = false
					s.post(func() { s.resolveNoticed(ls) })
				}
			case <-timer.C:
				kind, line := classifyPrompt(lastScreen(ls))
				if kind == "" {
					continue // quiet, but not waiting; the next output re-arms
				}
				noticed = true
				screen := lastScreen(ls)
				s.post(func() { s.noticePrompt(ls, kind, line, screen) })
			}
		}
	}()
}

// noticePrompt opens an inbox item for a prompt seen on a quiet terminal, unless the
// session already has one open. It runs on the loop.
func (s *Supervisor) noticePrompt(ls *liveSession, kind, line, screen string) {
	if s.sessions[ls.rec.ID] != ls {
		return
	}
	for _, it := range s.inboxItems {
		if it.Session == ls.rec.ID && it.State == InboxOpen && !it.Asked {
			return
		}
	}
	s.openInbox(InboxItem{Kind: kind, Task: ls.rec.Task, Session: ls.rec.ID, Text: line, Screen: screen})
}

// resolveNoticed closes the session's noticed items still open: it spoke again.
func (s *Supervisor) resolveNoticed(ls *liveSession) {
	for _, it := range s.inboxItems {
		if it.Session == ls.rec.ID && it.State == InboxOpen && !it.Asked && it.Kind != InboxHandoff {
			s.closeInbox(it, InboxResolved, "")
		}
	}
}
