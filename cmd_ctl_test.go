package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"corral/supervisor"
)

// headFile reads a file from the fleet's head branch.
func headFile(t *testing.T, dir, path string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", dir, "show", "corral/head:"+path).CombinedOutput()
	if err != nil {
		t.Fatalf("git show corral/head:%s: %v\n%s", path, err, out)
	}
	return string(out)
}

func headJSON(t *testing.T, dir, path string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(headFile(t, dir, path)), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestCtlCoordination runs scripted agents that speak `corral ctl` from inside their
// sandboxes: two declare overlapping intents and both are told; the board shows the
// other's intent but none of its files; a session cannot act as another; `wait head`
// returns when a publish lands; a handoff creates a task that runs and passes its
// acceptance command.
func TestCtlCoordination(t *testing.T) {
	requireRoot(t)
	dir, plan := fleetRepo(t, `
[fleet]
repo = "."
base = "main"
launch_interval = "50ms"
handoffs = "admit"

[defaults]
retries = 0

[[task]]
id = "c"
priority = 10
agent = "sh agents/ctl-wait.sh"

[[task]]
id = "a"
agent = "INTENT='src/**' PORT1=7001 PORT2=7002 sh agents/ctl-declare.sh"

[[task]]
id = "b"
agent = "INTENT=src/app.go PORT1=7003 sh agents/ctl-declare.sh"

[[task]]
id = "h"
agent = "sh agents/ctl-handoff.sh"
`)
	code, out, errOut := runMain("run", plan, "--headless", "--events", "-")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s\nevents:\n%s", code, errOut, out)
	}

	// b declared second and was told of a at once; a learns of b from its status.
	var bIntent supervisor.IntentResult
	headJSON(t, dir, "out/b-intent.json", &bIntent)
	if len(bIntent.Overlaps) != 1 || bIntent.Overlaps[0].Task != "a" || !strings.Contains(strings.Join(bIntent.Overlaps[0].Files, ","), "src/app.go") {
		t.Errorf("b's intent add did not report a's overlap on src/app.go: %+v", bIntent)
	}
	var aStatus supervisor.SessionStatus
	headJSON(t, dir, "out/a-status.json", &aStatus)
	if aStatus.Session != "a-1" || aStatus.Task != "a" || strings.Join(aStatus.Overlaps, ",") != "b" {
		t.Errorf("a's status: session %q task %q overlaps %v, want a-1, a, [b]", aStatus.Session, aStatus.Task, aStatus.Overlaps)
	}
	if aStatus.Gateway.Tokens != nil || aStatus.Gateway.Note == "" {
		t.Errorf("a's status gateway: %+v (no gateway runs: tokens null, a note)", aStatus.Gateway)
	}

	// The board has b's intent and lease, never b's files.
	board := headFile(t, dir, "out/a-board.json")
	var b supervisor.Board
	json.Unmarshal([]byte(board), &b)
	var sawB bool
	for _, bt := range b.Tasks {
		if bt.ID == "b" {
			sawB = bt.Session == "b-1" && strings.Join(bt.Intent, ",") == "src/app.go"
		}
	}
	if !sawB {
		t.Errorf("a's board lacks b's session and intent:\n%s", board)
	}
	if !strings.Contains(board, `"b-declared"`) {
		t.Errorf("a's board lacks b's named lease:\n%s", board)
	}
	for _, private := range []string{"secret-b", "private to b", "/w/b-1"} {
		if strings.Contains(board, private) {
			t.Errorf("a's board shows b's private %q:\n%s", private, board)
		}
	}
	if got := strings.TrimSpace(headFile(t, dir, "out/a-run.txt")); got != "ctl.sock" {
		t.Errorf("a sees %q in /run/corral, want only its own ctl.sock", got)
	}

	// A session can act only as itself, and a one-shot session cannot publish early.
	imp := strings.Split(strings.TrimSpace(headFile(t, dir, "out/a-impersonate.txt")), "\n")
	for _, line := range imp {
		if !strings.Contains(line, `"ok":false`) || !strings.Contains(line, `unknown field \"session\"`) {
			t.Errorf("a request naming another session was not refused: %s", line)
		}
	}
	if len(imp) != 3 {
		t.Errorf("want 3 refused impersonations (intent, lease, publish), got %q", imp)
	}
	if steal := headFile(t, dir, "out/b-steal.txt"); !strings.Contains(steal, "held by session a-1") || !strings.Contains(steal, "exit 1") {
		t.Errorf("b took a's lease name: %q", steal)
	}
	if pub := headFile(t, dir, "out/a-publish.txt"); !strings.Contains(pub, "one-shot") || !strings.Contains(pub, "exit 1") {
		t.Errorf("ctl publish from a one-shot session: %q", pub)
	}

	// wait head returned once a publish moved the head off c's base.
	var w supervisor.WaitResult
	headJSON(t, dir, "out/c-wait.json", &w)
	base := strings.TrimSpace(gitOut(t, dir, "rev-parse", "main"))
	if w.What != "head" || w.Head == "" || w.Head == base || w.Behind < 1 {
		t.Errorf("wait head: %+v (base %s)", w, base)
	}

	// c's HOME configures its agent to find `corral mcp`, which answers as c.
	var viaMCP supervisor.SessionStatus
	headJSON(t, dir, "out/c-mcp.json", &viaMCP)
	if viaMCP.Session != "c-1" || viaMCP.Task != "c" {
		t.Errorf("status through the MCP server ~/.claude.json names: %+v", viaMCP)
	}
	if codex := headFile(t, dir, "out/c-codex.toml"); !strings.Contains(codex, `command = "/.corral/bin/corral"`) {
		t.Errorf("~/.codex/config.toml: %q", codex)
	}

	// The handoff made a task that ran after h, at a head with the artifact, and
	// passed its acceptance command; a missing artifact was refused.
	if bad := headFile(t, dir, "out/h-bad.txt"); !strings.Contains(bad, "nope.md") || !strings.Contains(bad, "exit 1") {
		t.Errorf("handoff with a missing artifact: %q", bad)
	}
	var h supervisor.HandoffResult
	headJSON(t, dir, "out/h-handoff.json", &h)
	if h.Task.ID != "follow" || strings.Join(h.Task.After, ",") != "h" || !strings.Contains(h.Task.Agent, "grep -q spec spec.md") {
		t.Errorf("handoff result: %+v", h)
	}
	if got := headFile(t, dir, "followed.txt"); got != "followed\n" {
		t.Errorf("the follow-up's work on the head: %q", got)
	}
}

