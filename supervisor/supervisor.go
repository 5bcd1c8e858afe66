package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"corral/sandbox"
	"corral/supervisor/gateway"
)

// Config wires a supervisor to its repository, store and policies.
type Config struct {
	Repo      sandbox.Repo
	Store     Store
	Fleet     Fleet     // the plan's fleet; an existing fleet in the store keeps its head
	Publisher Publisher // nil: the git publisher on the fleet's head branch
	Log       *slog.Logger
	Now       func() time.Time

	SampleEvery time.Duration // telemetry period (default 1s)
	PoolSize    int           // spare inits kept booted (default 2; <0 none)
	// Gateway is the plan's [gateway]: sessions reach their model APIs (and allowed
	// hosts) through it, metered. nil: sessions have no way out of a private netns.
	Gateway *GatewayPlan
	// GatewayTransport carries the gateway's requests upstream (tests); nil: direct.
	GatewayTransport http.RoundTripper
	// ResumeInterrupted resumes, at start, tasks whose sessions a dead supervisor left
	// (headless runs do; the TUI leaves them to the user).
	ResumeInterrupted bool

	// The workspace protocol (ctl*.go). CtlBinary is the corral binary shown read-only
	// inside every sandbox for `corral ctl` and `corral mcp` ("" shows none; the socket
	// is there regardless). CtlDir holds the per-session sockets (default /run/corral
	// as root). Handoffs says what a proposed follow-up task does: HandoffInbox (the
	// default) waits for a human, HandoffAdmit queues it at once.
	CtlBinary string
	CtlDir    string
	Handoffs  string
	// NeedsInputAfter is how long a session's terminal must stay quiet, its last line
	// looking like a prompt, before it becomes an inbox item (default 10s; <0 never).
	NeedsInputAfter time.Duration
}

// Supervisor runs a fleet: it admits tasks into sandboxed sessions, follows their
// lifecycles, samples their usage and records every state change with its event.
// One goroutine (the loop) owns the in-memory state; everything else talks to it.
type Supervisor struct {
	cfg   Config
	store Store
	repo  sandbox.Repo
	snaps *sandbox.Snapshots
	pool  *sandbox.InitPool
	pub   Publisher
	hub   *hub
	log   *slog.Logger
	now   func() time.Time

	// Owned by the loop goroutine.
	fleet      Fleet
	tasks      map[string]*Task
	order      []string // task ids in creation order
	sessions   map[string]*liveSession
	lastLaunch time.Time
	admitDue   time.Duration // when a staged launch is next due, 0 if none waits
	baseFiles  []string      // file list of the fleet's base, for intent overlap checks
	verdicts   map[string]string
	inboxItems []*InboxItem // open and decided inbox items of this run (inbox.go)
	inboxSeq   int64
	asks       map[int64]chan string // answers awaited by `ctl ask` calls, by item
	behindMu   sync.Mutex
	behindMemo map[[2]string]int // commits head is ahead of a base, by (base, head)

	// The model gateway, what it metered, and the quota (gateway.go, quota.go).
	gw           *gateway.Gateway
	gwInbox      gatewayInbox
	sessionTask  map[string]string // session id → task id, for every session started here
	spendFleet   Spend
	spendTask    map[string]Spend
	spendSession map[string]Spend
	quota        *quotaState
	lane         laneState // the integration lane (lane.go)
	laneLive     laneLive  // its running test sandboxes, read off the loop too

	inbox   chan func()
	wake    chan struct{}
	started atomic.Bool
	stateMu sync.Mutex // held by the loop for each step, and by direct calls
	loopWG  sync.WaitGroup
	bgWG    sync.WaitGroup // session watchers and publishes
	ctx     context.Context
	closed  chan struct{}
}

