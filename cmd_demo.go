package main

import (
	"context"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"corral/sandbox"
	"corral/store"
	"corral/supervisor"
)

// demoFiles is the demo's sample shop and its plan; `corral demo` needs nothing else.
//
//go:embed all:testdata/demo
var demoFiles embed.FS

// runDemo is `corral demo [--headless] [--keep]`: build the sample shop in a temporary
// directory and run its story — in the TUI, or headless with the demo script playing
// the human.
func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", stderr)
	headless := fs.Bool("headless", false, "run the story to completion without a terminal; the script plays the human")
	keep := fs.Bool("keep", false, "keep the demo's repository (its path is printed) instead of removing it")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "corral-demo-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintf(stderr, "corral demo: the shop is in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	planPath, err := buildDemo(dir, !*headless)
	if err != nil {
		return err
	}
	fl, err := openFleet(planPath, !*headless, false)
	if err != nil {
		return err
	}
	defer fl.Close()
	// A closed terminal (SIGHUP) stops the fleet as cleanly as ^C: sandboxes, mounts
	// and cgroups go, whatever screen was showing them.
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer cancel()
	if !*headless {
		return runTUIFleet(ctx, fl)
	}
	return runDemoHeadless(ctx, fl, stdout)
}

// buildDemo writes the embedded shop into dir/shop as a git repository with one commit
// on main, and the plan beside it; it returns the plan's path. In the TUI the agents
// work at a human pace, so there is time to watch, pause and attach.
func buildDemo(dir string, humanPace bool) (string, error) {
	sub, err := fs.Sub(demoFiles, "testdata/demo")
	if err != nil {
		return "", err
	}
	if err := os.CopyFS(dir, sub); err != nil {
		return "", fmt.Errorf("demo: write the shop: %w", err)
	}
	// Embedded files lose their mode bits; the agents are run by sh, the rest is text.
	shop := filepath.Join(dir, "shop")
	git := exec.Command("sh", "-c", "git init -q -b main && git add -A && git commit -q -m 'the shop before the fleet'")
	git.Dir = shop
	git.Env = append(os.Environ(), "GIT_AUTHOR_NAME=corral demo", "GIT_AUTHOR_EMAIL=demo@corral.local",
		"GIT_COMMITTER_NAME=corral demo", "GIT_COMMITTER_EMAIL=demo@corral.local")
	if out, err := git.CombinedOutput(); err != nil {
		return "", fmt.Errorf("demo: git init %s: %v: %s", shop, err, out)
	}
	plan := filepath.Join(dir, "plan.toml")
	if humanPace {
		data, err := os.ReadFile(plan)
		if err != nil {
			return "", err
		}
		slow := strings.Replace(string(data), `agent = "sh agents/demo.sh"`,
			`agent = "DEMO_TICK=2 DEMO_STEPS=90 DEMO_BURN=60 sh agents/demo.sh"`, 1)
		if err := os.WriteFile(plan, []byte(slow), 0o644); err != nil {
			return "", err
		}
	}
	return plan, nil
}

// fleet is an opened plan: its database and a supervisor with the plan's tasks added.
type fleet struct {
	sv           *supervisor.Supervisor
	db           *store.DB
	log          *os.File
	defaultAgent string // for tasks added by hand in the TUI
	repo         sandbox.Repo
	startSeq     int64 // the last event before this run opened the fleet
}

func (f *fleet) Close() {
	f.db.Close()
	f.log.Close()
}

// openFleet opens a plan's fleet (for `corral run`, the TUI and the demo) and adds the
// plan's tasks it does not know yet. Headless runs resume interrupted sessions; the
// TUI leaves them for the user. fresh starts a new run beside the old records.
func openFleet(planPath string, interactive, fresh bool) (*fleet, error) {
	plan, repo, db, err := openPlanFleet(planPath, fresh)
	if err != nil {
		return nil, err
	}
	// Events of this run start after what the store already holds.
	var startSeq int64
	db.View(func(r supervisor.Reader) error {
		evs, err := r.Events(0, 1<<30)
		if n := len(evs); n > 0 {
			startSeq = evs[n-1].Seq
		}
		return err
	})
	logFile, err := os.OpenFile(filepath.Join(repo.StateDir, "corral.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		db.Close()
		return nil, err
	}
	self, _ := os.Executable() // shown inside every sandbox for `corral ctl` and `corral mcp`
	cfg := supervisor.Config{
		Repo: repo, Store: db, Fleet: plan.Fleet, ResumeInterrupted: !interactive, Gateway: plan.Gateway,
		Log:       slog.New(slog.NewTextHandler(logFile, nil)),
		CtlBinary: self,
	}
	plan.Workspace.Apply(&cfg)
	sv, err := supervisor.New(cfg)
	if err != nil {
		db.Close()
		logFile.Close()
		return nil, err
	}
	known := map[string]bool{}
	for _, t := range sv.State().Tasks {
		known[t.ID] = true
	}
	var add []supervisor.Task
	for _, t := range plan.Tasks {
		if !known[t.ID] {
			add = append(add, t)
		}
	}
	if err := sv.AddTasks(add...); err != nil {
		db.Close()
		logFile.Close()
		return nil, err
	}
	fl := &fleet{sv: sv, db: db, log: logFile, repo: repo, startSeq: startSeq, defaultAgent: `claude -p "$CORRAL_PROMPT"`}
	if len(plan.Tasks) > 0 {
		fl.defaultAgent = plan.Tasks[0].Agent
	}
	return fl, nil
}
