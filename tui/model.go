package tui

import (
	"errors"
	"fmt"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"corral/themes"
)

// Options configure the TUI.
type Options struct {
	Theme   themes.Theme
	SkinDir string // user skins (may be ""); switching theme re-reads it
	// SkinChanges signals that a skin in SkinDir changed; the theme shown reloads.
	SkinChanges <-chan struct{}
}

// Model is the root: it only routes — sizes to every pane, keys to the focused one or
// to the dialog on top, data to the panes that show it — and keeps the fleet picture.
type Model struct {
	backend Backend
	keys    KeyMap
	help    help.Model
	styles  *Styles
	opts    Options
	themeAt int

	width, height int
	clip          clipper // which lines of the last frame fit the screen
	focus         int     // index into panes
	tasks         *tasksPane
	session       *sessionPane
	panes         []pane // tasks, session, then the side panes, in tab order
	publishes     *listPane
	// showingLane: the session pane shows a publish's lane test, chosen in the
	// Publishes pane; it follows the tasks again once they have focus.
	showingLane bool

	snap     Snapshot
	events   []Event // newest last, bounded
	evCh     <-chan Event
	unsub    func()
	tag      int // of the newest snapshot fetch
	applied  int // tag of the snapshot shown
	fetching bool
	dirty    bool // events arrived since the last fetch
	lastSnap time.Time
	outFrom  int64 // next output offset of the session shown
	outBusy  bool

	status    string
	statusErr bool
	dialog    *dialog
	fullHelp  bool
	attached  string // session typed into, "" when not attached
	quitting  bool
	boxCache  map[int]boxCache
	frame     string          // the last rendered screen; "" when something changed since
	replay    *replayControls // the time bar, over a Replayer backend; nil when live
}

// New builds the root model over a backend.
func New(b Backend, opts Options) *Model {
	m := &Model{backend: b, keys: DefaultKeyMap(), help: help.New(), opts: opts, styles: NewStyles(opts.Theme)}
	m.tasks = newTasksPane()
	m.session = newSessionPane()
	m.publishes = newListPane("Publishes", renderPublishes)
	m.panes = []pane{m.tasks, m.session, m.publishes, newListPane("Inbox", renderInbox),
		newListPane("Leases", renderLeases), newListPane("Budgets", renderBudgets),
		newListPane("Timeline", renderTimeline)}
	for i, n := range themes.Names(opts.SkinDir) {
		if n == opts.Theme.Name {
			m.themeAt = i
		}
	}
	if r, ok := b.(Replayer); ok {
		m.replay = newReplayControls(r)
		m.tasks.now = func() time.Time { return m.snap.Taken } // ages as they were at the cursor
	}
	m.evCh, m.unsub = b.Subscribe()
	m.refresh() // panes always have data, empty until the first snapshot
	return m
}

// Init starts the clock, the event feed and the first fetch.
func (m *Model) Init() tea.Cmd {
	m.fetching = true
	m.tag++
	return tea.Batch(frameCmd(), waitForEventsCmd(m.evCh), snapshotCmd(m.backend, m.tag), waitSkinCmd(m.opts.SkinChanges))
}

// skinChangedMsg says a user skin changed on disk.
type skinChangedMsg struct{}

func waitSkinCmd(ch <-chan struct{}) tea.Cmd {
	if ch == nil {
		return nil
	}
	return func() tea.Msg {
		if _, ok := <-ch; !ok {
			return nil
		}
		return skinChangedMsg{}
	}
}

