package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// Replayer is a Backend over a recorded run: every pane shows the fleet as it was at
// the cursor, and the session pane plays the recorded terminal up to it. The TUI
// drives the cursor (play, speed, steps, jumps); the backend answers Snapshot and
// Output for wherever it stands. Act refuses everything: replay is read-only.
type Replayer interface {
	Backend
	// Bounds is the run's first and last event time.
	Bounds() (start, end time.Time)
	// Cursor is the time the panes show.
	Cursor() time.Time
	// Seek moves the cursor (clamped to the bounds).
	Seek(time.Time)
	// FindEvent returns the nearest event after (dir > 0) or before (dir < 0) the
	// cursor whose kind is one of kinds (any kind when none are given).
	FindEvent(dir int, kinds ...string) (Event, bool)
}

// ReplayKeyMap is the keys of replay mode, shown in the help bar instead of the
// fleet actions, which a recorded run does not take.
type ReplayKeyMap struct {
	Play, Faster, Slower, Next, Prev   key.Binding
	NextReject, NextEscalate, NextStop key.Binding
	PrevReject, PrevEscalate, PrevStop key.Binding
	Seek, Start, End                   key.Binding
}

// DefaultReplayKeyMap returns the keys README documents for `corral replay`.
func DefaultReplayKeyMap() ReplayKeyMap {
	b := func(help, desc string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	return ReplayKeyMap{
		Play:         b("space", "play/pause", "space"),
		Faster:       b("+", "faster", "+", "="),
		Slower:       b("-", "slower", "-"),
		Next:         b(".", "next event", "."),
		Prev:         b(",", "prev event", ","),
		NextReject:   b("r", "next rejection", "r"),
		NextEscalate: b("e", "next escalation", "e"),
		NextStop:     b("p", "next pause", "p"),
		PrevReject:   b("R", "prev rejection", "R"),
		PrevEscalate: b("E", "prev escalation", "E"),
		PrevStop:     b("P", "prev pause", "P"),
		Seek:         b("g", "go to time…", "g"),
		Start:        b("home", "start", "home"),
		End:          b("end", "end", "end"),
	}
}

// Event kinds the jump keys look for.
var (
	rejectKinds   = []string{"publish.rejected"}
	escalateKinds = []string{"publish.escalated", "task.inbox"}
	stopKinds     = []string{"session.paused", "task.interrupted", "session.killed", "task.failed"}
)

// replayControls is the time bar of replay mode: it owns play/pause and speed, moves
// the backend's cursor, and tells the model when the panes must be refetched and
// when the session pane must start over (the cursor went anywhere but forward).
type replayControls struct {
	r       Replayer
	keys    ReplayKeyMap
	playing bool
	speed   int // 1, 2, 4 … 64
	last    time.Time
	seeking bool // reading a time to go to
	input   string
	note    string
}

func newReplayControls(r Replayer) *replayControls {
	return &replayControls{r: r, keys: DefaultReplayKeyMap(), speed: 1}
}

// moved says what a control did to the cursor.
type moved int

const (
	stayed  moved = iota
	forward       // played on: the session pane keeps its screen and reads on
	jumped        // anywhere else: the session pane starts over from a keyframe
)

// tick advances the cursor while playing.
func (c *replayControls) tick(now time.Time) moved {
	if !c.playing {
		c.last = time.Time{}
		return stayed
	}
	if c.last.IsZero() {
		c.last = now
		return stayed
	}
	dt := now.Sub(c.last) * time.Duration(c.speed)
	c.last = now
	_, end := c.r.Bounds()
	next := c.r.Cursor().Add(dt)
	if !next.Before(end) {
		next, c.playing = end, false
		c.note = "end of the run"
	}
	c.r.Seek(next)
	return forward
}

// onKey handles a replay key; handled is false for keys the rest of the TUI takes
// (movement, focus, filter, theme, help, quit).
func (c *replayControls) onKey(msg tea.KeyPressMsg) (moved, bool) {
	if c.seeking {
		return c.onSeekKey(msg), true
	}
	k := c.keys
	c.note = "" // a note answers the last key
	jump := func(dir int, what string, kinds ...string) moved {
		e, ok := c.r.FindEvent(dir, kinds...)
		if !ok {
			dirName := "after"
			if dir < 0 {
				dirName = "before"
			}
			c.note = fmt.Sprintf("no %s %s the cursor", what, dirName)
			return stayed
		}
		c.playing = false
		c.r.Seek(e.Time)
		c.note = fmt.Sprintf("#%d %s %s %s", e.Seq, e.Kind, e.Task, e.Session)
		return jumped
	}
	switch {
	case key.Matches(msg, k.Play):
		c.playing = !c.playing
		if start, end := c.r.Bounds(); c.playing && !c.r.Cursor().Before(end) {
			c.r.Seek(start) // play again from the start
			c.note = ""
			return jumped, true
		}
		c.note = ""
		return stayed, true
	case key.Matches(msg, k.Faster):
		c.speed = min(c.speed*2, 64)
		return stayed, true
	case key.Matches(msg, k.Slower):
		c.speed = max(c.speed/2, 1)
		return stayed, true
	case key.Matches(msg, k.Next):
		return jump(1, "event"), true
	case key.Matches(msg, k.Prev):
		return jump(-1, "event"), true
	case key.Matches(msg, k.NextReject):
		return jump(1, "rejection", rejectKinds...), true
	case key.Matches(msg, k.PrevReject):
		return jump(-1, "rejection", rejectKinds...), true
	case key.Matches(msg, k.NextEscalate):
		return jump(1, "escalation", escalateKinds...), true
	case key.Matches(msg, k.PrevEscalate):
		return jump(-1, "escalation", escalateKinds...), true
	case key.Matches(msg, k.NextStop):
		return jump(1, "pause or stop", stopKinds...), true
	case key.Matches(msg, k.PrevStop):
		return jump(-1, "pause or stop", stopKinds...), true
	case key.Matches(msg, k.Start):
		start, _ := c.r.Bounds()
		c.r.Seek(start)
		return jumped, true
	case key.Matches(msg, k.End):
		_, end := c.r.Bounds()
		c.r.Seek(end)
		c.playing = false
		return jumped, true
	case key.Matches(msg, k.Seek):
		c.seeking, c.input, c.playing = true, "", false
		return stayed, true
	}
	return stayed, false
}

func (c *replayControls) onSeekKey(msg tea.KeyPressMsg) moved {
	switch s := msg.String(); s {
	case "esc":
		c.seeking = false
		return stayed
	case "backspace":
		if c.input != "" {
			c.input = c.input[:len(c.input)-1]
		}
		return stayed
	case "enter":
		c.seeking = false
		start, end := c.r.Bounds()
		t, err := ParseReplayTime(c.input, start, end, c.r.Cursor())
		if err != nil {
			c.note = err.Error()
			return stayed
		}
		c.r.Seek(t)
		c.note = ""
		return jumped
	default:
		if t := msg.Key().Text; t != "" && len(c.input) < 40 {
			c.input += t
		}
		return stayed
	}
}

// ParseReplayTime reads where to go: a clock time of the run's day ("16:04:05"), an
// offset from its start ("90s", "1h2m", "00:12:30" with a leading "+"), or a move from
// the cursor ("+5m", "-30s").
func ParseReplayTime(s string, start, end, cursor time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return cursor, fmt.Errorf("go to: want a time (15:04:05), an offset (+90s, 1h2m) or a move (+5m, -30s)")
	}
	clamp := func(t time.Time) time.Time {
		if t.Before(start) {
			return start
		}
		if t.After(end) {
			return end
		}
		return t
	}
	sign := 0
	switch s[0] {
	case '+':
		sign, s = 1, s[1:]
	case '-':
		sign, s = -1, s[1:]
	}
	if d, err := time.ParseDuration(s); err == nil {
		switch sign {
		case 0:
			return clamp(start.Add(d)), nil
		default:
			return clamp(cursor.Add(time.Duration(sign) * d)), nil
		}
	}
	if c, err := time.Parse(time.TimeOnly, s); err == nil {
		d := time.Duration(c.Hour())*time.Hour + time.Duration(c.Minute())*time.Minute + time.Duration(c.Second())*time.Second
		if sign != 0 {
			return clamp(cursor.Add(time.Duration(sign) * d)), nil
		}
		// A clock time of the run's first day, in the local zone the timeline shows.
		ls := start.Local()
		day := time.Date(ls.Year(), ls.Month(), ls.Day(), 0, 0, 0, 0, ls.Location())
		t := day.Add(d)
		if t.Before(ls) && day.Add(24*time.Hour+d).Before(end.Local().Add(time.Second)) {
			t = day.Add(24*time.Hour + d) // past midnight in an overnight run
		}
		return clamp(t), nil
	}
	return cursor, fmt.Errorf("go to %q: want a time (15:04:05), an offset (90s, 1h2m) or a move (+5m, -30s)", s)
}

