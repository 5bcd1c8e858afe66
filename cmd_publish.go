package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"corral/supervisor"
)

// runPublish is `corral publish ls` (every publish of the fleet, with its id for
// approve/deny) and `corral publish show ID` (one publish: its reason, conflicts and,
// while escalated, the diff waiting for a decision).
func runPublish(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "ls" && args[0] != "show") {
		return badInput("want: publish ls [--json] | publish show ID")
	}
	fs := newFlags("publish "+args[0], stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	fleet := fs.String("fleet", "", "fleet name (default: the most recent)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, reorderFlags(args[1:])); err != nil {
		return err
	}
	repo, db, err := openFleetDB(*repoDir, *fleet)
	if err != nil {
		return err
	}
	defer db.Close()
	var pubs []supervisor.Publish
	if err := db.View(func(r supervisor.Reader) error {
		pubs, err = r.Publishes()
		return err
	}); err != nil {
		return err
	}
	if args[0] == "ls" {
		if *asJSON {
			return json.NewEncoder(stdout).Encode(pubs)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTASK\tSESSION\tOUTCOME\tPATHS\tMESSAGE")
		for _, p := range pubs {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\n", p.ID, p.Task, p.Session, p.Outcome, len(p.Paths), p.Message)
		}
		return tw.Flush()
	}
	if fs.NArg() != 1 {
		return badInput("publish show: want one publish id")
	}
	id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
	if err != nil {
		return badInput("publish show: id %q: want a number", fs.Arg(0))
	}
	for _, p := range pubs {
		if p.ID != id {
			continue
		}
		var conflicts []supervisor.Conflict
		var runs []supervisor.LaneRun
		db.View(func(r supervisor.Reader) error {
			if conflicts, err = r.Conflicts(id); err != nil {
				return err
			}
			runs, err = r.LaneRuns()
			return err
		})
		lane, tested := laneTestOf(runs, nil)[id]
		if *asJSON {
			out := map[string]any{"publish": p, "conflicts": conflicts}
			if tested {
				out["lane"] = lane
			}
			return json.NewEncoder(stdout).Encode(out)
		}
		fmt.Fprintf(stdout, "publish %d: task %s, session %s, %s\n%s\nbase %s  head %s  new head %s\n",
			p.ID, p.Task, p.Session, p.Outcome, p.Message, p.Base, p.Head, p.NewHead)
		for _, c := range conflicts {
			fmt.Fprintf(stdout, "  %s conflict on %s (moved by publish %d)\n", c.Class, c.Path, c.MovedBy)
		}
		if tested {
			fmt.Fprintf(stdout, "lane: %s at %.12s (run %d, %d execution(s); recording %s)\n",
				lane.Outcome, lane.Commit, lane.ID, lane.Runs, supervisor.LaneRecording(repo, lane.Session))
			if lane.Culprit == id {
				fmt.Fprintln(stdout, "  the lane blamed this publish for turning the head red")
			}
			if lane.Output != "" {
				fmt.Fprintf(stdout, "%s\n", strings.TrimRight(strings.ReplaceAll(lane.Output, "\r\n", "\n"), "\n"))
			}
		}
		if p.Outcome == supervisor.OutcomeEscalated {
			diff, err := repo.Git("diff", "--stat", "--patch", p.Base, "refs/corral/escalated/"+p.Session)
			if err != nil {
				return fmt.Errorf("publish %d: held work: %w", id, err)
			}
			fmt.Fprintf(stdout, "\nwaiting for corral approve %d / corral deny %d --why …\n\n%s\n", id, id, diff)
		}
		return nil
	}
	return badInput("publish show: no publish %d", id)
}
