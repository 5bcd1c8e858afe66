package tui

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/vt"
)

// sessionPane shows the selected task's live terminal through a VT emulator, so a
// full-screen agent (alt screen, cursor moves, colours) looks as it would in a real
// terminal. Only the shown session is emulated: emulation costs far more than the pty
// produces for an idle agent, and nobody looks at the others.
type sessionPane struct {
	data      *viewData
	sessionID string
	task      *TaskRow
	emu       *vt.Emulator
	drained   chan struct{} // closed when the goroutine reading emu's replies has ended
	screen    string        // the emulator's last rendering; "" after new output
	fed       bool
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

// SetSize resizes the emulator with the pane, as a terminal window would be.
func (p *sessionPane) SetSize(w, h int) {
	if w == p.w && h == p.h {
		return
	}
	p.w, p.h = w, h
	if p.emu != nil && w > 0 && h > 1 {
		p.emu.Resize(w, h-1)
		p.screen = ""
	}
}

func (p *sessionPane) Update(tea.Msg) tea.Cmd { return nil }

// show switches to another session; the previous emulator is closed, which also ends
// the goroutine draining its replies.
func (p *sessionPane) show(id string, t *TaskRow) {
	p.close()
	p.sessionID = id
	p.facts(t)
}

// showLane switches to a publish's lane test, or updates what it says of it.
func (p *sessionPane) showLane(pub Publish) {
	if pub.LaneSession != p.sessionID {
		p.close()
		p.sessionID = pub.LaneSession
	}
	p.factsLine = fmt.Sprintf("lane test of publish #%d (%s) at %s", pub.ID, pub.Task, short(pub.LaneCommit))
	if pub.Lane != "" {
		p.factsLine += " · " + pub.Lane
	}
}

func (p *sessionPane) close() {
	if p.emu != nil {
		// vt v0.1.0's Close sets a flag its Read checks unguarded, so Close must not
		// run beside the drain's Read: closing the reply pipe ends the drain first.
		if c, ok := p.emu.InputPipe().(io.Closer); ok {
			c.Close()
			<-p.drained
		}
		p.emu.Close()
	}
	p.emu, p.screen, p.fed = nil, "", false
}

// facts is the line of sandbox facts above the output.
func (p *sessionPane) facts(t *TaskRow) {
	if t == nil {
		p.factsLine = "no task selected"
		return
	}
	if t.Session == "" {
		p.factsLine = fmt.Sprintf("%s is %s: no live session", t.ID, t.State)
		if t.LastSession != "" {
			p.factsLine = fmt.Sprintf("%s is %s · %s as it ended", t.ID, t.State, t.LastSession)
		}
		if t.Reason != "" {
			p.factsLine += " (" + t.Reason + ")"
		}
		return
	}
	p.factsLine = fmt.Sprintf("%s · base %s", t.Session, short(t.Base))
	if t.Behind > 0 {
		p.factsLine += fmt.Sprintf(" ↓%d", t.Behind)
	}
	p.factsLine += " · layer " + bytesH(t.LayerBytes)
	p.factsLine += fmt.Sprintf(" · cpu %s mem %s", cores(t.CPULimit), bytesH(t.MemLimit))
	if len(t.Ports) > 0 {
		p.factsLine += " · " + strings.Join(t.Ports, " ")
	}
}

// append feeds new output to the emulator. A burst larger than the screen could show
// is cut to its tail first: emulating what scrolls away unseen is wasted work.
func (p *sessionPane) append(data []byte) {
	if len(data) == 0 || p.w <= 0 || p.h <= 1 {
		return
	}
	if p.emu == nil {
		p.emu = vt.NewEmulator(p.w, p.h-1)
		// The emulator answers queries (ESC[6n…) on a pipe; unread, Write would block.
		emu, drained := p.emu, make(chan struct{})
		p.drained = drained
		go func() {
			io.Copy(io.Discard, emu)
			close(drained)
		}()
	}
	if len(data) > outputKeep {
		data = data[len(data)-outputKeep:]
	}
	p.emu.Write(data)
	p.fed, p.screen = true, ""
}

// tail renders the emulated screen, w×h at most.
func (p *sessionPane) tail(w, h int) string {
	if p.emu == nil {
		return ""
	}
	if p.screen == "" {
		p.screen = p.emu.Render()
	}
	lines := strings.Split(p.screen, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		lines[i] = padTo(l, w)
	}
	return strings.Join(lines, "\n")
}

// stripANSI removes escape sequences, for rows restyled as selected.
var ansiRE = regexp.MustCompile(`\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[@-Z\\-_])`)

func stripANSI(s string) string { return ansiRE.ReplaceAllString(s, "") }

func (p *sessionPane) View(bool) string {
	if p.data == nil {
		return ""
	}
	st := p.data.styles
	head := st.Muted.Render(fit(p.factsLine, p.w))
	if p.sessionID == "" || p.h < 2 {
		return head
	}
	if !p.fed {
		return head + "\n" + st.Muted.Render(fit("(no output yet)", p.w))
	}
	return head + "\n" + p.tail(p.w, p.h-1)
}
