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

// TestTUIDemoInTmux drives the real binary as a person would: start the demo in tmux,
// see the ten tasks, pause one and see it paused, attach and detach, approve the
// escalated lockfile publish and see the inbox empty, then quit,
// keeping the agents' work, and find nothing left mounted.
func TestTUIDemoInTmux(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("needs tmux to drive the terminal UI")
	}
	bin := filepath.Join(t.TempDir(), "corral")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	session := fmt.Sprintf("corral-e2e-%d", os.Getpid())
	exitFile := filepath.Join(t.TempDir(), "exit")
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err != nil && args[0] != "kill-session" {
			t.Logf("tmux %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	// The shell writes the exit code, then the session ends by itself.
	tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40",
		fmt.Sprintf("%s demo 2>%s.err; echo $? > %s", bin, exitFile, exitFile))
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

	waitFor("ten tasks", func(s string) bool { return strings.Contains(s, "Tasks (10 of 10)") })
	waitFor("slow running", func(s string) bool { return rowState(s, "slow") == "running" })
	keys("/", "slow", "Enter")
	waitFor("the filter", func(s string) bool { return strings.Contains(s, "Tasks /slow (1 of 10)") })
	keys("p")
	waitFor("slow paused", func(s string) bool { return rowState(s, "slow") == "paused" })
	keys("p")
	waitFor("slow resumed", func(s string) bool { return rowState(s, "slow") == "running" })
	keys("Enter")
	waitFor("the attached terminal", func(s string) bool { return strings.Contains(s, "attached to slow-1") })
	keys("C-]")
	waitFor("detached", func(s string) bool { return strings.Contains(s, "detached from slow-1") })
	// tests and lockfile both change go.sum: the later publish waits in the inbox.
	waitFor("the escalation in the inbox", func(s string) bool { return strings.Contains(s, "⚑ inbox 1") })
	keys("Tab", "Tab", "Tab")
	waitFor("the inbox pane", func(s string) bool { return strings.Contains(s, "escalated publish waits") })
	keys("a")
	waitFor("the approval", func(s string) bool { return strings.Contains(s, ": done") && strings.Contains(s, "approve publish") })
	waitFor("the inbox emptied", func(s string) bool { return strings.Contains(s, "inbox 0") })
	keys("q")
	waitFor("the quit question", func(s string) bool { return strings.Contains(s, "keep work") })
	keys("k")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if data, err := os.ReadFile(exitFile); err == nil && len(data) > 0 {
			if code := strings.TrimSpace(string(data)); code != "0" {
				errOut, _ := os.ReadFile(exitFile + ".err")
				t.Fatalf("corral demo exited %s: %s", code, errOut)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("corral demo did not exit after quit; the screen:\n%s", screen())
		}
		time.Sleep(100 * time.Millisecond)
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
