package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"corral/supervisor"
)

// runInbox is `corral inbox [--json]`: the agents waiting on a human, from the fleet's
// records (a noticed prompt, a `ctl ask` question, a proposed handoff).
func runInbox(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inbox", stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	fleet := fs.String("fleet", "", "fleet name (default: the most recent)")
	asJSON := fs.Bool("json", false, "print the items as JSON")
	all := fs.Bool("all", false, "include answered and closed items")
	if err := parseFlags(fs, reorderValueFlags(args, "repo", "fleet")); err != nil {
		return err
	}
	_, db, err := openFleetDB(*repoDir, *fleet)
	if err != nil {
		return err
	}
	defer db.Close()
	var items []supervisor.InboxItem
	if err := db.View(func(r supervisor.Reader) error {
		items, err = r.InboxItems(!*all)
		return err
	}); err != nil {
		return err
	}
	if *asJSON {
		if items == nil {
			items = []supervisor.InboxItem{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(items)
	}
	if len(items) == 0 {
		fmt.Fprintln(stdout, "no agent is waiting on a human")
		return nil
	}
	for _, it := range items {
		fmt.Fprintf(stdout, "#%d %s [%s] %s: %s\n", it.ID, it.Task, it.Kind, it.State, it.Text)
		if it.Screen != "" {
			lines := strings.Split(it.Screen, "\n")
			for _, l := range lines[max(0, len(lines)-6):] {
				fmt.Fprintf(stdout, "    │ %s\n", l)
			}
		}
	}
	return nil
}

// runAnswer is `corral answer ID TEXT…`: answer an agent's inbox item from another
// terminal. The fleet's running supervisor types it into the agent's terminal (or
// returns it to its `ctl ask`) within a second.
func runAnswer(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("answer", stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	fleet := fs.String("fleet", "", "fleet name (default: the most recent)")
	if err := parseFlags(fs, reorderValueFlags(args, "repo", "fleet")); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		return badInput("answer: want an inbox item id and the answer (corral inbox lists them)")
	}
	id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
	if err != nil || id <= 0 {
		return badInput("answer: item id %q: want a positive number", fs.Arg(0))
	}
	_, db, err := openFleetDB(*repoDir, *fleet)
	if err != nil {
		return err
	}
	defer db.Close()
	err = supervisor.RecordAnswer(db, id, strings.Join(fs.Args()[1:], " "))
	switch {
	case errors.Is(err, supervisor.ErrNotFound), errors.Is(err, supervisor.ErrNotApplicable):
		return badInput("answer: %v", err)
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "answer to inbox item %d recorded; the fleet's supervisor delivers it (event inbox.answered)\n", id)
	return nil
}
