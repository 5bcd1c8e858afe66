package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"corral/sandbox"
	"corral/store"
	"corral/supervisor"
)

// benchSupervisor is `corral bench supervisor`: the supervisor's own cost — events per
// second into the store, and the CPU the supervisor process itself uses while it
// samples N idle sessions once a second (goal: under 5% of one core for 50).
func benchSupervisor(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench supervisor", stderr)
	n := fs.Int("sessions", 50, "idle sessions to supervise")
	window := fs.Duration("window", 10*time.Second, "how long to measure the supervisor's CPU")
	events := fs.Int("events", 100000, "events to write for the store measurement")
	scratch := fs.String("scratch", defaultScratch(), "directory for the bench repository")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dir, err := benchRepo(*scratch, "corral-bench-sv-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	repo, err := sandbox.OpenRepo(dir)
	if err != nil {
		return err
	}
	os.MkdirAll(repo.StateDir, 0o700)

	// Events into the store: the supervisor's write path, batched by group commit.
	db, err := store.Open(filepath.Join(repo.StateDir, "events-bench.db"))
	if err != nil {
		return err
	}
	t0 := time.Now()
	const writers, perUpdate = 8, 10
	done := make(chan error, writers)
	for w := 0; w < writers; w++ {
		go func(w int) {
			for i := 0; i < *events/writers/perUpdate; i++ {
				_, err := db.Update(func(tx supervisor.Tx) error {
					for j := 0; j < perUpdate; j++ {
						tx.Emit(supervisor.Event{Kind: "bench.event", Task: fmt.Sprintf("t%d", w), Data: []byte(`{"i":1}`)})
					}
					return nil
				})
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}(w)
	}
	for w := 0; w < writers; w++ {
		if err := <-done; err != nil {
			return err
		}
	}
	evRate := float64(*events) / time.Since(t0).Seconds()
	db.Close()
	fmt.Fprintf(stdout, "events into the store: %.0f events/s (%d events, %d writers, %d per update)\n", evRate, *events, writers, perUpdate)

	// CPU of the supervisor process while it samples n idle sessions.
	db, err = store.Open(filepath.Join(repo.StateDir, "fleet.db"))
	if err != nil {
		return err
	}
	defer db.Close()
	sv, err := supervisor.New(supervisor.Config{Repo: repo, Store: db,
		Fleet: supervisor.Fleet{Name: "bench", BaseRef: "main", Admission: supervisor.Admission{MaxRunning: *n}}})
	if err != nil {
		return err
	}
	var tasks []supervisor.Task
	for i := 0; i < *n; i++ {
		tasks = append(tasks, supervisor.Task{ID: fmt.Sprintf("idle%d", i), Prompt: "idle", Agent: "sleep 3600", Lifetime: supervisor.Persistent})
	}
	if err := sv.AddTasks(tasks...); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- sv.Run(ctx) }()
	defer func() {
		cancel()
		<-runDone
		for _, t := range tasks {
			sandbox.DiscardSession(repo, t.ID+"-1")
		}
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for sv.State().Running < *n {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d sessions came up", sv.State().Running, *n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // let the launch burst settle
	cpu0, wall0 := selfCPU(), time.Now()
	time.Sleep(*window)
	used := selfCPU() - cpu0
	pct := 100 * used.Seconds() / time.Since(wall0).Seconds()
	mark := "met "
	if pct >= 5 {
		mark = "MISS"
	}
	fmt.Fprintf(stdout, "supervisor CPU with %d idle sessions sampled every second: %.2f%% of one core over %s\n", *n, pct, *window)
	fmt.Fprintf(stdout, "goals:\n  [%s] supervisor under 5%% of one core with %d sessions   %.2f%%\n", mark, *n, pct)
	return nil
}

// selfCPU is the CPU time this process (not its children) has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchRepo makes a fresh one-commit repository in a new directory under scratch.
func benchRepo(scratch, prefix string) (string, error) {
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(scratch, prefix)
	if err != nil {
		return "", err
	}
	if err := initBenchRepo(dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// initBenchRepo makes dir a repository with one commit on main.
func initBenchRepo(dir string) error {
	script := `set -e; cd "$1"; git init -q -b main; echo x > f; git add f
GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@c GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@c git commit -q -m init`
	if out, err := exec.Command("/bin/sh", "-c", script, "sh", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("bench repo: %v: %s", err, out)
	}
	return nil
}
