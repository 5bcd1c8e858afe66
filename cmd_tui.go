package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"

	"corral/sandbox"
	"corral/supervisor"
	"corral/themes"
	"corral/tui"
)

// runTUI is `corral tui PLAN`: open the plan's fleet in the terminal UI.
func runTUI(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tui", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return badInput("tui: want one PLAN file")
	}
	fl, err := openFleet(fs.Arg(0), true, false)
	if err != nil {
		return err
	}
	defer fl.Close()
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	return runTUIFleet(ctx, fl)
}

// runTUIFleet runs the supervisor and the TUI together until the user quits; the
// supervisor then stops what still runs, keeping its layers (Run's contract).
func runTUIFleet(ctx context.Context, fl *fleet) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- fl.sv.Run(ctx) }()

	opts := tui.Options{Theme: pickTheme(), SkinDir: skinDir()}
	// A user editing a skin sees it at once; no skin directory, no reloads.
	if ch, err := themes.Watch(ctx, opts.SkinDir); err == nil {
		opts.SkinChanges = ch
	}
	model := tui.New(&tuiBackend{fl: fl}, opts)
	p := tea.NewProgram(model, tea.WithContext(ctx), tea.WithFPS(20))
	_, err := p.Run()
	model.Close()
	cancel()
	if rerr := <-runErr; rerr != nil && err == nil {
		err = rerr
	}
	if errors.Is(err, tea.ErrProgramKilled) || errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// pickTheme honours NO_COLOR, then CORRAL_THEME, then the dark skin.
func pickTheme() themes.Theme {
	if os.Getenv("NO_COLOR") != "" {
		return themes.Plain()
	}
	name := os.Getenv("CORRAL_THEME")
	th, err := themes.Load(name, skinDir())
	if err != nil {
		th, _ = themes.Load("dark", "")
	}
	return th
}

// skinDir is where a user's skins live: $XDG_CONFIG_HOME/corral/skins.
func skinDir() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "corral", "skins")
}

// tuiBackend adapts the supervisor and its store to what the TUI reads and does, so
// the tui package sees neither.
type tuiBackend struct {
	fl           *fleet
	eventsLoaded bool
	behindCache  map[[2]string]int // (base, head) → commits the head is ahead
	// usage holds each live session's last minute of samples, fetched incrementally:
	// re-reading a minute of samples for 100 sessions every second cost more than
	// everything else the TUI does.
	usage     map[string][]tui.UsagePoint
	usageSeen map[string]time.Time
	diffs     map[int64][]string // escalated publish → its held diff
	layers    map[string]layerSize
	// The ended session the session pane shows, its recording open.
	castMu    sync.Mutex
	castID    string
	castTried time.Time
	cast      *sandbox.Cast
}

// layerSize is a session's private layer's disk usage, re-measured every few seconds:
// walking 100 layers on every snapshot would cost more than the rest of it.
type layerSize struct {
	bytes int64
	at    time.Time
}

const layerSizeEvery = 5 * time.Second

// layerBytes returns the disk a live session's layer takes, measured at most every
// layerSizeEvery.
func (b *tuiBackend) layerBytes(s supervisor.Session, now time.Time) int64 {
	if b.layers == nil {
		b.layers = map[string]layerSize{}
	}
	ls, ok := b.layers[s.ID]
	if !ok || now.Sub(ls.at) >= layerSizeEvery {
		ls = layerSize{bytes: diskUsage(s.Layer), at: now}
		b.layers[s.ID] = ls
	}
	return ls.bytes
}

// heldDiff is an escalated publish's diff against its base (the work held at
// refs/corral/escalated/<session>), cut to what the inbox can show; it never changes,
// so it is read once per publish. Snapshot runs in a command, off the UI's Update.
func (b *tuiBackend) heldDiff(p supervisor.Publish) []string {
	if d, ok := b.diffs[p.ID]; ok {
		return d
	}
	out, err := b.fl.repo.Git("diff", "--no-color", "--stat", "--patch", p.Base, "refs/corral/escalated/"+p.Session)
	var lines []string
	if err == nil {
		lines = strings.Split(strings.TrimRight(out, "\n"), "\n")
		if len(lines) > 40 {
			lines = append(lines[:40], fmt.Sprintf("… %d more lines (corral publish show %d)", len(lines)-40, p.ID))
		}
	}
	if b.diffs == nil {
		b.diffs = map[int64][]string{}
	}
	b.diffs[p.ID] = lines
	return lines
}

