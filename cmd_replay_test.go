package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"corral/sandbox"
	"corral/supervisor"
	"corral/tui"
)

// liveSample is what the live TUI was handed at one moment of a run.
type liveSample struct {
	before, after time.Time
	state         supervisor.FleetState
	snap          tui.Snapshot
}

// paneView is what the panes show of a snapshot, minus what moves by itself between
// frames (usage samples, clocks): the fields the replay must reproduce.
type paneView struct {
	Head      string
	Tasks     []string
	Leases    []string
	Publishes []string
	Inbox     []string
}

func panesOf(s tui.Snapshot) paneView {
	v := paneView{Head: s.Head}
	for _, t := range s.Tasks {
		v.Tasks = append(v.Tasks, fmt.Sprintf("%s %s attempt=%d session=%s base=%.12s behind=%d ports=%v last=%s reason=%q",
			t.ID, t.State, t.Attempt, t.Session, t.Base, t.Behind, t.Ports, t.LastPublish, t.Reason))
	}
	for _, l := range s.Leases {
		v.Leases = append(v.Leases, fmt.Sprintf("%d %s %s %s", l.Port, l.Endpoint, l.Task, l.Session))
	}
	for _, p := range s.Publishes {
		v.Publishes = append(v.Publishes, fmt.Sprintf("#%d %s %s %s new=%.12s conflicts=%v decided=%s", p.ID, p.Task, p.Session, p.Outcome, p.NewHead, p.Conflicts, p.Decided))
	}
	for _, i := range s.Inbox {
		v.Inbox = append(v.Inbox, fmt.Sprintf("%s #%d %s %v", i.Task, i.Publish, i.What, i.Paths))
	}
	return v
}

