package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"corral/supervisor"
)

// runApprove is `corral approve ID`: land an escalated publish.
func runApprove(args []string, stdout, stderr io.Writer) error {
	return decide("approve", args, stdout, stderr)
}

// runDeny is `corral deny ID --why REASON`: turn an escalated publish down.
func runDeny(args []string, stdout, stderr io.Writer) error {
	return decide("deny", args, stdout, stderr)
}

// decide records a decision in the fleet's store. The fleet's running supervisor
// applies it within a moment — an approval re-checks the publish against the head as
// it is then — or, if none runs, the next one to open the fleet does.
func decide(verb string, args []string, stdout, stderr io.Writer) error {
	fs := newFlags(verb, stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	fleet := fs.String("fleet", "", "fleet name (default: the most recent)")
	why := fs.String("why", "", "the reason, recorded with the decision (required to deny)")
	if err := parseFlags(fs, reorderValueFlags(args, "why", "repo", "fleet")); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return badInput("%s: want one publish id (corral status lists escalated publishes)", verb)
	}
	id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
	if err != nil || id <= 0 {
		return badInput("%s: publish id %q: want a positive number", verb, fs.Arg(0))
	}
	if verb == "deny" && strings.TrimSpace(*why) == "" {
		return badInput("deny: say why with --why REASON; the task's owner reads it")
	}
	_, db, err := openFleetDB(*repoDir, *fleet)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = supervisor.RecordDecision(db, supervisor.Approval{Publish: id, Decision: verb, Reason: *why, Time: time.Now()})
	switch {
	case errors.Is(err, supervisor.ErrNotFound), errors.Is(err, supervisor.ErrDecided):
		return badInput("%s: %v", verb, err)
	case err != nil:
		return err
	}
	fmt.Fprintf(stdout, "%s publish %d recorded; the fleet's supervisor applies it (events publish.approved/publish.denied)\n",
		map[string]string{"approve": "approval of", "deny": "denial of"}[verb], id)
	return nil
}

// reorderValueFlags moves flags (with the separate values of the named ones) ahead of
// positional arguments, so `deny 3 --why "reason"` parses like `deny --why … 3`.
func reorderValueFlags(args []string, valued ...string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case len(a) > 1 && a[0] == '-':
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			for _, v := range valued {
				if name == v && i+1 < len(args) {
					flags = append(flags, args[i+1])
					i++
					break
				}
			}
		default:
			pos = append(pos, a)
		}
	}
	return append(flags, pos...)
}
