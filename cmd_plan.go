package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"corral/supervisor"
)

const planUsage = "want: plan check PLAN, or plan show PLAN"

// runPlan is `corral plan check PLAN` (is this plan good to run? every problem, with
// its line) and `corral plan show PLAN` (the plan as corral will run it, as JSON).
func runPlan(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return badInput(planUsage)
	}
	sub, rest := args[0], args[1:]
	if sub != "check" && sub != "show" {
		return badInput("unknown subcommand %q: %s", sub, planUsage)
	}
	if len(rest) != 1 {
		return badInput("plan %s: want exactly one PLAN file, got %d arguments", sub, len(rest))
	}
	path := rest[0]
	plan, err := supervisor.ParsePlan(path)
	if err != nil {
		var pe *supervisor.PlanError
		if !errors.As(err, &pe) {
			return badInput("%v", err)
		}
		// Every problem on its own FILE:LINE line, so editors can jump to each.
		for _, p := range pe.Problems {
			fmt.Fprintln(stderr, p)
		}
		return badInput("%s: %s", path, planPlural(len(pe.Problems), "problem"))
	}
	if sub == "show" {
		b, err := json.MarshalIndent(plan, "", "  ")
		if err != nil {
			return fmt.Errorf("encode plan: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	f := plan.Fleet
	_, err = fmt.Fprintf(stdout, "%s: ok — %s (fleet %s, base %s %s, head %s)\n",
		path, planPlural(len(plan.Tasks), "task"), f.Name, f.BaseRef, planShortCommit(f.Base), f.HeadRef)
	return err
}

func planPlural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func planShortCommit(c string) string {
	if len(c) > 7 {
		return c[:7]
	}
	return c
}
