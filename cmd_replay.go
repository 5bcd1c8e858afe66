package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	tea "charm.land/bubbletea/v2"

	"corral/sandbox"
	"corral/store"
	"corral/supervisor"
	"corral/tui"
)

// runReplay is `corral replay [RUN]`: the TUI over a recorded run, with time controls;
// `--session ID` plays one agent's terminal instead.
func runReplay(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("replay", stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	session := fs.String("session", "", "play this session's terminal only")
	speed := fs.Float64("speed", 1, "playback speed of --session (1 to 64)")
	at := fs.String("at", "", "start at this time: 15:04:05, an offset from the start (90s) or +/-DURATION")
	if err := parseFlags(fs, reorderValueFlags(args, "repo", "session", "speed", "at")); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return badInput("replay: want at most one RUN (corral report --runs lists them)")
	}
	defer replayGC()()
	repo, ref, db, h, err := loadRun(*repoDir, fs.Arg(0))
	if err != nil {
		return err
	}
	defer db.Close()
	if *session != "" {
		if *speed < 1 || *speed > 64 {
			return badInput("--speed %g: want 1 to 64", *speed)
		}
		ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		defer cancel()
		return playSession(ctx, stdout, h, *session, *speed, *at)
	}
	b := newReplayBackend(repo, db, h)
	b.follow = ref.Current // a fleet still running grows; the replay follows it
	defer b.Close()
	if *at != "" {
		start, end := b.Bounds()
		t, err := tui.ParseReplayTime(*at, start, end, start)
		if err != nil {
			return badInput("--at: %v", err)
		}
		b.Seek(t)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	go b.indexAll(ctx)
	model := tui.New(b, tui.Options{Theme: pickTheme(), SkinDir: skinDir()})
	p := tea.NewProgram(model, tea.WithContext(ctx), tea.WithFPS(20))
	_, err = p.Run()
	model.Close()
	if errors.Is(err, tea.ErrProgramKilled) || errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// replayGC sets the collector for replay: the heap is mostly the run's history,
// read once and never freed, so collecting at the default +100% spends cycles
// re-marking it and shows as pauses in seeks; +400% keeps seeks smooth for a few
// hundred MB more (measured by corral bench replay: p99 of a seek 232 → 83 ms under
// load). An explicit GOGC wins.
// It returns what restores the previous setting.
func replayGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(400)
	return func() { debug.SetGCPercent(old) }
}

// replayBackend is tui.Replayer over a run's history: read-only, it shows the fleet as
// it was at its cursor, and each session's recorded terminal up to it.
type replayBackend struct {
	repo sandbox.Repo
	db   *store.ReadOnly
	h    *supervisor.History

	follow   bool      // reload the history now and then: the run may still be going
	loadedAt time.Time // when the history was read

	mu          sync.Mutex
	cursor      time.Time
	casts       map[string]*sandbox.Cast // opened (and indexed) when first shown
	tuiEvents   []tui.Event              // the timeline's rows, made once per event
	behindCache map[[2]string]int
}

func newReplayBackend(repo sandbox.Repo, db *store.ReadOnly, h *supervisor.History) *replayBackend {
	return &replayBackend{repo: repo, db: db, h: h, cursor: h.Start(), casts: map[string]*sandbox.Cast{},
		behindCache: map[[2]string]int{}, loadedAt: time.Now()}
}

var _ tui.Replayer = (*replayBackend)(nil)

func (b *replayBackend) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.casts {
		if c != nil {
			c.Close()
		}
	}
}

func (b *replayBackend) Bounds() (time.Time, time.Time) {
	h := b.history()
	return h.Start(), h.End()
}

func (b *replayBackend) history() *supervisor.History {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.h
}