// TestReplayMatchesLiveDemo runs the demo's story headless while sampling what the
// live TUI would show, then replays the run read-only and checks that at each sampled
// time the replay shows the same fleet: tasks, sessions, head, leases, publishes and
// inbox. It also checks that replay wrote nothing, that every session's recording
// exports as asciicast v2, and that the report's figures match the run's records.
func TestReplayMatchesLiveDemo(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	planPath, err := buildDemo(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	fl, err := openFleet(planPath, false, false)
	if err != nil {
		t.Fatal(err)
	}
	live := &tuiBackend{fl: fl}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runDemoHeadless(ctx, fl, io.Discard) }()
	var samples []liveSample
	tick := time.NewTicker(25 * time.Millisecond)
sampling:
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("demo: %v", err)
			}
			break sampling
		case <-tick.C:
			s := liveSample{before: time.Now()}
			s.state = fl.sv.State()
			s.snap, err = live.Snapshot()
			s.after = time.Now()
			if err == nil {
				samples = append(samples, s)
			}
		}
	}
	tick.Stop()
	repo := fl.repo
	fl.Close()

	dbPath := fleetDB(repo, "demo")
	sum := func() [32]byte {
		data, _ := os.ReadFile(dbPath)
		return sha256.Sum256(data)
	}
	before := sum()

	_, ref, db, h, err := loadRun(repo.WorkTree, "")
	if err != nil {
		t.Fatal(err)
	}
	if ref.ID != "demo" || !ref.Current {
		t.Errorf("run %+v, want the current run of fleet demo", ref)
	}
	b := newReplayBackend(repo, db, h)
	compared := 0
	for _, s := range samples {
		// A sample is a picture of one moment only if nothing was recorded while it
		// was taken; events times then say exactly which side of it they fell.
		if h.EventsUntil(s.after) != h.EventsUntil(s.before.Add(-time.Nanosecond)) || recordStamped(h, s.before, s.after) {
			continue
		}
		m := h.At(s.after)
		if got, want := taskStates(m.State.Tasks), taskStates(s.state.Tasks); !reflect.DeepEqual(got, want) {
			t.Errorf("at %s tasks:\n replay %v\n live   %v", s.after.Format("15:04:05.000"), got, want)
		}
		if got, want := sessionStates(m.State.Sessions), sessionStates(s.state.Sessions); !reflect.DeepEqual(got, want) {
			t.Errorf("at %s sessions:\n replay %v\n live   %v", s.after.Format("15:04:05.000"), got, want)
		}
		if m.State.Fleet.Head != s.state.Fleet.Head {
			t.Errorf("at %s head: replay %.12s, live %.12s", s.after.Format("15:04:05.000"), m.State.Fleet.Head, s.state.Fleet.Head)
		}
		b.Seek(s.after)
		snap, err := b.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := panesOf(snap), panesOf(s.snap); !reflect.DeepEqual(got, want) {
			g, _ := json.MarshalIndent(got, "", " ")
			w, _ := json.MarshalIndent(want, "", " ")
			t.Errorf("at %s the panes differ:\nreplay %s\nlive   %s", s.after.Format("15:04:05.000"), g, w)
		}
		compared++
	}
	t.Logf("%d samples, %d taken between events and compared; %d events", len(samples), compared, len(h.Events))
	if compared < 20 {
		t.Errorf("only %d of %d samples could be compared", compared, len(samples))
	}
	// The events of interest happened and the replay can jump to them.
	for _, kind := range []string{"publish.rejected", "session.paused", "publish.escalated"} {
		b.Seek(h.Start())
		if e, ok := b.FindEvent(1, kind); !ok || e.Kind != kind {
			t.Errorf("no %s to jump to from the start", kind)
		} else {
			b.Seek(e.Time)
			if n := h.EventsUntil(b.Cursor()); h.Events[n-1].Seq < e.Seq {
				t.Errorf("seek to %s #%d landed before it", kind, e.Seq)
			}
		}
	}

	// Every session's terminal is there, plays back, and exports as asciicast v2.
	playedByAsciinema := 0
	for _, s := range h.Sessions {
		var out bytes.Buffer
		n, err := exportCast(&out, s.Recording, s.ID)
		if err != nil {
			t.Errorf("export %s: %v", s.ID, err)
			continue
		}
		if err := checkAsciicast(out.Bytes()); err != nil {
			t.Errorf("export %s: %v", s.ID, err)
		}
		exported := filepath.Join(t.TempDir(), s.ID+".cast")
		os.WriteFile(exported, out.Bytes(), 0o644)
		if played, ok := asciinemaCat(t, exported); ok {
			playedByAsciinema++
			c, _ := sandbox.OpenCast(s.Recording)
			wantOut, _ := c.Read(0, c.Output)
			c.Close()
			// The pty asciinema runs under turns \n into \r\n: compare without \r.
			strip := func(b []byte) string { return strings.ReplaceAll(string(b), "\r", "") }
			if strip(played) != strip(wantOut) {
				t.Errorf("asciinema cat %s: %q, want %q", s.ID, played, wantOut)
			}
		}
		c, err := sandbox.OpenCast(s.Recording)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := c.Read(0, c.Output)
		c.Close()
		if n > 0 && len(data) == 0 {
			t.Errorf("session %s: %d events but no output", s.ID, n)
		}
		if strings.HasPrefix(s.Task, "preview") || s.Task == "burner" {
			continue
		}
		// The demo's agents print what they do; the recording has it.
		if !bytes.Contains(data, []byte(s.Task)) && !bytes.Contains(data, []byte("step")) && len(data) == 0 {
			t.Errorf("session %s: recording has no output", s.ID)
		}
	}

	t.Logf("%d of %d exported recordings played by asciinema cat", playedByAsciinema, len(h.Sessions))

	// The report's figures are the records' own.
	rep := h.Report(nil)
	checkReportAgainstRecords(t, h, rep)

	db.Close()
	b.Close()
	if sum() != before {
		t.Errorf("replay changed the fleet database")
	}

	// gc removes the snapshots no session stands on and says what it freed; the
	// current run's recordings stay.
	code, out, errOut := runMain("gc", "--repo", repo.WorkTree, "--keep-snapshots", "0")
	if code != 0 {
		t.Fatalf("gc: exit %d: %s", code, errOut)
	}
	t.Logf("gc: %s", out)
	if !strings.Contains(out, "freed") || strings.Contains(out, ", 0 snapshot(s)") {
		t.Errorf("gc freed no snapshot after the run:\n%s", out)
	}
	for _, s := range h.Sessions {
		if _, err := os.Stat(s.Recording); err != nil {
			t.Errorf("gc touched the current run's recording of %s: %v", s.ID, err)
		}
	}
}

func taskStates(ts []supervisor.Task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, fmt.Sprintf("%s:%s:%d:%q", t.ID, t.State, t.Attempts, t.Reason))
	}
	return out
}

func sessionStates(ss []supervisor.Session) []string {
	var out []string
	for _, s := range ss {
		out = append(out, fmt.Sprintf("%s:%s", s.ID, s.State))
	}
	return out
}

// checkAsciicast parses a cast as asciinema does: a v2 header, then [time, code,
// data] events with non-decreasing times.
func checkAsciicast(data []byte) error {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if _, _, _, err := sandbox.ParseCastHeader([]byte(lines[0])); err != nil {
		return err
	}
	last := 0.0
	for i, l := range lines[1:] {
		e, err := sandbox.ParseCastEvent([]byte(l))
		if err != nil {
			return fmt.Errorf("line %d: %w", i+2, err)
		}
		if e.Time < last {
			return fmt.Errorf("line %d: time %g goes back from %g", i+2, e.Time, last)
		}
		last = e.Time
	}
	return nil
}

