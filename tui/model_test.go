package tui

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"corral/themes"
)

// newTestModel is a model over the fake fleet, sized and with its first snapshot.
func newTestModel(t *testing.T, w, h int) (*Model, *fakeFleet) {
	t.Helper()
	f := newFakeFleet()
	m := New(f, Options{Theme: themes.Plain()})
	m.tasks.now = func() time.Time { return t0 }
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	m.Update(snapshotMsg{tag: 1, snap: f.snap})
	return m, f
}

// press sends a key and runs the command it returns (one level, as the runtime would).
func press(m *Model, keys ...string) []tea.Msg {
	var msgs []tea.Msg
	for _, k := range keys {
		_, cmd := m.Update(keyMsg(k))
		if cmd == nil {
			continue
		}
		// The input's cursor blink is a timer: a command that takes long is not ours.
		done := make(chan tea.Msg, 1)
		go func() { done <- cmd() }()
		select {
		case msg := <-done:
			if msg != nil {
				msgs = append(msgs, msg)
				m.Update(msg)
			}
		case <-time.After(100 * time.Millisecond):
		}
	}
	return msgs
}

func keyMsg(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "ctrl+]":
		return tea.KeyPressMsg{Code: ']', Mod: tea.ModCtrl}
	}
	r := []rune(k)[0]
	return tea.KeyPressMsg{Code: r, Text: k}
}

func selectTask(t *testing.T, m *Model, id string) {
	t.Helper()
	for i := 0; i < 20; i++ {
		if s := m.tasks.selected(); s != nil && s.ID == id {
			return
		}
		press(m, "j")
	}
	t.Fatalf("task %s never selected", id)
}

func TestPauseResumeFollowState(t *testing.T) {
	m, f := newTestModel(t, 120, 35)
	selectTask(t, m, "slow")
	press(m, "p")
	m.tasks.visible[m.tasks.cursor].State = "paused"
	press(m, "p")
	if len(f.acts) != 2 || f.acts[0] != (Action{Verb: VerbPause, Task: "slow"}) || f.acts[1].Verb != VerbResume {
		t.Fatalf("actions %+v, want pause then resume of slow", f.acts)
	}
	if !strings.Contains(m.status, "resume slow: done") {
		t.Fatalf("status %q", m.status)
	}
}

func TestNotApplicableSaysWhy(t *testing.T) {
	m, f := newTestModel(t, 120, 35)
	f.errs[VerbPause] = fmt.Errorf("%w: task pricing has no running session", ErrNotApplicable)
	press(m, "p")
	if !strings.Contains(m.status, "no running session") || m.statusErr {
		t.Fatalf("status %q (error style %v): want the reason, not an error", m.status, m.statusErr)
	}
}

func TestDangerousKeysConfirm(t *testing.T) {
	m, f := newTestModel(t, 120, 35)
	selectTask(t, m, "burner")
	press(m, "D")
	if m.dialog == nil || len(f.acts) != 0 {
		t.Fatal("discard acted without asking")
	}
	press(m, "n")
	if m.dialog != nil || len(f.acts) != 0 {
		t.Fatal("n did not cancel")
	}
	press(m, "X", "y")
	if len(f.acts) != 1 || f.acts[0] != (Action{Verb: VerbKill, Task: "burner"}) {
		t.Fatalf("actions %+v", f.acts)
	}
}

func TestApproveAndDenyTheEscalation(t *testing.T) {
	m, f := newTestModel(t, 120, 35)
	press(m, "a") // pricing selected: nothing of its own waits
	if len(f.acts) != 0 || !strings.Contains(m.status, "nothing to approve") {
		t.Fatalf("acts %+v status %q", f.acts, m.status)
	}
	selectTask(t, m, "lockfile")
	press(m, "a")
	press(m, "d", "n", "o", "enter")
	if len(f.acts) != 2 || f.acts[0] != (Action{Verb: VerbApprove, Task: "lockfile", Publish: 4}) ||
		f.acts[1] != (Action{Verb: VerbDeny, Task: "lockfile", Publish: 4, Reason: "no"}) {
		t.Fatalf("actions %+v", f.acts)
	}
}