// Update routes one message. Every message but the clock's may change the screen;
// the clock's only does when it brings something, so an idle fleet costs no View.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if _, tick := msg.(frameMsg); !tick {
		m.frame = ""
	}
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.layout()
		return m, nil
	case frameMsg:
		return m, m.onFrame()
	case snapshotMsg:
		m.fetching = false
		if msg.tag < m.applied {
			return m, nil // an older fetch finished late
		}
		if msg.err != nil {
			m.setStatus(msg.err.Error(), true)
			return m, nil
		}
		m.applied, m.snap, m.lastSnap = msg.tag, msg.snap, time.Now()
		if len(m.events) == 0 || m.replay != nil {
			// Replayed, the timeline is what had happened by the cursor.
			m.events = append(m.events[:0:0], msg.snap.Events...)
		}
		m.layout() // the tasks pane grows with the tasks on a narrow screen
		m.refresh()
		return m, nil
	case eventsMsg:
		m.events = append(m.events, msg.evs...)
		if n := len(m.events); n > 1000 {
			m.events = append([]Event(nil), m.events[n-500:]...)
		}
		m.dirty = true
		if msg.closed {
			m.setStatus("the fleet stopped", false)
			return m, nil
		}
		return m, waitForEventsCmd(m.evCh)
	case outputMsg:
		m.outBusy = false
		if msg.session != m.session.sessionID || msg.from != m.outFrom {
			return m, nil // the selection moved on
		}
		m.outFrom = msg.next
		m.session.append(msg.data)
		return m, nil
	case actionDoneMsg:
		m.dirty = true
		if msg.err != nil {
			m.setStatus(fmt.Sprintf("%s %s: %v", msg.action.Verb, target(msg.action), msg.err), !errors.Is(msg.err, ErrNotApplicable))
		} else if msg.note != "" {
			m.setStatus(fmt.Sprintf("%s %s: %s", msg.action.Verb, target(msg.action), msg.note), false)
		} else {
			m.setStatus(fmt.Sprintf("%s %s: done", msg.action.Verb, target(msg.action)), false)
		}
		return m, nil
	case themeMsg:
		if msg.err != nil {
			m.setStatus(msg.err.Error(), true)
			return m, nil
		}
		m.styles = msg.styles
		m.setStatus("theme "+msg.styles.Theme.Name, false)
		m.refresh()
		return m, nil
	case skinChangedMsg:
		if m.styles.Theme.NoColor {
			return m, waitSkinCmd(m.opts.SkinChanges)
		}
		return m, tea.Batch(themeCmd(m.styles.Theme.Name, m.opts.SkinDir), waitSkinCmd(m.opts.SkinChanges))
	case quitReadyMsg:
		m.quitting = true
		m.unsub()
		return m, tea.Quit
	case tea.KeyPressMsg:
		return m, m.onKey(msg)
	}
	return m, nil
}

// ErrNotApplicable marks an action that does not apply to the selection; the backend
// wraps the supervisor's reason in it.
var ErrNotApplicable = errors.New("not applicable")

func target(a Action) string {
	if a.Publish != 0 {
		return fmt.Sprintf("publish %d", a.Publish)
	}
	if a.Task == "" {
		return "the fleet" // a fleet-wide action
	}
	return a.Task
}

func (m *Model) setStatus(s string, isErr bool) { m.status, m.statusErr = s, isErr }

// onFrame is the clock: fetch a snapshot when events arrived (or a second passed),
// and the shown session's new output, at most once per frame each.
func (m *Model) onFrame() tea.Cmd {
	cmds := []tea.Cmd{frameCmd()}
	if m.replay != nil {
		m.replayMoved(m.replay.tick(time.Now()))
	}
	if !m.fetching && (m.dirty || time.Since(m.lastSnap) >= snapshotEvery) {
		m.fetching, m.dirty = true, false
		m.tag++
		cmds = append(cmds, snapshotCmd(m.backend, m.tag))
	}
	if id := m.session.sessionID; id != "" && !m.outBusy && (m.attached != "" || m.sessionVisible()) {
		m.outBusy = true
		cmds = append(cmds, outputCmd(m.backend, id, m.outFrom))
	}
	return tea.Batch(cmds...)
}

// refresh hands the new picture to every pane; they rebuild their cached rows.
func (m *Model) refresh() {
	d := &viewData{snap: &m.snap, events: m.events, styles: m.styles}
	for _, p := range m.panes {
		p.SetData(d)
	}
	m.follow()
}

// follow points the session pane at what the focus selects: a publish's lane test
// from the Publishes pane, else the selected task's session.
func (m *Model) follow() {
	if m.focus == 0 {
		m.showingLane = false
	}
	if m.panes[m.focus] == m.publishes {
		m.followPublish()
	}
	if !m.showingLane {
		m.followSelection()
	}
}