// refresh rereads a run that may still be going, at most every two seconds; a
// cursor at the end stays at the (new) end, as `tail -f` does. Recordings of live
// sessions are indexed again for what they gained.
func (b *replayBackend) refresh() {
	b.mu.Lock()
	due := b.follow && time.Since(b.loadedAt) >= 2*time.Second
	b.mu.Unlock()
	if !due {
		return
	}
	var h *supervisor.History
	err := b.db.View(func(r supervisor.Reader) error {
		var err error
		h, err = supervisor.LoadHistory(r)
		return err
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	b.loadedAt = time.Now()
	if err != nil || len(h.Events) == len(b.h.Events) {
		return
	}
	atEnd := !b.cursor.Before(b.h.End())
	live := b.h.At(b.h.End()).State.Sessions
	b.h = h
	if atEnd {
		b.cursor = h.End()
	}
	for _, s := range live {
		if c := b.casts[s.ID]; c != nil {
			c.Close()
		}
		delete(b.casts, s.ID)
	}
}

func (b *replayBackend) Cursor() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cursor
}

func (b *replayBackend) Seek(t time.Time) {
	b.refresh()
	start, end := b.Bounds()
	if t.Before(start) {
		t = start
	}
	if t.After(end) {
		t = end
	}
	b.mu.Lock()
	b.cursor = t
	b.mu.Unlock()
}

// FindEvent looks from the cursor: the events at the cursor's time count as passed.
func (b *replayBackend) FindEvent(dir int, kinds ...string) (tui.Event, bool) {
	h := b.history()
	// events[:n] have happened: the next is found from n on, the previous before
	// n-1, so that stepping back from an event lands on the one before it.
	n := h.EventsUntil(b.Cursor())
	i := h.FindEvent(n-1, dir, kinds...)
	if i < 0 {
		return tui.Event{}, false
	}
	return tuiEvent(h.Events[i]), true
}

func (b *replayBackend) Subscribe() (<-chan tui.Event, func()) {
	// Nothing happens live in a replay: the timeline comes with each snapshot.
	ch := make(chan tui.Event)
	var once sync.Once
	return ch, func() { once.Do(func() { close(ch) }) }
}

func (b *replayBackend) Input(string) (io.Writer, bool) { return nil, false }

func (b *replayBackend) Act(a tui.Action) (string, error) {
	return "", fmt.Errorf("%w: this is a replay, it never changes the fleet", tui.ErrNotApplicable)
}

// Snapshot is the fleet at the cursor, built as the live TUI builds its own.
func (b *replayBackend) Snapshot() (tui.Snapshot, error) {
	b.refresh()
	return b.snapshotAt(b.Cursor())
}

func (b *replayBackend) snapshotAt(t time.Time) (tui.Snapshot, error) {
	h := b.history()
	m := h.At(t)
	st := m.State
	snap := tui.Snapshot{
		Fleet: st.Fleet.Name, HeadRef: st.Fleet.HeadRef, Head: st.Fleet.Head,
		CPUBudget: st.Fleet.Admission.CPU, MemBudget: st.Fleet.Admission.Memory,
		ReservedCPU: st.ReservedCPU, ReservedMem: st.ReservedMemory,
		Usage: map[string][]tui.UsagePoint{}, Taken: t,
	}
	for _, s := range st.Sessions {
		us, err := b.db.UsageBefore(s.ID, t, usagePoints)
		if err != nil {
			return snap, err
		}
		// Samples older than a minute are not what the pane showed at t.
		var pts []tui.UsagePoint
		for _, u := range us {
			if t.Sub(u.Time) <= time.Minute {
				pts = append(pts, tui.UsagePoint{CPUPercent: u.CPUPercent, Memory: u.Memory})
			}
		}
		if len(pts) > 0 {
			snap.Usage[s.ID] = pts
			st.Usage[s.ID] = us[len(us)-1]
		}
	}
	evs := h.Events[:m.Events]
	if len(evs) > 300 {
		evs = evs[len(evs)-300:]
	}
	first := m.Events - len(evs)
	b.mu.Lock()
	if len(b.tuiEvents) != len(h.Events) {
		b.tuiEvents = make([]tui.Event, len(h.Events)) // a reload: start over
	}
	for i, e := range evs {
		te := &b.tuiEvents[first+i]
		if te.Seq == 0 {
			*te = tuiEvent(e)
		}
		snap.Events = append(snap.Events, *te)
	}
	b.mu.Unlock()
	fillSnapshot(&snap, snapshotInput{state: st, leases: m.Leases, publishes: m.Publishes, approvals: m.Approvals,
		conflicts: m.Conflicts, ended: lastEnded(h.Sessions, t), behind: b.behind, heldDiff: b.heldDiff})
	return snap, nil
}

// behind counts the commits on head since base (git reads only).
func (b *replayBackend) behind(base, head string) int {
	if base == "" || head == "" || base == head {
		return 0
	}
	if n, ok := b.history().Behind(base, head); ok {
		return n
	}
	k := [2]string{base, head}
	b.mu.Lock()
	n, ok := b.behindCache[k]
	b.mu.Unlock()
	if ok {
		return n
	}
	if out, err := b.repo.Git("rev-list", "--count", base+".."+head); err == nil {
		fmt.Sscan(strings.TrimSpace(out), &n)
	}
	b.mu.Lock()
	b.behindCache[k] = n
	b.mu.Unlock()
	return n
}

// heldDiff is an escalated publish's diff while its held work still exists.
func (b *replayBackend) heldDiff(p supervisor.Publish) []string {
	out, err := b.repo.Git("diff", "--no-color", "--stat", p.Base, "refs/corral/escalated/"+p.Session)
	if err != nil {
		return []string{"(the held work is gone: the publish was decided)"}
	}
	return strings.Split(strings.TrimRight(out, "\n"), "\n")
}

// cast opens a session's recording once. Indexing reads the whole file (~0.1 s for
// three hours), so it runs outside the lock.
func (b *replayBackend) cast(session string) (*sandbox.Cast, bool) {
	b.mu.Lock()
	c, ok := b.casts[session]
	rec, known := b.h.Session(session)
	b.mu.Unlock()
	if ok {
		return c, c != nil
	}
	if known && rec.Recording != "" {
		c, _ = sandbox.OpenCast(rec.Recording)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if prev, ok := b.casts[session]; ok { // indexed meanwhile
		if c != nil {
			c.Close()
		}
		return prev, prev != nil
	}
	b.casts[session] = c
	return c, c != nil
}

// indexAll indexes every recording in the background, newest sessions first, so a
// session shown for the first time plays at once.
func (b *replayBackend) indexAll(ctx context.Context) {
	ss := b.history().Sessions
	for i := len(ss) - 1; i >= 0 && ctx.Err() == nil; i-- {
		b.cast(ss[i].ID)
	}
}

func (b *replayBackend) Output(session string) (tui.Output, bool) {
	c, ok := b.cast(session)
	if !ok {
		return nil, false
	}
	zero, _ := b.history().SessionStarted(session)
	return castAt(b, c, zero), true
}