// behind counts the commits on head since base; a snapshot asks once per pair.
func (b *tuiBackend) behind(base, head string) int {
	if base == "" || head == "" || base == head {
		return 0
	}
	k := [2]string{base, head}
	if n, ok := b.behindCache[k]; ok {
		return n
	}
	n := 0
	if out, err := b.fl.repo.Git("rev-list", "--count", base+".."+head); err == nil {
		fmt.Sscan(strings.TrimSpace(out), &n)
	}
	if b.behindCache == nil || len(b.behindCache) > 1000 {
		b.behindCache = map[[2]string]int{}
	}
	b.behindCache[k] = n
	return n
}

func (b *tuiBackend) Subscribe() (<-chan tui.Event, func()) {
	src, unsub := b.fl.sv.Subscribe(1024)
	out := make(chan tui.Event, 1024)
	done := make(chan struct{})
	go func() {
		defer close(out)
		for e := range src {
			select {
			case out <- tuiEvent(e):
			case <-done:
				return
			default: // the UI is behind: drop, the next snapshot catches up
			}
		}
	}()
	return out, func() {
		unsub()
		select {
		case <-done:
		default:
			close(done)
		}
	}
}

func tuiEvent(e supervisor.Event) tui.Event {
	return tui.Event{Seq: e.Seq, Time: e.Time.Local(), Kind: e.Kind, Task: e.Task, Session: e.Session, Data: eventFacts(e.Data)}
}

