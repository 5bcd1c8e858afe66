// Command corral is a terminal supervisor for a local fleet of coding agents.
//
// main.go is the composition root: it dispatches subcommands, wires packages together
// and is the entry point of the sandbox init when the binary re-executes itself.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"corral/sandbox"
)

// Exit codes shared by every subcommand (see README "Contracts").
const (
	exitOK       = 0
	exitFailure  = 1
	exitBadInput = 2
)

// usageError marks bad input: it exits with exitBadInput.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func badInput(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// command is one subcommand: its name, a one-line summary and its entry point.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"run", "run a plan's fleet in the TUI, or to completion: run PLAN [--headless [--events FILE]]", runRun},
		{"status", "show a fleet's tasks, sessions and leases (--json for machines)", runStatus},
		{"add", "add tasks to a fleet: add TASKS.toml", runAdd},
		{"plan", "check a plan file: plan check PLAN", runPlan},
		{"doctor", "report what this host can isolate (--json for machines)", runDoctor},
		{"sandbox", "run one command in a sandbox by hand: sandbox run --repo DIR -- CMD…", runSandbox},
		{"tui", "open a plan's fleet in the terminal UI: tui PLAN", runTUI},
		{"demo", "run the sample shop's story with scripted agents: demo [--headless]", runDemo},
		{"bench", "measure corral against the tools a user would otherwise use: bench " + benchKinds, runBench},
		{"policy", "say which path rule integrates a path: policy explain PATH… [--plan PLAN]", runPolicy},
		{"publish", "list publishes, show one with its held diff: publish ls | publish show ID", runPublish},
		{"approve", "land an escalated publish: approve ID", runApprove},
		{"deny", "turn an escalated publish down: deny ID --why REASON", runDeny},
		{"inbox", "list agents waiting on a human: inbox [--all] [--json]", runInbox},
		{"answer", "answer an agent's inbox item: answer ID TEXT…", runAnswer},
		{"ctl", "inside a sandbox: see the board, declare intent, lease ports, publish, hand off: ctl VERB", runCtl},
		{"mcp", "inside a sandbox: serve the ctl verbs as MCP tools over stdio", runMCP},
		{"replay", "watch a recorded run again: replay [RUN] [--at TIME] | replay --session ID", runReplay},
		{"report", "measure a run: report [RUN] [--json|--markdown] [--vs RUN] [--svg FILE] | report --runs", runReport},
		{"export", "write a session's terminal as asciicast v2: export SESSION [-o FILE]", runExport},
		{"gc", "remove old runs' recordings and unused snapshots: gc [--dry-run]", runGC},
	}
}

func main() {
	// The sandbox init is this same binary, re-executed as PID 1 of a new namespace set;
	// it must take over before anything else runs.
	if sandbox.IsInit() {
		sandbox.InitMain()
		return
	}
	// CORRAL_CPUPROFILE=FILE writes a CPU profile of the whole run, for finding where an
	// idle fleet's cycles go (go tool pprof FILE).
	if path := os.Getenv("CORRAL_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			code := Main(os.Args[1:], os.Stdout, os.Stderr)
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(code)
		}
	}
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs one corral invocation and returns its exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return exitOK
	}
	// `corral PLAN` is `corral tui PLAN`.
	if strings.HasSuffix(args[0], ".toml") {
		args = append([]string{"tui"}, args...)
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(args[1:], stdout, stderr)
		if err == nil {
			return exitOK
		}
		if errors.Is(err, errHelpShown) {
			return exitOK
		}
		fmt.Fprintf(stderr, "corral %s: %v\n", c.name, err)
		var ue usageError
		var ee exitError
		switch {
		case errors.As(err, &ue):
			return exitBadInput
		case errors.As(err, &ee):
			return ee.code
		}
		return exitFailure
	}
	fmt.Fprintf(stderr, "corral: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitBadInput
}

// exitError carries a specific exit code (an agent's, say) out of a subcommand.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

func usage(w io.Writer) {
	fmt.Fprintln(w, "corral — a terminal supervisor for a local fleet of coding agents")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: corral COMMAND [ARGS]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}
