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
	"syscall"
	"time"

	"corral/sandbox"
	"corral/store"
	"corral/supervisor"
)

// Exit code of `corral run` when some task ended otherwise than done (DESIGN.md).
const exitNotAllDone = 3

// fleetDB is where a fleet's database lives: one per fleet under .git/corral.
func fleetDB(repo sandbox.Repo, fleet string) string {
	return filepath.Join(repo.StateDir, "fleets", fleet+".db")
}

// openPlanFleet checks a plan and opens its repository and fleet database.
func openPlanFleet(planPath string, fresh bool) (*supervisor.Plan, sandbox.Repo, *store.DB, error) {
	plan, err := supervisor.ParsePlan(planPath)
	if err != nil {
		return nil, sandbox.Repo{}, nil, badInput("%v", err)
	}
	repo, err := sandbox.OpenRepo(plan.Fleet.Repo)
	if err != nil {
		return nil, sandbox.Repo{}, nil, badInput("%s: repo: %v", planPath, err)
	}
	path := fleetDB(repo, plan.Fleet.Name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, repo, nil, err
	}
	if fresh {
		// A fresh run keeps the previous one's records beside it, for reports.
		if _, err := os.Stat(path); err == nil {
			old := fmt.Sprintf("%s.%s", path, time.Now().Format("20060102-150405"))
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Rename(path+suffix, old+suffix)
			}
			// Set-aside runs keep their recordings within the retention limits.
			collectGarbage(repo, defaultRetention, time.Now())
		}
	}
	db, err := store.Open(path)
	if err != nil {
		return nil, repo, nil, err
	}
	return plan, repo, db, nil
}

// runRun is `corral run PLAN --headless [--events FILE]`: run a fleet to completion
// without a terminal, streaming its events as JSON lines.
func runRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	headless := fs.Bool("headless", false, "run without the TUI, to completion (default: the TUI)")
	eventsPath := fs.String("events", "-", "write events as JSON lines to FILE (- for standard output)")
	fresh := fs.Bool("fresh", false, "start a new run even if this fleet has one (the old records are kept beside it)")
	if err := parseFlags(fs, reorderFlags(args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return badInput("run: want one PLAN file")
	}
	fl, err := openFleet(fs.Arg(0), !*headless, *fresh)
	if err != nil {
		return err
	}
	defer fl.Close()
	if !*headless {
		ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		defer cancel()
		return runTUIFleet(ctx, fl)
	}
	db, sv, lastSeq := fl.db, fl.sv, fl.startSeq

	out := stdout
	if *eventsPath != "-" {
		f, err := os.Create(*eventsPath)
		if err != nil {
			return badInput("--events: %v", err)
		}
		defer f.Close()
		out = f
	}
	stream := newEventStream(db, out, lastSeq)
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	go stream.follow(ctx)
	allDone, err := sv.RunUntilDone(ctx)
	stream.stop()
	if err != nil {
		return err
	}
	st := sv.State()
	lane := ""
	if st.Lane.On {
		lane = " " + st.Lane.Outcome
		if st.Lane.Culprit != 0 {
			lane += fmt.Sprintf(" since publish %d (%s)", st.Lane.Culprit, st.Lane.Task)
		}
	}
	fmt.Fprintf(stderr, "corral: fleet %s: %s; head %s at %.12s%s\n", st.Fleet.Name, summarizeTasks(st.Tasks), st.Fleet.HeadRef, st.Fleet.Head, lane)
	if ctx.Err() != nil {
		return exitError{code: exitNotAllDone, msg: "interrupted; running sessions were stopped and can be resumed"}
	}
	if !allDone {
		return exitError{code: exitNotAllDone, msg: "not every task ended done"}
	}
	return nil
}

// reorderFlags lets flags follow the positional PLAN (`corral run plan.toml --headless`),
// which the flag package alone does not allow.
func reorderFlags(args []string) []string {
	return reorderValueFlags(args, "events", "repo", "fleet")
}

func summarizeTasks(tasks []supervisor.Task) string {
	counts := map[supervisor.TaskState]int{}
	for _, t := range tasks {
		counts[t.State]++
	}
	s := fmt.Sprintf("%d task(s)", len(tasks))
	for _, st := range []supervisor.TaskState{supervisor.TaskDone, supervisor.TaskFailed, supervisor.TaskDiscarded,
		supervisor.TaskInbox, supervisor.TaskInterrupted, supervisor.TaskRunning, supervisor.TaskQueued} {
		if counts[st] > 0 {
			s += fmt.Sprintf(", %d %s", counts[st], st)
		}
	}
	return s
}

// eventStream copies events from the store to a writer as JSON lines, in order and
// without gaps: it reads the store, not the live feed, so nothing is dropped.
type eventStream struct {
	db    *store.DB
	enc   *json.Encoder
	after int64
	done  chan struct{}
	quit  chan struct{}
}

func newEventStream(db *store.DB, w io.Writer, after int64) *eventStream {
	return &eventStream{db: db, enc: json.NewEncoder(w), after: after, done: make(chan struct{}), quit: make(chan struct{})}
}

func (e *eventStream) follow(ctx context.Context) {
	defer close(e.done)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		e.drain()
		select {
		case <-tick.C:
		case <-e.quit:
			e.drain()
			return
		}
	}
}

func (e *eventStream) drain() {
	for {
		var evs []supervisor.Event
		err := e.db.View(func(r supervisor.Reader) error {
			var err error
			evs, err = r.Events(e.after, 1000)
			return err
		})
		if err != nil || len(evs) == 0 {
			return
		}
		for _, ev := range evs {
			ev.Time = ev.Time.UTC()
			e.enc.Encode(ev)
			e.after = ev.Seq
		}
	}
}

func (e *eventStream) stop() {
	close(e.quit)
	<-e.done
}

var _ = errors.New