func TestFilterNarrowsTheTable(t *testing.T) {
	m, _ := newTestModel(t, 120, 35)
	press(m, "/", "p", "r", "e", "enter")
	if len(m.tasks.visible) != 2 || m.tasks.visible[0].ID != "preview-a" {
		t.Fatalf("visible %v", m.tasks.visible)
	}
	press(m, "esc")
	if len(m.tasks.visible) != 10 {
		t.Fatalf("esc kept the filter: %d rows", len(m.tasks.visible))
	}
}

func TestStaleSnapshotDropped(t *testing.T) {
	m, f := newTestModel(t, 120, 35)
	m.Update(snapshotMsg{tag: 3, snap: f.snap})
	old := f.snap
	old.Fleet = "stale"
	m.Update(snapshotMsg{tag: 2, snap: old})
	if m.snap.Fleet != "demo" {
		t.Fatal("an older fetch overwrote a newer one")
	}
}

func TestAttachTypesIntoTheAgentAndDetaches(t *testing.T) {
	m, f := newTestModel(t, 120, 35)
	selectTask(t, m, "slow")
	press(m, "enter")
	if m.attached != "slow-1" {
		t.Fatalf("attached %q", m.attached)
	}
	press(m, "l", "s", "enter", "q")
	if got := f.typed.String(); got != "ls\rq" {
		t.Fatalf("typed %q, want keys to reach the agent (q included)", got)
	}
	press(m, "ctrl+]")
	if m.attached != "" {
		t.Fatal("ctrl+] did not detach")
	}
}

func TestQuitAsksAboutRunningAgents(t *testing.T) {
	m, f := newTestModel(t, 120, 35)
	msgs := press(m, "q")
	if m.dialog == nil || m.dialog.kind != dlgQuit || len(msgs) != 0 {
		t.Fatal("quit did not ask with agents running")
	}
	msgs = press(m, "d")
	if len(msgs) != 1 || len(f.acts) != 5 || f.acts[0].Verb != VerbDiscard {
		t.Fatalf("discard-all: msgs %v acts %+v", msgs, f.acts)
	}
	if !m.quitting {
		t.Fatal("did not quit")
	}
}