// bar is the replay status line: play state, speed, the cursor's clock time and
// offset, a progress gauge, and the last note.
func (c *replayControls) bar(st *Styles, width int, status string) string {
	if c.seeking {
		return padTo(st.Warn.Render("go to (15:04:05 · 90s from start · +5m/-30s from here): "+c.input+"▏"), width)
	}
	start, end := c.r.Bounds()
	cur := c.r.Cursor()
	icon := "❚❚"
	if c.playing {
		icon = "▶"
	}
	total := end.Sub(start)
	left := fmt.Sprintf(" REPLAY %s %2d× %s  +%s/%s ", icon, c.speed, cur.Local().Format("15:04:05.0"),
		clock(cur.Sub(start)), clock(total))
	right := ""
	if c.note != "" {
		right = "  " + c.note
	} else if status != "" {
		right = "  " + status
	}
	gw := max(10, min(40, width-len(left)-len(right)-4))
	frac := 0.0
	if total > 0 {
		frac = float64(cur.Sub(start)) / float64(total)
	}
	pos := int(frac * float64(gw-1))
	g := strings.Repeat("━", pos) + "●" + strings.Repeat("─", max(gw-1-pos, 0))
	return padTo(st.Header.Render(left)+st.Gauge.Render(g)+st.Muted.Render(right), width)
}

// clock formats a duration as h:mm:ss.
func clock(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int(d / time.Second)
	return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
}

// ShortHelp is the help bar in replay mode.
func (k ReplayKeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Play, k.Faster, k.Slower, k.Prev, k.Next, k.NextReject, k.NextEscalate, k.NextStop, k.Seek}
}

// FullHelp is `?` in replay mode.
func (k ReplayKeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Play, k.Faster, k.Slower, k.Start, k.End, k.Seek},
		{k.Prev, k.Next, k.NextReject, k.PrevReject},
		{k.NextEscalate, k.PrevEscalate, k.NextStop, k.PrevStop},
	}
}

// replayHelp is the help bar in replay mode: the time keys, then the TUI's own.
func (m *Model) replayHelp() string {
	rk, k := m.replay.keys, m.keys
	if m.fullHelp {
		return m.help.FullHelpView(append(rk.FullHelp(), []key.Binding{k.Up, k.Down, k.Tab, k.Filter, k.Help, k.Quit}))
	}
	return m.help.ShortHelpView(append(rk.ShortHelp(), k.Tab, k.Help, k.Quit))
}
