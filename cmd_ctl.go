package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"corral/supervisor"
)

// ctlSocket is the session's control socket: CORRAL_CTL inside a sandbox.
func ctlSocket() string {
	if p := os.Getenv("CORRAL_CTL"); p != "" {
		return p
	}
	return supervisor.CtlSocketInside
}

// ctlBoolFlags take no value.
var ctlBoolFlags = map[string]bool{"json": true, "nowait": true}

// ctlValueFlags are the flags verbs accept, each with a value.
var ctlValueFlags = map[string]bool{"name": true, "message": true, "artifact": true, "accept": true, "prompt": true,
	"agent": true, "intent": true, "timeout": true, "from": true, "kind": true}

// parseCtlArgs splits `VERB ARGS… --flag value` into a request and whether --json was
// asked. Flags may come anywhere after the verb.
func parseCtlArgs(args []string) (supervisor.CtlRequest, bool, error) {
	var req supervisor.CtlRequest
	asJSON := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			req.Args = append(req.Args, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || len(a) < 2 || (a[1] >= '0' && a[1] <= '9') {
			req.Args = append(req.Args, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case ctlBoolFlags[name]:
			if name == "json" {
				asJSON = true
				continue
			}
			val = "1"
		case ctlValueFlags[name]:
			if !hasVal {
				if i+1 >= len(args) {
					return req, false, badInput("ctl: --%s needs a value", name)
				}
				i++
				val = args[i]
			}
		default:
			return req, false, badInput("ctl: unknown flag --%s", name)
		}
		if req.Flags == nil {
			req.Flags = map[string]string{}
		}
		req.Flags[name] = val
	}
	if len(req.Args) == 0 {
		return req, false, badInput("ctl: want a verb: board, status, intent, lease, endpoint, publish, handoff, wait or ask")
	}
	req.Verb, req.Args = req.Args[0], req.Args[1:]
	return req, asJSON, nil
}

// runCtl is `corral ctl VERB …`: the workspace protocol from inside a sandbox.
func runCtl(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, ctlUsage)
		return nil
	}
	req, asJSON, err := parseCtlArgs(args)
	if err != nil {
		return err
	}
	sock := ctlSocket()
	if _, err := os.Stat(sock); err != nil && os.Getenv("CORRAL_CTL") == "" {
		return fmt.Errorf("no control socket at %s: corral ctl works inside a corral sandbox (CORRAL_CTL names the socket)", sock)
	}
	data, err := supervisor.CallCtl(sock, req, 0)
	if err != nil {
		return err
	}
	if asJSON {
		var buf bytes.Buffer
		json.Indent(&buf, data, "", "  ")
		buf.WriteByte('\n')
		_, err := stdout.Write(buf.Bytes())
		return err
	}
	return printCtl(stdout, req, data)
}

const ctlUsage = `corral ctl — the shared workspace, from inside a sandbox (JSON with --json)

  board                          live tasks, intents, leases, recent publishes, lanes
  status                         this session: state, base, head distance, budget, usage
  intent add GLOB…               declare paths this session will touch; overlaps come back
  intent drop [GLOB…]            narrow it (no GLOB: drop all)
  lease port PORT [--name NAME]  claim a port, optionally as a named service
  lease drop [PORT] [--name N]   release it
  endpoint NAME                  an address reachable from here for another session's service
  publish [--message TEXT]       publish now (persistent sessions) and return the outcome
  handoff TASK [--artifact PATH] [--accept CMD] [--prompt TEXT] [--agent CMD] [--intent G,G]
                                 propose a follow-up task
  wait head [--from REV] | wait publish | wait lease NAME   [--timeout 30s]
  ask QUESTION [--kind needs-input|permission|done|rate-limited] [--nowait]
                                 put a question in the human's inbox and wait for the answer
`