// eventFacts turns an event's JSON data into "key=value" pairs for the timeline, once
// per event rather than once per frame.
func eventFacts(data json.RawMessage) string {
	var m map[string]any
	if len(data) == 0 || json.Unmarshal(data, &m) != nil {
		return string(data)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := m[k]
		if v == nil {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		switch v := v.(type) {
		case string:
			fmt.Fprintf(&b, "%s=%s", k, v)
		default:
			j, _ := json.Marshal(v)
			fmt.Fprintf(&b, "%s=%s", k, j)
		}
	}
	return b.String()
}

// Output is a live session's (or lane test's) output ring, or an ended one's recording
// read to its end.
func (b *tuiBackend) Output(session string) (tui.Output, bool) {
	if ring, ok := b.fl.sv.SessionOutput(session); ok {
		return ring, true
	}
	b.castMu.Lock()
	defer b.castMu.Unlock()
	// The pane asks every frame: a recording not there yet is looked for again, but at
	// most once a second, not with a store read and a file open per frame.
	if b.castID != session || (b.cast == nil && time.Since(b.castTried) >= time.Second) {
		b.castTried = time.Now()
		if b.cast != nil {
			b.cast.Close() // one ended session is shown at a time
		}
		b.castID, b.cast = session, nil
		var rec supervisor.Session
		path := supervisor.LaneRecording(b.fl.repo, session) // a lane test's, if it is one
		if b.fl.db.View(func(r supervisor.Reader) error {
			var err error
			rec, err = r.Session(session)
			return err
		}) == nil && rec.Recording != "" {
			path = rec.Recording
		}
		b.cast, _ = sandbox.OpenCast(path)
	}
	if b.cast == nil {
		return nil, false
	}
	return castEnded(b.cast), true
}

// lastEnded maps each task to its most recent session that had ended by now.
func lastEnded(sessions []supervisor.Session, now time.Time) map[string]string {
	last := map[string]supervisor.Session{}
	for _, s := range sessions {
		if s.Ended.IsZero() || s.Ended.After(now) {
			continue
		}
		if prev, ok := last[s.Task]; !ok || s.Started.After(prev.Started) {
			last[s.Task] = s
		}
	}
	ended := make(map[string]string, len(last))
	for task, s := range last {
		ended[task] = s.ID
	}
	return ended
}

func (b *tuiBackend) Input(session string) (io.Writer, bool) { return b.fl.sv.SessionInput(session) }

func (b *tuiBackend) Act(a tui.Action) (string, error) {
	sv := b.fl.sv
	var err error
	note := ""
	switch a.Verb {
	case tui.VerbPause:
		err = sv.Pause(a.Task)
	case tui.VerbResume:
		err = sv.Resume(a.Task)
	case tui.VerbDiscard:
		err = sv.Discard(a.Task)
	case tui.VerbKill:
		err = sv.Kill(a.Task)
	case tui.VerbRetry:
		err = sv.Retry(a.Task)
	case tui.VerbPublish:
		err = sv.PublishNow(a.Task)
	case tui.VerbRebase:
		var res supervisor.RebaseResult
		if res, err = sv.Rebase(a.Task); err == nil {
			note = rebaseNote(res)
		}
	case tui.VerbFallback:
		if err = sv.UseFallback(); err == nil {
			note = "model calls go to the fallback upstream; quota-paused sessions resumed"
		}
	case tui.VerbApprove:
		err = sv.Approve(a.Publish)
	case tui.VerbDeny:
		err = sv.Deny(a.Publish, a.Reason)
	case tui.VerbAdd:
		err = sv.AddTasks(supervisor.Task{ID: a.Task, Prompt: a.Reason, Agent: b.fl.defaultAgent, Retries: 1})
	case tui.VerbAnswer:
		err = sv.AnswerInbox(a.Item, a.Reason)
	default:
		return "", fmt.Errorf("unknown action %q", a.Verb)
	}
	if errors.Is(err, supervisor.ErrNotApplicable) {
		return "", fmt.Errorf("%w: %s", tui.ErrNotApplicable, strings.TrimPrefix(err.Error(), supervisor.ErrNotApplicable.Error()+": "))
	}
	return note, err
}

// rebaseNote says in one line what a rebase did: where to, and what needs the agent.
func rebaseNote(res supervisor.RebaseResult) string {
	note := fmt.Sprintf("now on %.9s; %d moved, %d merged", res.Head, len(res.Moved), len(res.Merged))
	if len(res.Conflicts) == 0 {
		return note + ", no conflicts"
	}
	paths := make([]string, len(res.Conflicts))
	for i, c := range res.Conflicts {
		paths[i] = c.Path + " (" + c.Class + ")"
	}
	return note + "; conflicts: " + strings.Join(paths, ", ")
}

// laneVerdicts is the lane's newest telling verdict per commit (a run that judged it
// beats one that skipped it) and the publishes it blamed.
func laneVerdicts(runs []supervisor.LaneRun) (map[string]string, map[int64]bool) {
	verdicts, blamed := map[string]string{}, map[int64]bool{}
	for _, r := range runs {
		if r.Outcome != supervisor.LaneSkipped || verdicts[r.Commit] == "" {
			verdicts[r.Commit] = r.Outcome
		}
		if r.Culprit != 0 {
			blamed[r.Culprit] = true
		}
	}
	return verdicts, blamed
}

// laneTestOf maps each publish to the lane's latest run over it that has a test
// sandbox: its recorded one once ended, the one running it now before that.
func laneTestOf(runs []supervisor.LaneRun, live map[int64]string) map[int64]supervisor.LaneRun {
	out := map[int64]supervisor.LaneRun{}
	for _, r := range runs { // oldest first
		if r.Ended.IsZero() {
			r.Session = live[r.ID]
		}
		if r.Session == "" {
			continue // skipped, or not started yet
		}
		out[r.Publish] = r
		for _, p := range r.Batch {
			out[p] = r
		}
	}
	return out
}

// Snapshot gathers the fleet from the supervisor and the store's records.
func (b *tuiBackend) Snapshot() (tui.Snapshot, error) {
	st := b.fl.sv.State()
	snap := tui.Snapshot{
		Fleet: st.Fleet.Name, HeadRef: st.Fleet.HeadRef, Head: st.Fleet.Head,
		CPUBudget: st.Fleet.Admission.CPU, MemBudget: st.Fleet.Admission.Memory,
		ReservedCPU: st.ReservedCPU, ReservedMem: st.ReservedMemory,
		Usage: map[string][]tui.UsagePoint{}, Taken: time.Now(),
		Lane: tui.LaneStatus{Outcome: st.Lane.Outcome, Culprit: st.Lane.Culprit, Task: st.Lane.Task,
			Narrowed: st.Lane.Narrowed, Queue: st.Lane.Queue},
		ModelCalls: st.Spend.Calls, ModelTokens: st.Spend.Tokens(), ModelCost: st.Spend.Cost,
		FallbackReady: st.FallbackReady,
	}
	if q := st.Quota; q != nil {
		snap.Quota = &tui.Quota{Fraction: q.Fraction, Soft: q.Soft, Hard: q.Hard, Level: q.Level,
			Window: q.Window, Reset: q.Reset, Fallback: q.Fallback}
	}
	var leases []supervisor.Lease
	var pubs []supervisor.Publish
	var approvals []supervisor.Approval
	var laneRuns []supervisor.LaneRun
	var ended map[string]string
	conflicts := map[int64][]supervisor.Conflict{}
	since := time.Now().Add(-time.Minute)
	err := b.fl.db.View(func(r supervisor.Reader) error {
		var err error
		if leases, err = r.Leases(true); err != nil {
			return err
		}
		if pubs, err = r.Publishes(); err != nil {
			return err
		}
		sessions, err := r.Sessions()
		if err != nil {
			return err
		}
		ended = lastEnded(sessions, snap.Taken)
		if approvals, err = r.Approvals(); err != nil {
			return err
		}
		if laneRuns, err = r.LaneRuns(); err != nil {
			return err
		}
		for _, p := range pubs {
			if p.Outcome == supervisor.OutcomeRejected {
				conflicts[p.ID], _ = r.Conflicts(p.ID)
			}
		}
		if b.usage == nil {
			b.usage, b.usageSeen = map[string][]tui.UsagePoint{}, map[string]time.Time{}
		}
		live := map[string]bool{}
		for _, s := range st.Sessions {
			live[s.ID] = true
			pts := b.usage[s.ID]
			var us []supervisor.Usage
			if seen, ok := b.usageSeen[s.ID]; !ok {
				us, _ = r.Usage(s.ID, since) // a session's history, once
			} else if u, ok := st.Usage[s.ID]; ok && u.Time.After(seen) {
				us = []supervisor.Usage{u} // then its newest sample, which State already read
			}
			for _, u := range us {
				pts = append(pts, tui.UsagePoint{CPUPercent: u.CPUPercent, Memory: u.Memory})
				b.usageSeen[s.ID] = u.Time
			}
			if _, ok := b.usageSeen[s.ID]; !ok {
				b.usageSeen[s.ID] = time.Time{}
			}
			if len(pts) > 60 {
				pts = pts[len(pts)-60:]
			}
			b.usage[s.ID] = pts
			snap.Usage[s.ID] = pts
		}
		for id := range b.usage {
			if !live[id] {
				delete(b.usage, id)
				delete(b.usageSeen, id)
				delete(b.layers, id)
			}
		}
		if !b.eventsLoaded {
			// The timeline starts with the recent past; live events follow.
			evs, err := r.Events(0, 1<<20)
			if err != nil {
				return err
			}
			if len(evs) > 300 {
				evs = evs[len(evs)-300:]
			}
			for _, e := range evs {
				snap.Events = append(snap.Events, tuiEvent(e))
			}
			b.eventsLoaded = true
		}
		return nil
	})
	if err != nil {
		return snap, err
	}
	fillSnapshot(&snap, snapshotInput{state: st, leases: leases, publishes: pubs, approvals: approvals,
		conflicts: conflicts, laneRuns: laneRuns, ended: ended, behind: b.behind, heldDiff: b.heldDiff,
		layerBytes: func(s supervisor.Session) int64 { return b.layerBytes(s, snap.Taken) }})
	snap.Inbox = withAgentInbox(snap.Inbox, b.fl.sv.Inbox())
	return snap, nil
}

// snapshotInput is what a picture of the fleet is made from: the supervisor's state
// and the store's records, live (tuiBackend) or as they were at a moment of a recorded
// run (replay), so both show the same panes for the same fleet.
type snapshotInput struct {
	state     supervisor.FleetState
	leases    []supervisor.Lease // held
	publishes []supervisor.Publish
	approvals []supervisor.Approval
	conflicts map[int64][]supervisor.Conflict
	laneRuns  []supervisor.LaneRun // the integration lane's runs, for each publish's verdict
	ended     map[string]string    // task → its most recent ended session
	behind    func(base, head string) int
	heldDiff  func(supervisor.Publish) []string
	// layerBytes measures a live session's private layer; nil where layers are gone
	// (replay).
	layerBytes func(supervisor.Session) int64
}

// fillSnapshot fills the task rows, leases, publishes and inbox of snap.
func fillSnapshot(snap *tui.Snapshot, in snapshotInput) {
	st, leases, pubs, approvals, conflicts := in.state, in.leases, in.publishes, in.approvals, in.conflicts
	decided := map[int64]string{}
	for _, a := range approvals {
		decided[a.Publish] = a.Decision
	}
	live := map[string]supervisor.Session{}
	for _, s := range st.Sessions {
		live[s.Task] = s
	}
	verdicts, blamed := laneVerdicts(in.laneRuns)
	laneTests := laneTestOf(in.laneRuns, in.state.LaneLive)
	lastPub := map[string]supervisor.Publish{}
	for _, p := range pubs {
		lastPub[p.Task] = p
		tp := tui.Publish{ID: p.ID, Task: p.Task, Session: p.Session, Outcome: p.Outcome, Head: p.Head,
			NewHead: p.NewHead, Message: p.Message, Paths: p.Paths, Time: p.Time, Decided: decided[p.ID],
			Lane: verdicts[p.NewHead], Culprit: blamed[p.ID]}
		if r, ok := laneTests[p.ID]; ok {
			tp.LaneSession, tp.LaneCommit = r.Session, r.Commit
		}
		for _, c := range conflicts[p.ID] {
			tp.Conflicts = append(tp.Conflicts, tui.Conflict{Path: c.Path, Class: c.Class, MovedBy: c.MovedBy})
		}
		snap.Publishes = append(snap.Publishes, tp)
	}
	for _, l := range leases {
		snap.Leases = append(snap.Leases, tui.Lease{Port: l.Port, Endpoint: l.Endpoint, Task: l.Task, Session: l.Session, Since: l.Start})
	}
	for _, t := range st.Tasks {
		row := tui.TaskRow{ID: t.ID, State: string(t.State), Reason: t.Reason, Lifetime: string(t.Lifetime),
			Attempt: t.Attempts, CPULimit: t.CPU, MemLimit: t.Memory, Since: t.Updated,
			ModelTokens: st.TaskSpend[t.ID].Tokens(), ModelCost: st.TaskSpend[t.ID].Cost, BudgetTokens: t.BudgetTokens, BudgetCost: t.BudgetCost}
		if s, ok := live[t.ID]; ok {
			row.Session, row.Base = s.ID, s.Base
			row.Behind = in.behind(s.Base, st.Fleet.Head)
			if in.layerBytes != nil {
				row.LayerBytes = in.layerBytes(s)
			}
			u := st.Usage[s.ID]
			row.CPUPercent, row.Memory, row.OOMKills, row.Throttled = u.CPUPercent, u.Memory, u.OOMKills, u.Throttled
			for _, l := range leases {
				if l.Session == s.ID {
					row.Ports = append(row.Ports, fmt.Sprintf("%d→%s", l.Port, l.Endpoint))
				}
			}
		}
		if row.Session == "" {
			row.LastSession = in.ended[t.ID]
		}
		if p, ok := lastPub[t.ID]; ok {
			row.LastPublish = p.Outcome
			if row.Base == "" {
				row.Base = p.Base // what its last work was made on; a queued task has none yet
			}
		}
		snap.Tasks = append(snap.Tasks, row)
		switch t.State {
		case supervisor.TaskInbox:
			item := tui.InboxItem{Task: t.ID, What: t.Reason}
			if p, ok := lastPub[t.ID]; ok && p.Outcome == supervisor.OutcomeEscalated && decided[p.ID] == "" {
				item.Publish, item.Paths = p.ID, p.Paths
				item.What = "escalated publish waits for approval (a approves, d denies): " + p.Message
				item.Diff = in.heldDiff(p)
			}
			snap.Inbox = append(snap.Inbox, item)
		case supervisor.TaskFailed:
			if t.Attempts > t.Retries {
				snap.Inbox = append(snap.Inbox, tui.InboxItem{Task: t.ID,
					What: fmt.Sprintf("out of retries after %d attempt(s): %s (r retries)", t.Attempts, t.Reason)})
			}
		case supervisor.TaskInterrupted:
			snap.Inbox = append(snap.Inbox, tui.InboxItem{Task: t.ID, What: "interrupted: p resumes it over its kept layer"})
		}
	}
}