// liveSession is a session with a sandbox in this process.
type liveSession struct {
	rec     Session
	sb      *sandbox.Session
	lastCPU time.Duration
	lastAt  time.Time
	oom     uint64
	leases  []int64
	// budgetWaived: the user resumed the session past its task's budget.
	budgetWaived bool

	ctl     *ctlServer                // the session's end of the workspace protocol
	exposed map[int]bool              // ports exposed by `ctl lease` after the start
	relays  map[string]*sandbox.Relay // other sessions' services reachable inside, by lease name
	quiet   chan struct{}             // closed to stop the needs-input watcher
	gated   bool                      // pre gating: its sandbox is down, its candidate waits for the lane
}

// New opens the fleet: it creates its head branch and records if they do not exist,
// recovers what a dead supervisor left (sessions become interrupted, their layers
// kept; stale mounts and cgroups are cleaned), and loads the tasks.
func New(cfg Config) (*Supervisor, error) {
	if cfg.Store == nil {
		return nil, errors.New("supervisor: no store")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = time.Second
	}
	if cfg.PoolSize == 0 {
		cfg.PoolSize = 2
	}
	snaps, err := sandbox.OpenSnapshots(cfg.Repo)
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	s := &Supervisor{
		cfg: cfg, store: cfg.Store, repo: cfg.Repo, snaps: snaps, hub: newHub(), log: cfg.Log, now: cfg.Now,
		tasks: map[string]*Task{}, sessions: map[string]*liveSession{}, verdicts: map[string]string{},
		sessionTask: map[string]string{}, spendTask: map[string]Spend{}, spendSession: map[string]Spend{},
		asks: map[int64]chan string{}, behindMemo: map[[2]string]int{},
		inbox: make(chan func()), wake: make(chan struct{}, 1), closed: make(chan struct{}),
	}
	if err := s.openFleet(); err != nil {
		return nil, err
	}
	s.pub = cfg.Publisher
	if s.pub == nil {
		s.pub = &GitPublisher{Repo: cfg.Repo, HeadRef: s.fleet.HeadRef}
	}
	if err := s.recover(); err != nil {
		return nil, err
	}
	if err := s.openGateway(); err != nil {
		return nil, err
	}
	if err := s.laneInit(); err != nil {
		return nil, err
	}
	return s, nil
}

// openFleet loads the fleet record, or creates it and its head branch from the plan.
func (s *Supervisor) openFleet() error {
	var existing Fleet
	err := s.store.View(func(r Reader) error {
		var err error
		existing, err = r.Fleet()
		return err
	})
	switch {
	case err == nil:
		s.fleet = existing
		// Limits may be changed by editing the plan between runs.
		if s.cfg.Fleet.Admission != (Admission{}) {
			s.fleet.Admission = s.cfg.Fleet.Admission
		}
		// So may the lane's test and policy.
		if s.cfg.Fleet.Test != "" {
			s.fleet.Test, s.fleet.Lane = s.cfg.Fleet.Test, s.cfg.Fleet.Lane
		}
	case errors.Is(err, ErrNotFound):
		f := s.cfg.Fleet
		if f.HeadRef == "" {
			f.HeadRef = "corral/head"
		}
		if f.BaseRef == "" {
			f.BaseRef = "HEAD"
		}
		if f.Base == "" {
			if f.Base, err = s.repo.ResolveRev(f.BaseRef); err != nil {
				return fmt.Errorf("supervisor: fleet base: %w", err)
			}
		}
		f.Repo, f.Created = s.repo.WorkTree, s.now()
		s.fleet = f
	default:
		return fmt.Errorf("supervisor: read fleet: %w", err)
	}
	head, err := ensureHead(s.repo, s.fleet.HeadRef, s.fleet.Base)
	if err != nil {
		return err
	}
	recorded := existing.Head
	s.fleet.Head = head
	if out, err := s.repo.Git("ls-tree", "-r", "--name-only", "-z", s.fleet.Base); err == nil {
		s.baseFiles = strings.Split(strings.TrimRight(out, "\x00"), "\x00")
	}
	commits, herr := s.landedSince(recorded, head)
	if herr != nil {
		// The head is the truth; say its history could not be matched and go on.
		s.log.Warn("recover publishes", "err", herr)
	}
	var landed []string
	isNew := errors.Is(err, ErrNotFound) || existing.Name == ""
	_, err = s.commit(func(tx Tx) error {
		if isNew {
			tx.Emit(Event{Kind: EvFleetStarted, Data: jsonData(map[string]any{"fleet": s.fleet.Name, "base": s.fleet.Base, "head": s.fleet.HeadRef})})
		}
		if herr != nil {
			tx.Emit(Event{Kind: EvSupervisorRecover, Data: jsonData(map[string]string{"head_history": herr.Error()})})
		}
		var err error
		if landed, err = s.adoptLanded(tx, commits); err != nil {
			return err
		}
		return tx.PutFleet(s.fleet)
	})
	for _, id := range landed {
		// Their work is on the head; the layers served their purpose.
		sandbox.DiscardSession(s.repo, id)
	}
	return err
}