// printCtl renders an answer for a person.
func printCtl(w io.Writer, req supervisor.CtlRequest, data json.RawMessage) error {
	switch req.Verb {
	case supervisor.VerbBoard:
		var b supervisor.Board
		if err := json.Unmarshal(data, &b); err != nil {
			return err
		}
		fmt.Fprintf(w, "fleet %s  head %s %.12s  (%d running / %d max, %d queued, %d inbox)\n",
			b.Fleet.Name, b.Fleet.HeadRef, b.Fleet.Head, b.Lanes.Running, b.Lanes.MaxRunning, b.Lanes.Queued, b.Inbox)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tSTATE\tSESSION\tBEHIND\tINTENT\tOVERLAPS")
		for _, t := range b.Tasks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", t.ID, t.State, dash(t.Session), t.Behind, dash(strings.Join(t.Intent, ",")), dash(strings.Join(t.Overlaps, ",")))
		}
		tw.Flush()
		for _, l := range b.Leases {
			fmt.Fprintf(w, "lease %s port %d (%s) %s\n", dash(l.Name), l.Port, l.Task, l.Endpoint)
		}
		for _, p := range b.Publishes {
			fmt.Fprintf(w, "publish %d %s %s: %s\n", p.ID, p.Task, p.Outcome, p.Message)
		}
		return nil
	case supervisor.VerbStatus:
		var st supervisor.SessionStatus
		if err := json.Unmarshal(data, &st); err != nil {
			return err
		}
		fmt.Fprintf(w, "session %s (task %s, %s, attempt %d)\nbase %.12s  head %.12s  behind %d\nintent %s\n",
			st.Session, st.Task, st.State, st.Attempt, st.Base, st.Head, st.Behind, dash(strings.Join(st.Intent, ",")))
		if len(st.Overlaps) > 0 {
			fmt.Fprintf(w, "overlaps %s\n", strings.Join(st.Overlaps, ","))
		}
		for _, l := range st.Leases {
			fmt.Fprintf(w, "lease %s port %d %s\n", dash(l.Name), l.Port, l.Endpoint)
		}
		if st.Usage != nil {
			fmt.Fprintf(w, "usage cpu %.0f%% memory %d bytes pids %d\n", st.Usage.CPUPercent, st.Usage.Memory, st.Usage.Pids)
		}
		if g := st.Gateway; g.Tokens != nil {
			fmt.Fprintf(w, "model %d calls, %d tokens, $%.4f; task %d tokens, $%.4f", g.Calls, *g.Tokens, *g.CostUSD, g.TaskTokens, g.TaskCostUSD)
			if g.BudgetTokens > 0 || g.BudgetCostUSD > 0 {
				fmt.Fprintf(w, " (budget %d tokens, $%.2f)", g.BudgetTokens, g.BudgetCostUSD)
			}
			if g.Held {
				fmt.Fprint(w, "; next request held")
			}
			fmt.Fprintln(w)
			if q := g.Quota; q != nil {
				fmt.Fprintf(w, "quota %.0f%% of the window (%s)\n", 100*q.Fraction, q.Reason)
			}
		} else if g.Note != "" {
			fmt.Fprintf(w, "model %s\n", g.Note)
		}
		return nil
	case supervisor.VerbIntent:
		var r supervisor.IntentResult
		if err := json.Unmarshal(data, &r); err != nil {
			return err
		}
		fmt.Fprintf(w, "intent %s\n", dash(strings.Join(r.Intent, ",")))
		for _, o := range r.Overlaps {
			fmt.Fprintf(w, "overlaps %s (%s %s): %s\n", o.Task, o.State, dash(o.Session), strings.Join(o.Files, ","))
		}
		return nil
	case supervisor.VerbEndpoint:
		var r supervisor.EndpointResult
		if err := json.Unmarshal(data, &r); err != nil {
			return err
		}
		fmt.Fprintln(w, r.Address)
		return nil
	case supervisor.VerbPublish:
		var r supervisor.PublishOutcome
		if err := json.Unmarshal(data, &r); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: %s\n", r.Publish.Outcome, r.Publish.Message)
		for _, c := range r.Conflicts {
			fmt.Fprintf(w, "conflict %s %s\n", c.Class, c.Path)
		}
		return nil
	case supervisor.VerbAsk:
		var it supervisor.InboxItem
		if err := json.Unmarshal(data, &it); err != nil {
			return err
		}
		if it.State == supervisor.InboxOpen {
			fmt.Fprintf(w, "inbox item %d open\n", it.ID)
		} else {
			fmt.Fprintln(w, it.Answer)
		}
		return nil
	}
	var buf bytes.Buffer
	json.Indent(&buf, data, "", "  ")
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