// checkReportAgainstRecords recounts the report's figures from the records directly.
func checkReportAgainstRecords(t *testing.T, h *supervisor.History, rep supervisor.Report) {
	t.Helper()
	attempts := map[string]int{}
	for _, s := range h.Sessions {
		attempts[s.Task]++
	}
	rejected, classes := 0, map[string]int{}
	for _, p := range h.Publishes {
		if p.Outcome == supervisor.OutcomeRejected {
			rejected++
		}
		for _, c := range h.Conflicts[p.ID] {
			classes[c.Class]++
		}
	}
	if rep.Fleet.PublishesBy[supervisor.OutcomeRejected] != rejected || !reflect.DeepEqual(rep.Fleet.Conflicts, classes) {
		t.Errorf("report: rejected %d conflicts %v; records: %d %v", rep.Fleet.PublishesBy["rejected"], rep.Fleet.Conflicts, rejected, classes)
	}
	for _, tr := range rep.Tasks {
		if tr.Attempts != attempts[tr.Task] {
			t.Errorf("report: task %s has %d attempts, records %d", tr.Task, tr.Attempts, attempts[tr.Task])
		}
		sum := tr.Running + tr.Paused + tr.WaitingAdmission + tr.WaitingHuman
		if tr.Ended && sum != tr.Latency {
			t.Errorf("report: task %s latency %s ≠ running %s + paused %s + admission %s + human %s",
				tr.Task, tr.Latency, tr.Running, tr.Paused, tr.WaitingAdmission, tr.WaitingHuman)
		}
	}
}

// asciinemaCat plays a cast with Debian's asciinema (`asciinema cat` wants a
// terminal: script gives it one); ok is false when the tools are not installed.
func asciinemaCat(t *testing.T, path string) ([]byte, bool) {
	t.Helper()
	if _, err := exec.LookPath("asciinema"); err != nil {
		return nil, false
	}
	if _, err := exec.LookPath("script"); err != nil {
		return nil, false
	}
	cmd := exec.Command("script", "-qec", "asciinema cat "+path, "/dev/null")
	cmd.Stdin = nil
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("asciinema cat %s: %v", path, err)
	}
	return out, true
}

// recordStamped says whether a record's own time falls in [from, to]: the supervisor
// stamps a record (a session's end, a publish) a moment before it commits, so a
// sample taken then may see the state before it while the record says after.
func recordStamped(h *supervisor.History, from, to time.Time) bool {
	in := func(t time.Time) bool { return !t.IsZero() && !t.Before(from) && !t.After(to) }
	for _, s := range h.Sessions {
		if in(s.Started) || in(s.Ended) {
			return true
		}
	}
	for _, p := range h.Publishes {
		if in(p.Time) {
			return true
		}
	}
	for _, l := range h.Leases {
		if in(l.Start) || in(l.End) {
			return true
		}
	}
	for _, a := range h.Approvals {
		if in(a.Time) {
			return true
		}
	}
	return false
}

// TestReplayInTmux drives `corral replay` as a person would over a generated run:
// step, jump, go to a time, play, see the selected agent's terminal at the cursor,
// quit.
func TestReplayInTmux(t *testing.T) {
	requireTmux(t)
	dir := t.TempDir()
	if _, _, err := synthRun(dir, synthSpec{sessions: 3, events: 300, length: 10 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	bin := buildCorral(t)
	term := startTmux(t, "replay", 160, 45, fmt.Sprintf("TZ=UTC %s replay --repo %s", bin, dir))

	term.waitFor("the replay bar at the start", has("REPLAY ❚❚  1× 22:00:00.0  +0:00:00/0:10:00"))
	// Sessions start 100 ms apart: at the first event t00 runs, t02 waits.
	term.waitFor("t02 queued", func(s string) bool { return rowState(s, "t02") == "queued" && rowState(s, "t00") == "running" })
	term.keys(".", ".")
	term.waitFor("t02 running after its start event", func(s string) bool { return rowState(s, "t02") == "running" })
	term.waitFor("the step's event in the bar", has("session.started t02"))
	term.keys("g", "+5m", "Enter")
	term.waitFor("the cursor five minutes on", has("+0:05:00/0:10:00"))
	// The selected task's terminal as it was then: its screen was cleared at 300 s
	// and step 600 printed; step 601 comes half a second later.
	term.waitFor("t00's terminal at 5 min", func(s string) bool {
		return strings.Contains(s, "step 600") && !strings.Contains(s, "step 599") && !strings.Contains(s, "step 601")
	})
	term.keys("r")
	term.waitFor("the next rejection", has("publish.rejected"))
	term.keys("+", "+", "Space")
	term.waitFor("playing at 4×", has("▶  4×"))
	term.keys("End")
	term.waitFor("the end", has("+0:10:00/0:10:00"))
	term.waitFor("every task done", func(s string) bool { return rowState(s, "t00") == "done" && rowState(s, "t02") == "done" })
	term.keys("D", "y")
	term.waitFor("an action refused", has("never changes the fleet"))
	term.keys("q")
	if code, errOut := term.waitExit("corral replay after q", 10*time.Second); code != "0" {
		t.Fatalf("corral replay exited %s: %s", code, errOut)
	}
}
