package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestTUIDemoInTmux drives the real binary as a person would: start the demo in tmux,
// see the ten tasks, pause one and see it paused, attach and detach, approve the
// escalated lockfile publish and see the inbox empty, then quit,
// keeping the agents' work, and find nothing left mounted.
func TestTUIDemoInTmux(t *testing.T) {
	requireRoot(t)
	requireTmux(t)
	bin := buildCorral(t)
	term := startTmux(t, "e2e", 120, 40, bin+" demo")

	term.waitFor("ten tasks", func(s string) bool { return strings.Contains(s, "Tasks (10 of 10)") })
	// A finished task shows its last session's terminal, read from its recording.
	term.waitFor("pricing done", func(s string) bool { return rowState(s, "pricing") == "done" })
	term.keys("/", "pricing", "Enter")
	term.waitFor("pricing's recorded terminal", func(s string) bool {
		return strings.Contains(s, "Tasks /pricing (1 of 10)") && strings.Contains(s, "pricing-1 as it ended") &&
			strings.Contains(s, "[pricing]")
	})
	term.keys("Escape")
	// Wait for it: an ESC read together with the next "/" is alt+/.
	term.waitFor("the filter cleared", func(s string) bool { return strings.Contains(s, "Tasks (10 of 10)") })
	term.waitFor("slow running", func(s string) bool { return rowState(s, "slow") == "running" })
	term.keys("/", "slow", "Enter")
	term.waitFor("the filter", func(s string) bool { return strings.Contains(s, "Tasks /slow (1 of 10)") })
	term.keys("p")
	term.waitFor("slow paused", func(s string) bool { return rowState(s, "slow") == "paused" })
	term.keys("p")
	term.waitFor("slow resumed", func(s string) bool { return rowState(s, "slow") == "running" })
	term.keys("Enter")
	term.waitFor("the attached terminal", func(s string) bool { return strings.Contains(s, "attached to slow-1") })
	term.keys("C-]")
	term.waitFor("detached", func(s string) bool { return strings.Contains(s, "detached from slow-1") })
	// tests and lockfile both change go.sum: the later publish waits in the inbox.
	term.waitFor("the escalation in the inbox", func(s string) bool { return strings.Contains(s, "⚑ inbox 1") })
	term.keys("Tab", "Tab", "Tab")
	term.waitFor("the inbox pane", func(s string) bool { return strings.Contains(s, "escalated publish waits") })
	term.keys("a")
	term.waitFor("the approval", func(s string) bool { return strings.Contains(s, ": done") && strings.Contains(s, "approve publish") })
	term.waitFor("the inbox emptied", func(s string) bool { return strings.Contains(s, "inbox 0") })
	term.keys("q")
	term.waitFor("the quit question", func(s string) bool { return strings.Contains(s, "keep work") })
	term.keys("k")
	if code, errOut := term.waitExit("corral demo after quit", 30*time.Second); code != "0" {
		t.Fatalf("corral demo exited %s: %s", code, errOut)
	}
	mounts, _ := os.ReadFile("/proc/mounts")
	if strings.Contains(string(mounts), "corral-demo-") {
		t.Fatalf("the demo left mounts behind:\n%s", mounts)
	}
}

// rowState is the STATE cell of a task's row in the tasks table on screen.
func rowState(screen, task string) string {
	for _, line := range strings.Split(screen, "\n") {
		f := strings.Fields(strings.Trim(line, "│ "))
		if len(f) > 1 && f[0] == task {
			return f[1]
		}
	}
	return ""
}