// ensureHead creates the fleet's head branch at base unless it exists, and returns
// the commit it points to. The user's own branches are never touched.
func ensureHead(repo sandbox.Repo, headRef, base string) (string, error) {
	ref := "refs/heads/" + headRef
	if out, err := repo.Git("rev-parse", "--verify", "--quiet", ref); err == nil {
		return strings.TrimSpace(out), nil
	}
	// The empty old value makes update-ref fail if another process created it meanwhile.
	if _, err := repo.Git("update-ref", ref, base, ""); err != nil {
		return "", fmt.Errorf("supervisor: create head %s: %w", headRef, err)
	}
	return base, nil
}

// Fleet returns the fleet record as the loop last saw it.
func (s *Supervisor) Fleet() Fleet {
	var f Fleet
	s.call(func() { f = s.fleet })
	return f
}

// Subscribe returns live events; a subscriber that falls behind loses events (it sees
// a gap in Seq) rather than slowing the supervisor. The store has them all.
func (s *Supervisor) Subscribe(buffer int) (<-chan Event, func()) { return s.hub.subscribe(buffer) }

// commit runs a store update and offers its events to subscribers.
func (s *Supervisor) commit(fn func(Tx) error) ([]Event, error) {
	evs, err := s.store.Update(fn)
	if err != nil {
		return nil, err
	}
	s.hub.publish(evs)
	return evs, nil
}

// Run drives the fleet until ctx is done: admission, session exits, actions,
// telemetry. Sessions still running when it returns are stopped and recorded as
// interrupted, their layers kept, so a later Run resumes them.
func (s *Supervisor) Run(ctx context.Context) error {
	s.ctx = ctx
	s.started.Store(true)
	if s.cfg.PoolSize > 0 {
		s.pool = sandbox.NewInitPool(s.repo, s.cfg.PoolSize)
	}
	s.loopWG.Add(1)
	defer func() {
		s.loopWG.Done()
		s.shutdown()
	}()
	if s.cfg.ResumeInterrupted {
		s.locked(func() {
			for _, id := range s.order {
				if s.tasks[id].State == TaskInterrupted {
					if err := s.resumeTask(id); err != nil {
						s.log.Error("resume", "task", id, "err", err)
					}
				}
			}
		})
	}
	probeCtx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	go s.runProbe(probeCtx)
	s.locked(s.laneKick) // heads a previous run landed but did not judge
	sample := time.NewTicker(s.cfg.SampleEvery)
	defer sample.Stop()
	// Admission runs after every message; besides, it wakes when a staged launch is due
	// and once a second (decisions recorded by another process, clock-based reasons).
	admitTimer := time.NewTimer(time.Second)
	defer admitTimer.Stop()
	for {
		s.locked(s.drainGateway)
		s.locked(s.admitNext)
		due := time.Second
		if s.admitDue > 0 && s.admitDue < due {
			due = s.admitDue
		}
		admitTimer.Reset(due)
		select {
		case <-ctx.Done():
			return nil
		case fn := <-s.inbox:
			s.locked(fn)
		case <-s.wake:
		case <-admitTimer.C:
		case <-sample.C:
			s.locked(s.sampleUsage)
		}
	}
}

