package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"corral/supervisor"
)

// runAdd is `corral add TASKS.toml`: add [[task]] tables to a fleet. The tasks are
// checked against the fleet's plan (its defaults apply, ids must be new) and queued in
// its store; a running supervisor admits them within a second.
func runAdd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("add", stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	fleet := fs.String("fleet", "", "fleet name (default: the most recent)")
	if err := parseFlags(fs, reorderFlags(args)); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return badInput("add: want one file of [[task]] tables")
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return badInput("add: %v", err)
	}
	_, db, err := openFleetDB(*repoDir, *fleet)
	if err != nil {
		return err
	}
	defer db.Close()
	var f supervisor.Fleet
	var existing []supervisor.Task
	if err := db.View(func(r supervisor.Reader) error {
		var err error
		if f, err = r.Fleet(); err != nil {
			return err
		}
		existing, err = r.Tasks()
		return err
	}); err != nil {
		return err
	}
	plan := &supervisor.Plan{Fleet: f, Tasks: existing}
	if f.Plan != "" {
		if p, err := supervisor.ParsePlan(f.Plan); err == nil {
			plan = p
			plan.Tasks = existing
		}
	}
	tasks, err := supervisor.ParseTaskAdd(fs.Arg(0), data, plan)
	if err != nil {
		var pe *supervisor.PlanError
		if errors.As(err, &pe) {
			return badInput("%v", err)
		}
		return err
	}
	now := time.Now()
	_, err = db.Update(func(tx supervisor.Tx) error {
		for _, t := range tasks {
			t.State, t.Created, t.Updated = supervisor.TaskQueued, now, now
			if err := tx.PutTask(t); err != nil {
				return err
			}
			if err := tx.SetIntents(t.ID, t.Intent); err != nil {
				return err
			}
			tx.Emit(supervisor.Event{Kind: supervisor.EvTaskQueued, Task: t.ID})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, t := range tasks {
		fmt.Fprintf(stdout, "queued %s in fleet %s\n", t.ID, f.Name)
	}
	return nil
}
