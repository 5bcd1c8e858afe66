package tui

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// Layout: the header on top, then on a wide screen the tasks and the session on the
// left and the five side panes stacked on the right; on a narrow one the tasks over
// whichever pane has focus (the session while the tasks have it). A status line and
// the help bar close the screen.

const headerHeight = 2

// paneBox is where a pane is drawn.
type paneBox struct {
	pane         int
	x, y, w, h   int
	column, slot int
}

func (m *Model) footerHeight() int {
	if m.fullHelp {
		return 1 + 7
	}
	return 2
}

// boxes computes where each visible pane goes.
func (m *Model) boxes() [][]paneBox {
	body := m.height - headerHeight - m.footerHeight()
	if body < 6 || m.width < 20 {
		return nil
	}
	if !m.wide() {
		// The tasks get what their rows need, leaving the other pane at least 6 lines.
		top := max(5, min(len(m.snap.Tasks)+4, body-6))
		return [][]paneBox{{{pane: 0, w: m.width, h: top}, {pane: m.bottomPane(), w: m.width, h: body - top}}}
	}
	leftW := m.width * 3 / 5
	top := body / 2
	left := []paneBox{{pane: 0, w: leftW, h: top}, {pane: 1, w: leftW, h: body - top}}
	var right []paneBox
	n := len(m.panes) - 2
	for i := 0; i < n; i++ {
		h := body / n
		if i == n-1 {
			h = body - (n-1)*(body/n)
		}
		right = append(right, paneBox{pane: i + 2, w: m.width - leftW, h: h})
	}
	return [][]paneBox{left, right}
}

// layout hands each visible pane its inner size (inside the border, under the title).
func (m *Model) layout() {
	if m.attached != "" {
		// Attached, the agent's terminal is the whole screen under the bar.
		m.session.SetSize(m.width, m.height-1)
		return
	}
	for _, col := range m.boxes() {
		for _, b := range col {
			m.panes[b.pane].SetSize(b.w-2, b.h-3)
		}
	}
	m.help.SetWidth(m.width)
}

// View composes cached pane renderings; it builds no styles and reads nothing.
func (m *Model) View() tea.View {
	if m.frame == "" {
		m.frame = m.render()
	}
	v := tea.NewView(m.frame)
	v.AltScreen = true
	v.WindowTitle = "corral — " + m.snap.Fleet
	return v
}

// render is the whole screen as a string, for View and the golden tests.
func (m *Model) render() string {
	if m.width == 0 {
		return "starting…"
	}
	if m.attached != "" {
		return m.renderAttached()
	}
	var body []string
	for ci, col := range m.boxes() {
		var lines []string
		for _, b := range col {
			lines = append(lines, m.cachedBox(b, b.pane == m.focus)...)
		}
		if ci == 0 {
			body = lines
			continue
		}
		// Columns are exact-width boxes of the same height: joining is concatenation.
		for i := range body {
			if i < len(lines) {
				body[i] += lines[i]
			}
		}
	}
	parts := []string{m.header(), strings.Join(body, "\n"), m.statusLine()}
	if m.replay != nil {
		parts = append(parts, m.replayHelp())
	} else if m.fullHelp {
		parts = append(parts, m.help.FullHelpView(m.keys.FullHelp()))
	} else {
		parts = append(parts, m.help.ShortHelpView(m.keys.ShortHelp()))
	}
	return m.clip.screen(strings.Join(parts, "\n"), m.width, m.height)
}

// boxCache is a pane's last drawn box: a pane whose title, content, size and focus did
// not change since the last frame costs a string comparison, not a layout.
type boxCache struct {
	key   string
	lines []string
}

func (m *Model) cachedBox(b paneBox, focused bool) []string {
	p := m.panes[b.pane]
	title, content := p.Title(), p.View(focused)
	key := fmt.Sprintf("%p|%d|%d|%v|%s\x00%s", m.styles, b.w, b.h, focused, title, content)
	if m.boxCache == nil {
		m.boxCache = map[int]boxCache{}
	}
	if c, ok := m.boxCache[b.pane]; ok && c.key == key {
		return c.lines
	}
	lines := m.box(title, content, b.w, b.h, focused)
	m.boxCache[b.pane] = boxCache{key: key, lines: lines}
	return lines
}

