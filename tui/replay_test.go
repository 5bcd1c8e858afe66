package tui

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"corral/themes"
)

// fakeReplay is a recorded run of a few events over a minute; the snapshot says where
// the cursor is through its Taken time.
type fakeReplay struct {
	*fakeFleet
	events []Event
	cursor time.Time
}

func newFakeReplay() *fakeReplay {
	r := &fakeReplay{fakeFleet: newFakeFleet(), cursor: t0}
	for i, k := range []string{"task.queued", "session.started", "session.paused", "publish.rejected", "publish.escalated", "task.done"} {
		r.events = append(r.events, Event{Seq: int64(i + 1), Time: t0.Add(time.Duration(i*10) * time.Second), Kind: k, Task: "checkout"})
	}
	return r
}

func (r *fakeReplay) Bounds() (time.Time, time.Time) {
	return r.events[0].Time, r.events[len(r.events)-1].Time
}
func (r *fakeReplay) Cursor() time.Time { return r.cursor }
func (r *fakeReplay) Seek(t time.Time) {
	start, end := r.Bounds()
	if t.Before(start) {
		t = start
	}
	if t.After(end) {
		t = end
	}
	r.cursor = t
}
func (r *fakeReplay) FindEvent(dir int, kinds ...string) (Event, bool) {
	match := func(e Event) bool {
		if len(kinds) == 0 {
			return true
		}
		for _, k := range kinds {
			if e.Kind == k {
				return true
			}
		}
		return false
	}
	if dir > 0 {
		for _, e := range r.events {
			if e.Time.After(r.cursor) && match(e) {
				return e, true
			}
		}
		return Event{}, false
	}
	for i := len(r.events) - 1; i >= 0; i-- {
		if e := r.events[i]; e.Time.Before(r.cursor) && match(e) {
			return e, true
		}
	}
	return Event{}, false
}

func replayKey(k string) tea.KeyPressMsg {
	switch k {
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "end":
		return tea.KeyPressMsg{Code: tea.KeyEnd}
	case "home":
		return tea.KeyPressMsg{Code: tea.KeyHome}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	}
	return keyMsg(k)
}

func TestReplayTimeControls(t *testing.T) {
	r := newFakeReplay()
	m := New(r, Options{Theme: themes.Plain()})
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 40})
	m.Update(snapshotMsg{tag: 1, snap: r.snap})
	if m.replay == nil {
		t.Fatal("a Replayer backend did not turn replay mode on")
	}
	send := func(keys ...string) {
		for _, k := range keys {
			m.Update(replayKey(k))
		}
	}
	at := func(want time.Duration, what string) {
		t.Helper()
		if got := r.cursor.Sub(t0); got != want {
			t.Errorf("%s: cursor at +%s, want +%s", what, got, want)
		}
	}
	send(".")
	at(10*time.Second, "next event")
	send(".", ".")
	at(30*time.Second, "two more")
	send(",")
	at(20*time.Second, "previous event")
	send("home", "r")
	at(30*time.Second, "next rejection")
	send("e")
	at(40*time.Second, "next escalation")
	send("P")
	at(20*time.Second, "previous pause")
	send("r", "r")
	if !strings.Contains(m.replay.note, "no rejection after") {
		t.Errorf("a second next rejection: note %q", m.replay.note)
	}
	send("g", "-", "1", "5", "s", "enter")
	at(15*time.Second, "go to -15s")
	send("g", "5", "0", "s", "enter")
	at(50*time.Second, "go to 50s from the start")
	send("g", "x", "enter")
	if !strings.Contains(m.replay.note, "go to") {
		t.Errorf("bad time: note %q", m.replay.note)
	}
	at(50*time.Second, "a bad time does not move")

	// Play: speed doubles per +, capped at 64; each frame moves by elapsed × speed.
	send("home", "+", "+", "+")
	if m.replay.speed != 8 {
		t.Errorf("speed %d after three +, want 8", m.replay.speed)
	}
	send("+", "+", "+", "+")
	if m.replay.speed != 64 {
		t.Errorf("speed %d, want the 64 cap", m.replay.speed)
	}
	send("-", "-", "-") // 8×
	send("space")
	now := time.Now()
	if mv := m.replay.tick(now); mv != stayed {
		t.Errorf("the first tick only starts the clock")
	}
	if mv := m.replay.tick(now.Add(time.Second)); mv != forward {
		t.Errorf("a playing tick moves forward")
	}
	at(8*time.Second, "one second at 8×")
	m.replay.tick(now.Add(10 * time.Second))
	at(50*time.Second, "played to the end")
	if m.replay.playing {
		t.Errorf("still playing at the end")
	}

	// A jump starts the session pane over; playing on does not.
	m.outFrom = 42
	m.replayMoved(forward)
	if m.outFrom != 42 {
		t.Errorf("playing forward reset the session pane")
	}
	m.replayMoved(jumped)
	if m.outFrom != 0 {
		t.Errorf("a jump kept the session pane's offset")
	}

	// The bar and the help bar say how to drive it; actions are refused; q quits at once.
	screen := m.render()
	for _, want := range []string{"REPLAY", "next rejection", "play/pause"} {
		if !strings.Contains(screen, want) {
			t.Errorf("screen lacks %q:\n%s", want, screen)
		}
	}
	_, cmd := m.Update(replayKey("q"))
	if cmd == nil {
		t.Fatal("q did nothing")
	}
	if _, ok := cmd().(quitReadyMsg); !ok {
		t.Errorf("q in a replay does not quit at once")
	}
}

func TestParseReplayTime(t *testing.T) {
	start := time.Date(2026, 11, 28, 23, 30, 0, 0, time.Local)
	end := start.Add(3 * time.Hour)
	cur := start.Add(time.Hour)
	for _, c := range []struct {
		in   string
		want time.Time
	}{
		{"90s", start.Add(90 * time.Second)},
		{"1h2m", start.Add(62 * time.Minute)},
		{"+5m", cur.Add(5 * time.Minute)},
		{"-30s", cur.Add(-30 * time.Second)},
		{"-2h", start},
		{"+00:10:00", cur.Add(10 * time.Minute)},
		{"23:45:00", start.Add(15 * time.Minute)},
		{"01:15:00", start.Add(105 * time.Minute)}, // past midnight
		{"9h", end},
	} {
		got, err := ParseReplayTime(c.in, start, end, cur)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%q: %s (%v), want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "soon", "25:99:00"} {
		if _, err := ParseReplayTime(bad, start, end, cur); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestReplayGolden pins the replay screen: the time bar under the panes and the
// replay keys in the help bar.
func TestReplayGolden(t *testing.T) {
	defer func(l *time.Location) { time.Local = l }(time.Local)
	time.Local = time.UTC // the bar shows local clock times
	for _, c := range []struct {
		name string
		w, h int
		keys []string
	}{
		{"80x24-replay", 80, 24, []string{".", "."}},
		{"80x24-replay-help", 80, 24, []string{"?"}},
		{"80x24-replay-goto", 80, 24, []string{"g", "+", "9", "0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newFakeReplay()
			m := New(r, Options{Theme: themes.Plain()})
			m.Update(tea.WindowSizeMsg{Width: c.w, Height: c.h})
			m.Update(snapshotMsg{tag: 1, snap: r.snap})
			for _, k := range c.keys {
				m.Update(replayKey(k))
			}
			checkGolden(t, c.name, stripANSI(m.render()))
		})
	}
}