func TestSessionOutputCleanedAndStaleOutputDropped(t *testing.T) {
	m, f := newTestModel(t, 120, 35)
	selectTask(t, m, "slow")
	r := f.outputs["slow-1"]
	m.Update(outputMsg{session: "burner-1", data: []byte("not mine")})
	data, next := r.Since(0)
	m.Update(outputMsg{session: "slow-1", from: 0, data: data, next: next})
	got := stripANSI(m.session.View(false))
	for _, want := range []string{"step 1", "step 2", "progress 90%"} {
		if !strings.Contains(got, want) {
			t.Fatalf("the session pane lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "not mine") || strings.Contains(got, "progress 10%") {
		t.Fatalf("stale output shown or a carriage return ignored:\n%s", got)
	}
}

// A task with no live session shows its last session's terminal as it ended: a
// failed agent's last words are what the user needs to decide on a retry.
func TestEndedTaskShowsItsLastSession(t *testing.T) {
	m, _ := newTestModel(t, 120, 35)
	selectTask(t, m, "docs") // queued: it has never run
	if m.session.sessionID != "" || !strings.Contains(m.session.View(false), "docs is queued: no live session") {
		t.Errorf("a task that never ran shows %q:\n%s", m.session.sessionID, m.session.View(false))
	}
	selectTask(t, m, "tests")
	if m.session.sessionID != "tests-1" {
		t.Fatalf("the session pane follows %q, want the last session tests-1", m.session.sessionID)
	}
	m.Update(outputCmd(m.backend, "tests-1", 0)())
	got := stripANSI(m.session.View(false))
	for _, want := range []string{"tests is failed · tests-1 as it ended (killed by the user)", "--- FAIL: TestTotals", "exit 1"} {
		if !strings.Contains(got, want) {
			t.Errorf("the session pane lacks %q:\n%s", want, got)
		}
	}
}

// With the Publishes pane focused, the session pane shows the selected publish's lane
// test; once the tasks have focus again it follows the selected task.
func TestPublishesPaneShowsTheLaneTest(t *testing.T) {
	m, _ := newTestModel(t, 160, 45)
	press(m, "tab", "tab")
	if m.panes[m.focus] != m.publishes {
		t.Fatalf("focus on pane %d, want Publishes", m.focus)
	}
	for i := 0; i < 10 && m.session.sessionID != "lane7-1-a1b2c3"; i++ {
		press(m, "j")
	}
	if m.session.sessionID != "lane7-1-a1b2c3" {
		t.Fatalf("the session pane shows %q, want publish #2's lane test", m.session.sessionID)
	}
	m.Update(outputCmd(m.backend, "lane7-1-a1b2c3", 0)())
	got := stripANSI(m.session.View(false))
	for _, want := range []string{"lane test of publish #2 (changelog) at b00b1e5 · green", "shop/pricing"} {
		if !strings.Contains(got, want) {
			t.Errorf("the session pane lacks %q:\n%s", want, got)
		}
	}
	m.Update(snapshotMsg{tag: 2, snap: m.snap}) // a refresh keeps the lane test in view
	press(m, "tab")                             // to the Inbox: still the lane test
	if m.session.sessionID != "lane7-1-a1b2c3" {
		t.Errorf("after a refresh and a tab the session pane shows %q", m.session.sessionID)
	}
	for m.focus != 0 {
		press(m, "tab")
	}
	if sel := m.tasks.selected(); sel == nil || m.session.sessionID != sel.Session {
		t.Errorf("back on the tasks, the session pane shows %q, want the selected task's", m.session.sessionID)
	}
}

func TestEventsCoalesceAndReArm(t *testing.T) {
	m, f := newTestModel(t, 120, 35)
	for i := range 5 {
		f.events <- Event{Seq: int64(100 + i), Kind: "task.queued"}
	}
	msg := waitForEventsCmd(f.events)()
	em, ok := msg.(eventsMsg)
	if !ok || len(em.evs) != 5 {
		t.Fatalf("got %#v, want one batch of 5", msg)
	}
	_, cmd := m.Update(em)
	if cmd == nil || !m.dirty {
		t.Fatal("events did not re-arm the feed or mark the fleet dirty")
	}
}

func TestThemesCompileForEverySkin(t *testing.T) {
	for _, name := range themes.Names("") {
		th, err := themes.Load(name, "")
		if err != nil {
			t.Fatal(err)
		}
		st := NewStyles(th)
		if st.State("running").Render("x") == st.State("failed").Render("x") {
			t.Errorf("%s: running and failed look the same", name)
		}
	}
	if errors.Is(nil, ErrNotApplicable) {
		t.Fatal()
	}
}

func TestInboxShowsTheEscalatedDiff(t *testing.T) {
	m, _ := newTestModel(t, 120, 35)
	snap := m.snap
	snap.Inbox = []InboxItem{{Task: "lockfile", Publish: 4, What: "escalated", Paths: []string{"go.sum"},
		Diff: []string{"--- a/go.sum", "+++ b/go.sum", "-example.com/old v1.0.0 h1:x", "+example.com/new v1.2.0 h1:y"}}}
	rows := renderInbox(&viewData{snap: &snap, styles: m.styles}, 80)
	var text strings.Builder
	for _, r := range rows {
		text.WriteString(r.text + "\n")
		if r.publish != 4 {
			t.Errorf("a diff row does not point at its publish: %+v", r)
		}
	}
	for _, want := range []string{"go.sum", "-example.com/old v1.0.0", "+example.com/new v1.2.0"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("inbox lacks %q:\n%s", want, text.String())
		}
	}
}

func TestRebaseKeyAppliesOnlyBehindAndConfirms(t *testing.T) {
	m, f := newTestModel(t, 120, 35)
	press(m, "R") // pricing is done: nothing to rebase
	if len(f.acts) != 0 || m.dialog != nil || !strings.Contains(m.status, "no live session") {
		t.Fatalf("rebase of a done task: acts %+v dialog %v status %q", f.acts, m.dialog != nil, m.status)
	}
	selectTask(t, m, "checkout") // running one-shot, two commits behind
	press(m, "R")
	if len(f.acts) != 0 || !strings.Contains(m.status, "pause it to rebase") {
		t.Fatalf("rebase of a running one-shot: acts %+v status %q", f.acts, m.status)
	}
	m.tasks.visible[m.tasks.cursor].State = "paused"
	f.notes = map[Verb]string{VerbRebase: "now on d51a129; 1 moved, 0 merged; conflicts: a.go (content)"}
	press(m, "R")
	if m.dialog == nil || !strings.Contains(m.dialog.prompt, "2 commit(s) ahead") || len(f.acts) != 0 {
		t.Fatalf("rebase did not ask first: dialog %+v acts %+v", m.dialog, f.acts)
	}
	press(m, "y")
	if len(f.acts) != 1 || f.acts[0] != (Action{Verb: VerbRebase, Task: "checkout"}) {
		t.Fatalf("actions %+v, want rebase of checkout", f.acts)
	}
	if !strings.Contains(m.status, "conflicts: a.go (content)") {
		t.Fatalf("status %q does not say what the rebase left", m.status)
	}
}

// The header says what the lane thinks of the head; the publishes pane marks each
// publish's verdict and the culprit.
func TestLaneInHeaderAndPublishes(t *testing.T) {
	m, _ := newTestModel(t, 140, 35)
	if strings.Contains(m.header(), "green") {
		t.Fatalf("a fleet without a lane shows a verdict: %s", m.header())
	}
	m.snap.Lane = LaneStatus{Outcome: "green"}
	if h := ansi.Strip(m.header()); !strings.Contains(h, "head corral/head d51a129 green") {
		t.Errorf("header %q, want the head green", h)
	}
	m.snap.Lane = LaneStatus{Outcome: "red", Culprit: 5, Task: "pricing", Narrowed: "stop"}
	if h := ansi.Strip(m.header()); !strings.Contains(h, "red since #5 (pricing) admission stop") {
		t.Errorf("header %q, want red with the culprit and the narrowing", h)
	}
	snap := m.snap
	snap.Publishes = []Publish{
		{ID: 4, Task: "docs", Outcome: "accepted", Head: "a", NewHead: "b", Lane: "green"},
		{ID: 5, Task: "pricing", Outcome: "accepted", Head: "b", NewHead: "c", Lane: "red", Culprit: true},
		{ID: 6, Task: "seo", Outcome: "accepted", Head: "c", NewHead: "d", Lane: "skipped"},
	}
	rows := renderPublishes(&viewData{snap: &snap, styles: m.styles}, 100)
	want := []string{"#6", "·", "#5", "✗culprit", "#4", "✓"}
	for i, r := range rows {
		if !strings.Contains(r.text, want[2*i]) || !strings.Contains(r.text, want[2*i+1]) {
			t.Errorf("row %d %q, want %q and %q", i, r.text, want[2*i], want[2*i+1])
		}
	}
}

func TestFallbackKeyOnlyWhenThePlanHasOne(t *testing.T) {
	m, f := newTestModel(t, 120, 35)
	press(m, "F")
	if len(f.acts) != 0 || m.dialog != nil || !strings.Contains(m.status, "no fallback_url") {
		t.Fatalf("fallback without one: acts %+v dialog %v status %q", f.acts, m.dialog != nil, m.status)
	}
	m.snap.FallbackReady = true
	f.notes = map[Verb]string{VerbFallback: "model calls go to the fallback upstream; quota-paused sessions resumed"}
	press(m, "F")
	if m.dialog == nil || len(f.acts) != 0 {
		t.Fatalf("fallback did not ask first: acts %+v", f.acts)
	}
	press(m, "y")
	if len(f.acts) != 1 || f.acts[0].Verb != VerbFallback || !strings.Contains(m.status, "quota-paused sessions resumed") {
		t.Fatalf("actions %+v status %q", f.acts, m.status)
	}
}