// RunUntilDone runs until every task has ended (done, failed, discarded) or waits for
// a human with nothing left running, and returns whether all ended done.
func (s *Supervisor) RunUntilDone(ctx context.Context) (allDone bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, unsub := s.Subscribe(1024)
	defer unsub()
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	check := time.NewTicker(100 * time.Millisecond)
	defer check.Stop()
	for {
		select {
		case err := <-errc:
			return false, err
		case <-ch:
		case <-check.C:
		}
		finished, ok := s.finished()
		if finished {
			cancel()
			err := <-errc
			return ok, err
		}
	}
}

// finished reports whether nothing can progress without a human, and whether every
// task ended done.
func (s *Supervisor) finished() (finished, allDone bool) {
	s.call(func() {
		finished, allDone = true, true
		for _, id := range s.order {
			t := s.tasks[id]
			switch {
			case t.State == TaskDone:
			case t.State.Ended() || t.State == TaskInbox || t.State == TaskInterrupted:
				allDone = false
			default:
				finished, allDone = false, false
			}
		}
		// A session paused into the inbox (over budget) waits for a human too.
		for _, ls := range s.sessions {
			if s.tasks[ls.rec.Task].State != TaskInbox {
				finished = false
			}
		}
		if s.laneBusy() {
			finished = false
		}
		// While the head is red and nothing is under way to fix it (a hold), tasks the
		// gate holds back wait for a human like the inbox's.
		if !finished && len(s.sessions) == 0 && !s.laneBusy() && s.lane.red != nil && !s.repairPending() {
			finished = true
			gate := s.laneGateNow()
			for _, id := range s.order {
				t := s.tasks[id]
				if !t.State.Ended() && t.State != TaskInbox && t.State != TaskInterrupted && gate.blocks(*t) == "" {
					finished = false
				}
			}
		}
	})
	return finished, allDone
}

// locked runs fn holding the state lock. The loop holds it for each step, and calls
// made before the loop runs (or after it ended) take it too, so a caller racing Run's
// start cannot touch the state at the same time as the loop.
func (s *Supervisor) locked(fn func()) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	fn()
}

// call runs fn on the loop goroutine and waits; before Run starts, or once it has
// ended, it runs fn directly under the state lock.
func (s *Supervisor) call(fn func()) {
	if !s.started.Load() {
		s.locked(fn)
		return
	}
	done := make(chan struct{})
	select {
	case s.inbox <- func() { fn(); close(done) }:
		<-done // the inbox is unbuffered: a received fn always runs
	case <-s.closed:
		s.locked(fn)
	}
}

// post hands fn to the loop without waiting for it to run; after the loop has ended
// it is dropped (used by watchers, whose news no longer matters then).
func (s *Supervisor) post(fn func()) {
	select {
	case s.inbox <- fn:
	case <-s.closed:
	}
}

func (s *Supervisor) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// shutdown stops what is still running: sessions become interrupted with their layers
// kept, the pool's spares end, subscribers are told.
func (s *Supervisor) shutdown() {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	close(s.closed) // from here, callers run directly (under stateMu) and watchers' news is dropped
	for id, ls := range s.sessions {
		s.endSession(ls, true, SessionInterrupted, nil)
		if t := s.tasks[ls.rec.Task]; t != nil && !t.State.Ended() {
			t.State, t.Reason = TaskInterrupted, "supervisor stopped"
			s.saveTask(t, Event{Kind: EvTaskInterrupted, Task: t.ID, Session: id})
		}
	}
	s.bgWG.Wait()
	s.preShutdown()
	if s.pool != nil {
		s.pool.Close()
	}
	s.hub.close()
}
