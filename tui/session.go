package tui

import (
	"fmt"
	"regexp"
	"strings"

	tea "charm.land/bubbletea/v2"
)

// sessionPane shows the selected task's live terminal: the tail of its output with
// control sequences removed (no emulator: cheap, and only the visible pane is fed).
type sessionPane struct {
	data      *viewData
	sessionID string
	task      *TaskRow
	buf       []byte
	lines     []string // cached, cleaned
	factsLine string
	w, h      int
}

func newSessionPane() *sessionPane { return &sessionPane{} }

func (p *sessionPane) Title() string {
	if p.sessionID == "" {
		return "Session"
	}
	return "Session " + p.sessionID
}

func (p *sessionPane) SetData(d *viewData) { p.data = d }

func (p *sessionPane) SetSize(w, h int) { p.w, p.h = w, h }

func (p *sessionPane) Update(tea.Msg) tea.Cmd { return nil }

// show switches to another session, dropping the previous one's output.
func (p *sessionPane) show(id string, t *TaskRow) {
	p.sessionID, p.buf, p.lines = id, nil, nil
	p.facts(t)
}

// facts is the line of sandbox facts above the output.
func (p *sessionPane) facts(t *TaskRow) {
	if t == nil {
		p.factsLine = "no task selected"
		return
	}
	if t.Session == "" {
		p.factsLine = fmt.Sprintf("%s is %s: no live session", t.ID, t.State)
		if t.Reason != "" {
			p.factsLine += " (" + t.Reason + ")"
		}
		return
	}
	p.factsLine = fmt.Sprintf("%s · base %s · cpu %s mem %s", t.Session, short(t.Base), cores(t.CPULimit), bytesH(t.MemLimit))
	if len(t.Ports) > 0 {
		p.factsLine += " · " + strings.Join(t.Ports, " ")
	}
}

func (p *sessionPane) append(data []byte) {
	if len(data) == 0 {
		return
	}
	p.buf = append(p.buf, data...)
	if len(p.buf) > outputKeep {
		p.buf = append([]byte(nil), p.buf[len(p.buf)-outputKeep:]...)
	}
	p.lines = termLines(p.buf)
}

// termLines turns raw terminal output into plain lines: escape sequences removed, a
// carriage return overwriting its line as a terminal would.
func termLines(b []byte) []string {
	s := stripANSI(string(b))
	raw := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	out := make([]string, 0, len(raw))
	for _, l := range raw {
		if i := strings.LastIndexByte(strings.TrimRight(l, "\r"), '\r'); i >= 0 {
			l = l[i+1:]
		}
		out = append(out, strings.Map(func(r rune) rune {
			if r < 0x20 && r != '\t' || r == 0x7f {
				return -1
			}
			if r == '\t' {
				return ' '
			}
			return r
		}, l))
	}
	if len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

var ansiRE = regexp.MustCompile(`\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[@-Z\\-_])`)

func stripANSI(s string) string { return ansiRE.ReplaceAllString(s, "") }

// tail renders the last h lines of output, fitted to w.
func (p *sessionPane) tail(w, h int) string {
	st := p.data.styles
	var b strings.Builder
	start := max(0, len(p.lines)-h)
	for i := start; i < len(p.lines); i++ {
		if i > start {
			b.WriteByte('\n')
		}
		b.WriteString(st.Text.Render(fit(p.lines[i], w)))
	}
	return b.String()
}

func (p *sessionPane) View(bool) string {
	if p.data == nil {
		return ""
	}
	st := p.data.styles
	head := st.Muted.Render(fit(p.factsLine, p.w))
	if p.sessionID == "" || p.h < 2 {
		return head
	}
	if len(p.lines) == 0 {
		return head + "\n" + st.Muted.Render(fit("(no output yet)", p.w))
	}
	return head + "\n" + p.tail(p.w, p.h-1)
}
