package tui

import (
	"time"

	tea "charm.land/bubbletea/v2"
)

// Messages carry their origin's tag so stale answers are dropped (STYLE.md point 6).
type (
	// frameMsg is the clock: at most frameRate redraws a second, whatever arrives.
	frameMsg struct{}
	// snapshotMsg is a fetched picture of the fleet; tag orders fetches.
	snapshotMsg struct {
		tag  int
		snap Snapshot
		err  error
	}
	// eventsMsg is a batch of live events drained at once.
	eventsMsg struct {
		evs    []Event
		closed bool
	}
	// outputMsg is new terminal output of one session, read from offset.
	outputMsg struct {
		session string
		from    int64
		data    []byte
		next    int64
	}
	// actionDoneMsg reports what an action did.
	actionDoneMsg struct {
		action Action
		note   string
		err    error
	}
	// themeMsg is a loaded skin, compiled.
	themeMsg struct {
		styles *Styles
		err    error
	}
	// quitReadyMsg says the quit choice was carried out.
	quitReadyMsg struct{}
)

const (
	frameRate     = 20          // redraws a second at most
	snapshotEvery = time.Second // refresh even without events, for usage
	eventBatch    = 512         // events coalesced into one message
	outputKeep    = 64 << 10    // bytes of a session's output kept for its pane
	frameEvery    = time.Second / frameRate
)

func frameCmd() tea.Cmd {
	return tea.Tick(frameEvery, func(time.Time) tea.Msg { return frameMsg{} })
}

func snapshotCmd(b Backend, tag int) tea.Cmd {
	return func() tea.Msg {
		snap, err := b.Snapshot()
		return snapshotMsg{tag: tag, snap: snap, err: err}
	}
}

// waitForEventsCmd blocks for one event, then takes whatever else is already queued,
// so a burst costs one Update; Update re-arms it.
func waitForEventsCmd(ch <-chan Event) tea.Cmd {
	return func() tea.Msg {
		e, ok := <-ch
		if !ok {
			return eventsMsg{closed: true}
		}
		evs := []Event{e}
		for len(evs) < eventBatch {
			select {
			case e, ok := <-ch:
				if !ok {
					return eventsMsg{evs: evs, closed: true}
				}
				evs = append(evs, e)
			default:
				return eventsMsg{evs: evs}
			}
		}
		return eventsMsg{evs: evs}
	}
}

func outputCmd(b Backend, session string, from int64) tea.Cmd {
	return func() tea.Msg {
		ring, ok := b.Output(session)
		if !ok {
			return outputMsg{session: session, from: from, next: from}
		}
		data, next := ring.Since(from)
		return outputMsg{session: session, from: from, data: data, next: next}
	}
}

func actCmd(b Backend, a Action) tea.Cmd {
	return func() tea.Msg {
		note, err := b.Act(a)
		return actionDoneMsg{action: a, note: note, err: err}
	}
}

func writeCmd(b Backend, session string, p []byte) tea.Cmd {
	return func() tea.Msg {
		if w, ok := b.Input(session); ok {
			w.Write(p) // a failed write means the agent is gone; its exit event says so
		}
		return nil
	}
}