// TestCtlEndpointAndPublish: a service one session leases by name is reachable from
// another session's sandbox through the address `ctl endpoint` gives, and a persistent
// session's `ctl publish` returns the typed outcome with its message as the subject.
func TestCtlEndpointAndPublish(t *testing.T) {
	requireRoot(t)
	dir, plan := fleetRepo(t, `
[fleet]
repo = "."
base = "main"
launch_interval = "50ms"

[defaults]
retries = 0

[[task]]
id = "svc"
agent = "sh agents/ctl-serve.sh"

[[task]]
id = "client"
agent = "sh agents/ctl-fetch.sh"

[[task]]
id = "pub"
lifetime = "persistent"
agent = "sh agents/ctl-publish.sh"
accept = "echo checking; test ! -e out/wip.txt"
`)
	code, out, errOut := runMain("run", plan, "--headless", "--events", "-")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s\nevents:\n%s", code, errOut, out)
	}
	if got := strings.TrimSpace(headFile(t, dir, "out/fetched.txt")); got != "served by svc" {
		t.Errorf("client fetched %q through %s, want svc's page", got, headFile(t, dir, "out/addr.txt"))
	}
	var po supervisor.PublishOutcome
	headJSON(t, dir, "out/pub-outcome.json", &po)
	if po.Publish.Outcome != supervisor.OutcomeAccepted || po.Publish.Session != "pub-1" || po.Publish.NewHead == "" {
		t.Errorf("ctl publish outcome: %+v", po)
	}
	if subj := gitOut(t, dir, "log", "-1", "--format=%s", po.Publish.NewHead); strings.TrimSpace(subj) != "pub: first half" {
		t.Errorf("published commit subject %q, want the --message", subj)
	}
	// The publish made while out/wip.txt was there ran the task's accept check in the
	// live session, failed it, published nothing, and told the agent why.
	refused := headFile(t, dir, "out/early-refused.txt")
	if !strings.Contains(refused, "accept check failed (exit 1)") || !strings.Contains(refused, "checking") {
		t.Errorf("the too-early publish answered %q, want the failed check and its output", refused)
	}
	if log := gitOut(t, dir, "log", "--format=%s", "corral/head"); strings.Contains(log, "too early") {
		t.Errorf("the refused publish landed:\n%s", log)
	}
	if !strings.Contains(out, `"kind":"accept.failed"`) {
		t.Errorf("no accept.failed event:\n%s", out)
	}
}

func TestCtlArgsAndOutsideSandbox(t *testing.T) {
	req, asJSON, err := parseCtlArgs([]string{"lease", "port", "4173", "--name", "preview", "--json"})
	if err != nil || !asJSON || req.Verb != "lease" || strings.Join(req.Args, " ") != "port 4173" || req.Flags["name"] != "preview" {
		t.Errorf("parse: %+v json=%v err=%v", req, asJSON, err)
	}
	req, _, err = parseCtlArgs([]string{"ask", "--nowait", "--kind=permission", "may", "I?"})
	if err != nil || strings.Join(req.Args, " ") != "may I?" || req.Flags["kind"] != "permission" || req.Flags["nowait"] != "1" {
		t.Errorf("parse ask: %+v err=%v", req, err)
	}
	if _, _, err := parseCtlArgs([]string{"board", "--sesion", "x"}); err == nil || !strings.Contains(err.Error(), "--sesion") {
		t.Errorf("unknown flag: %v", err)
	}
	t.Setenv("CORRAL_CTL", "")
	code, _, errOut := runMain("ctl", "board")
	if code != exitFailure || !strings.Contains(errOut, "inside a corral sandbox") {
		t.Errorf("ctl outside a sandbox: exit %d, %q", code, errOut)
	}
}