// followPublish shows the selected publish's lane test, when the lane ran one.
func (m *Model) followPublish() {
	r := m.publishes.selectedRow()
	if r == nil || r.publish == 0 {
		return
	}
	for _, p := range m.snap.Publishes {
		if p.ID != r.publish || p.LaneSession == "" {
			continue
		}
		m.showingLane = true
		if p.LaneSession != m.session.sessionID {
			m.outFrom, m.outBusy = 0, false
		}
		m.session.showLane(p)
		return
	}
}

// followSelection points the session pane at the selected task's live session, or
// else at its last one as it ended.
func (m *Model) followSelection() {
	sel := m.tasks.selected()
	id := ""
	if sel != nil {
		id = sel.Session
		if id == "" {
			id = sel.LastSession
		}
	}
	if id != m.session.sessionID {
		m.session.show(id, sel)
		m.outFrom, m.outBusy = 0, false
	} else {
		m.session.facts(sel)
	}
}

func (m *Model) onKey(msg tea.KeyPressMsg) tea.Cmd {
	if m.attached != "" {
		return m.onAttachedKey(msg)
	}
	if m.dialog != nil {
		return m.onDialogKey(msg)
	}
	if m.replay != nil {
		if key.Matches(msg, m.keys.Quit) && !m.replay.seeking {
			return func() tea.Msg { return quitReadyMsg{} } // nothing runs in a replay
		}
		if mv, ok := m.replay.onKey(msg); ok {
			m.status = ""
			m.replayMoved(mv)
			return nil
		}
	}
	k := m.keys
	switch {
	case key.Matches(msg, k.Quit):
		return m.askQuit()
	case key.Matches(msg, k.Help):
		m.fullHelp = !m.fullHelp
		m.layout()
		return nil
	case key.Matches(msg, k.Tab):
		m.focus = (m.focus + 1) % len(m.panes)
		m.layout()
		m.follow()
		return nil
	case key.Matches(msg, k.ShiftTab):
		m.focus = (m.focus + len(m.panes) - 1) % len(m.panes)
		m.layout()
		m.follow()
		return nil
	case key.Matches(msg, k.Theme):
		names := themes.Names(m.opts.SkinDir)
		if m.styles.Theme.NoColor {
			m.setStatus("NO_COLOR is set: themes stay off", false)
			return nil
		}
		m.themeAt = (m.themeAt + 1) % len(names)
		return themeCmd(names[m.themeAt], m.opts.SkinDir)
	case key.Matches(msg, k.Filter):
		m.focus = 0
		m.dialog = newInput(dlgFilter, "filter tasks: ", m.tasks.filter)
		return nil
	case key.Matches(msg, k.Add):
		m.dialog = newInput(dlgAdd, "new task (id prompt…): ", "")
		return nil
	}
	if cmd, handled := m.onActionKey(msg); handled {
		return cmd
	}
	// Everything else belongs to the focused pane (movement, sorting, scrolling).
	cmd := m.panes[m.focus].Update(msg)
	m.follow()
	return cmd
}

func themeCmd(name, dir string) tea.Cmd {
	return func() tea.Msg {
		th, err := themes.Load(name, dir)
		if err != nil {
			return themeMsg{err: err}
		}
		return themeMsg{styles: NewStyles(th)}
	}
}

// sessionVisible says whether the session pane is on screen now.
func (m *Model) sessionVisible() bool { return m.wide() || m.bottomPane() == 1 }

func (m *Model) wide() bool { return m.width >= 140 && m.height >= 30 }

// bottomPane is the pane shown under the tasks on a narrow screen: the focused one,
// or the session while the tasks have focus.
func (m *Model) bottomPane() int {
	if m.focus == 0 {
		return 1
	}
	return m.focus
}

// Close ends the event subscription; main calls it once the program has returned.
func (m *Model) Close() {
	m.unsub()
	m.session.close()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// replayMoved refetches the panes after the replay cursor moved; the session pane
// starts over unless the cursor only played forward.
func (m *Model) replayMoved(mv moved) {
	if mv == stayed {
		return
	}
	m.dirty, m.frame = true, ""
	if mv == jumped {
		m.session.close()
		m.outFrom, m.outBusy = 0, false
	}
}
