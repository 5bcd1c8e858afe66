package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTUIAnswersStalledAgent drives the real binary in tmux: an agent stalled on a
// y/N prompt shows up in the inbox with its last screen; `i` and an answer typed in
// the TUI reach the agent's terminal, and the agent finishes with its work published.
func TestTUIAnswersStalledAgent(t *testing.T) {
	requireRoot(t)
	requireTmux(t)
	dir, plan := fleetRepo(t, `
[fleet]
repo = "."
base = "main"
needs_input_after = "300ms"

[[task]]
id = "yn"
agent = "sh agents/ask-yn.sh"
retries = 0
`)
	bin := buildCorral(t)
	term := startTmux(t, "inbox", 140, 45, fmt.Sprintf("%s run %s", bin, plan))

	term.waitFor("the prompt in the inbox", func(s string) bool { return strings.Contains(s, "⚑ inbox 1") })
	term.keys("Tab", "Tab", "Tab")
	term.waitFor("the item with the agent's screen", func(s string) bool {
		return strings.Contains(s, "yn [permission]") && strings.Contains(s, "│ Overwrite config.txt? [y/N]")
	})
	term.keys("i")
	term.waitFor("the answer line", func(s string) bool { return strings.Contains(s, "answer yn (permission):") })
	term.keys("y", "Enter")
	term.waitFor("yn done", func(s string) bool { return rowState(s, "yn") == "done" })
	term.waitFor("the inbox emptied", func(s string) bool { return strings.Contains(s, "inbox 0") })
	term.keys("q")
	time.Sleep(300 * time.Millisecond)
	if strings.Contains(term.screen(), "keep work") {
		term.keys("k")
	}
	term.waitExit("corral after quit", 30*time.Second)
	if got := headFile(t, dir, "config.txt"); got != "overwritten\n" {
		t.Errorf("config.txt on the head: %q", got)
	}
}