// box draws a bordered pane with its title inside, every line exactly w cells wide.
func (m *Model) box(title, content string, w, h int, focused bool) []string {
	st := m.styles
	frame, ts := st.frame, st.Title
	if focused {
		frame, ts = st.frameFocus, st.TitleFocus
	}
	iw, ih := w-2, h-2
	if iw < 1 || ih < 1 {
		return nil
	}
	inner := append([]string{ts.Render(ansi.Truncate(title, iw, "…"))}, strings.Split(content, "\n")...)
	if len(inner) > ih {
		inner = inner[:ih]
	}
	for len(inner) < ih {
		inner = append(inner, "")
	}
	side := frame[0] + "│" + frame[1]
	out := make([]string, 0, h)
	out = append(out, frame[0]+"╭"+strings.Repeat("─", iw)+"╮"+frame[1])
	for _, l := range inner {
		out = append(out, side+padTo(l, iw)+side)
	}
	return append(out, frame[0]+"╰"+strings.Repeat("─", iw)+"╯"+frame[1])
}

// padTo makes a styled line exactly w cells wide.
func padTo(l string, w int) string {
	n := ansi.StringWidth(l)
	if n > w {
		return ansi.Truncate(l, w, "")
	}
	return l + strings.Repeat(" ", w-n)
}

func clipScreen(s string, w, h int) string {
	var c clipper
	return c.screen(s, w, h)
}

// clipper clips a screen to the terminal, remembering which lines of the last frame
// fit: measuring every styled line's display width (grapheme by grapheme) on every
// render was the TUI's biggest cost on an idle fleet, and most lines do not change.
type clipper struct {
	w    int
	fits map[string]bool
}

func (c *clipper) screen(s string, w, h int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	prev := c.fits
	if c.w != w {
		prev = nil
	}
	c.w, c.fits = w, make(map[string]bool, len(lines))
	for i, l := range lines {
		fits, known := prev[l]
		if !known {
			// A line's display width never exceeds its length in bytes.
			fits = len(l) <= w || ansi.StringWidth(l) <= w
		}
		c.fits[l] = fits
		if !fits {
			lines[i] = ansi.Truncate(l, w, "")
		}
	}
	return strings.Join(lines, "\n")
}

// laneHeader is the lane's verdict on the head: "green", or "red since #5 (pricing),
// admission stop" — the reason new sessions are not starting.
func (m *Model) laneHeader() string {
	st, l := m.styles, m.snap.Lane
	var out string
	switch l.Outcome {
	case "":
		return ""
	case "green":
		out = st.State("accepted").Render(" green")
	case "red":
		out = st.State("rejected").Render(" red")
		if l.Culprit != 0 {
			out += st.State("rejected").Render(fmt.Sprintf(" since #%d (%s)", l.Culprit, l.Task))
		}
		if l.Narrowed != "" {
			out += st.Warn.Render(" admission " + l.Narrowed)
		}
	case "flaky":
		out = st.State("escalated").Render(" flaky")
	default:
		out = st.Muted.Render(" " + l.Outcome)
	}
	if l.Queue > 0 {
		out += st.Muted.Render(fmt.Sprintf(" (%d in the gate)", l.Queue))
	}
	return out
}

