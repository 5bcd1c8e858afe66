package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTUIAnswersStalledAgent drives the real binary in tmux: an agent stalled on a
// y/N prompt shows up in the inbox with its last screen; `i` and an answer typed in
// the TUI reach the agent's terminal, and the agent finishes with its work published.
func TestTUIAnswersStalledAgent(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("needs tmux to drive the terminal UI")
	}
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
	bin := filepath.Join(t.TempDir(), "corral")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	session := fmt.Sprintf("corral-inbox-%d", os.Getpid())
	exitFile := filepath.Join(t.TempDir(), "exit")
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err != nil && args[0] != "kill-session" {
			t.Logf("tmux %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", session, "-x", "140", "-y", "45",
		fmt.Sprintf("%s run %s 2>%s.err; echo $? > %s", bin, plan, exitFile, exitFile))
	t.Cleanup(func() { tmux("kill-session", "-t", session) })
	screen := func() string { return tmux("capture-pane", "-p", "-t", session) }
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if ok(screen()) {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("never saw %s; the screen:\n%s", what, screen())
	}
	keys := func(k ...string) { tmux(append([]string{"send-keys", "-t", session}, k...)...) }

	waitFor("the prompt in the inbox", func(s string) bool { return strings.Contains(s, "⚑ inbox 1") })
	keys("Tab", "Tab", "Tab")
	waitFor("the item with the agent's screen", func(s string) bool {
		return strings.Contains(s, "yn [permission]") && strings.Contains(s, "│ Overwrite config.txt? [y/N]")
	})
	keys("i")
	waitFor("the answer line", func(s string) bool { return strings.Contains(s, "answer yn (permission):") })
	keys("y", "Enter")
	waitFor("yn done", func(s string) bool { return rowState(s, "yn") == "done" })
	waitFor("the inbox emptied", func(s string) bool { return strings.Contains(s, "inbox 0") })
	keys("q")
	time.Sleep(300 * time.Millisecond)
	if strings.Contains(screen(), "keep work") {
		keys("k")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if data, err := os.ReadFile(exitFile); err == nil && len(data) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("corral did not exit after quit; the screen:\n%s", screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := headFile(t, dir, "config.txt"); got != "overwritten\n" {
		t.Errorf("config.txt on the head: %q", got)
	}
}