// header is the fleet at a glance: head, counts, budget gauges, the inbox.
func (m *Model) header() string {
	st, s := m.styles, &m.snap
	counts := map[string]int{}
	var cpuUsed float64
	var memUsed int64
	for _, t := range s.Tasks {
		counts[t.State]++
		cpuUsed += t.CPUPercent / 100
		memUsed += int64(t.Memory)
	}
	line1 := st.Header.Render("corral ") + st.Title.Render(s.Fleet) +
		st.Muted.Render(fmt.Sprintf("  head %s %s", s.HeadRef, short(s.Head))) + m.laneHeader()
	if n := len(s.Inbox); n > 0 {
		line1 += "  " + st.State("inbox").Render(fmt.Sprintf("⚑ inbox %d", n))
	} else {
		line1 += st.Muted.Render("  inbox 0")
	}
	behind, most := 0, 0
	for _, t := range s.Tasks {
		if t.Session != "" && t.Behind > 0 {
			behind, most = behind+1, max(most, t.Behind)
		}
	}
	if behind > 0 {
		line1 += st.Warn.Render(fmt.Sprintf("  %s behind head (≤%d commits)", plural(behind, "session", "sessions"), most))
	}
	// A narrow screen shows only the states some task is in, so the gauges still fit.
	narrow := m.width < 120
	var c strings.Builder
	for _, k := range []string{"running", "paused", "queued", "publishing", "interrupted", "done", "failed", "inbox"} {
		always := k == "running" || k == "queued" || k == "done" || k == "paused"
		if counts[k] > 0 || always && !narrow {
			sep := "  "
			if narrow {
				sep = " "
			}
			c.WriteString(st.State(k).Render(fmt.Sprintf("%d %s", counts[k], k)) + sep)
		}
	}
	cpuStyle := st.Gauge
	if s.CPUBudget > 0 && s.ReservedCPU > s.CPUBudget {
		cpuStyle = st.GaugeOver
	}
	gw := 10
	if narrow {
		gw = 4
	}
	gauges := st.Text.Render("CPU ") + cpuStyle.Render(gauge(cpuUsed, s.CPUBudget, gw)) +
		st.Muted.Render(fmt.Sprintf(" %.1f/%s  ", cpuUsed, cores(s.CPUBudget))) +
		st.Text.Render("MEM ") + st.Gauge.Render(gauge(float64(memUsed), float64(s.MemBudget), gw)) +
		st.Muted.Render(fmt.Sprintf(" %s/%s", bytesH(memUsed), bytesH(s.MemBudget)))
	if s.ModelCalls > 0 {
		line1 += st.Muted.Render(fmt.Sprintf("  model %d calls %s tok $%.2f", s.ModelCalls, count(s.ModelTokens), s.ModelCost))
	}
	if q := s.Quota; q != nil {
		style := st.Gauge
		switch q.Level {
		case "soft":
			style = st.Warn
		case "hard":
			style = st.GaugeOver
		}
		gauges += st.Text.Render("  QUOTA ") + style.Render(gauge(q.Fraction, 1, gw)) +
			st.Muted.Render(fmt.Sprintf(" %.0f%%", 100*q.Fraction))
		if !narrow && !q.Reset.IsZero() {
			gauges += st.Muted.Render(" ↺" + q.Reset.Local().Format("15:04"))
		}
		if q.Fallback {
			gauges += st.Warn.Render(" fallback")
		}
	}
	return padTo(line1, m.width) + "\n" + padTo(c.String()+gauges, m.width)
}

func (m *Model) statusLine() string {
	st := m.styles
	if m.replay != nil && m.dialog == nil {
		return m.replay.bar(st, m.width, m.status)
	}
	if m.dialog != nil {
		if m.dialog.kind == dlgConfirm || m.dialog.kind == dlgQuit {
			return padTo(st.Warn.Render(m.dialog.prompt), m.width)
		}
		return padTo(m.dialog.input.View(), m.width)
	}
	if m.statusErr {
		return padTo(st.Error.Render(m.status), m.width)
	}
	return padTo(st.Muted.Render(m.status), m.width)
}

// renderAttached is the full-screen terminal of the attached session.
func (m *Model) renderAttached() string {
	st := m.styles
	bar := st.Warn.Render(fmt.Sprintf(" attached to %s — typing goes to the agent; ctrl+] detaches ", m.attached))
	return padTo(bar, m.width) + "\n" + m.session.tail(m.width, m.height-2)
}
