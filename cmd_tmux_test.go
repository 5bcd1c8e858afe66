package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tmuxTerm is a command of the real binary in a detached tmux session of a fixed
// size, driven as a person at a terminal would: keys in, the screen out. The tests
// that drive the TUI end to end share it so they start, read, wait and clean up
// the same way.
type tmuxTerm struct {
	t        *testing.T
	session  string
	exitFile string // the shell writes the command's exit status here when it ends
}

// requireTmux skips a test that needs tmux to drive a terminal UI. Call it before
// expensive setup, so a host without tmux skips at once.
func requireTmux(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("needs tmux to drive the terminal UI")
	}
}

// buildCorral builds the binary under test into a temporary directory.
func buildCorral(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "corral")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// startTmux runs the shell command in a new tmux session of width×height named
// after name and this process, and kills the session when the test ends. The
// command's stderr goes to a file waitExit reports.
func startTmux(t *testing.T, name string, width, height int, command string) *tmuxTerm {
	t.Helper()
	tt := &tmuxTerm{
		t:        t,
		session:  fmt.Sprintf("corral-%s-%d", name, os.Getpid()),
		exitFile: filepath.Join(t.TempDir(), "exit"),
	}
	// The shell writes the exit code, then the session ends by itself.
	tt.tmux("new-session", "-d", "-s", tt.session, "-x", strconv.Itoa(width), "-y", strconv.Itoa(height),
		fmt.Sprintf("%s 2>%s.err; echo $? > %s", command, tt.exitFile, tt.exitFile))
	t.Cleanup(func() { tt.tmux("kill-session", "-t", tt.session) })
	return tt
}

func (tt *tmuxTerm) tmux(args ...string) string {
	out, err := exec.Command("tmux", args...).CombinedOutput()
	if err != nil && args[0] != "kill-session" {
		tt.t.Logf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

// screen is what the pane shows now.
func (tt *tmuxTerm) screen() string { return tt.tmux("capture-pane", "-p", "-t", tt.session) }

// keys types tmux key names (send-keys syntax: "Enter", "C-]", "Tab" or text).
func (tt *tmuxTerm) keys(k ...string) {
	tt.tmux(append([]string{"send-keys", "-t", tt.session}, k...)...)
}

// waitFor polls the screen until ok holds, and fails the test with the screen when
// it does not within 30 seconds.
func (tt *tmuxTerm) waitFor(what string, ok func(string) bool) {
	tt.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if ok(tt.screen()) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tt.t.Fatalf("never saw %s; the screen:\n%s", what, tt.screen())
}

// waitExit waits up to timeout for the command to end and returns its exit status
// and what it wrote to stderr; it fails the test with the screen when the command
// is still running.
func (tt *tmuxTerm) waitExit(what string, timeout time.Duration) (code, stderr string) {
	tt.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if data, err := os.ReadFile(tt.exitFile); err == nil && len(data) > 0 {
			errOut, _ := os.ReadFile(tt.exitFile + ".err")
			return strings.TrimSpace(string(data)), string(errOut)
		}
		if time.Now().After(deadline) {
			tt.t.Fatalf("%s did not exit; the screen:\n%s", what, tt.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// has is a waitFor condition: the screen contains sub.
func has(sub string) func(string) bool {
	return func(s string) bool { return strings.Contains(s, sub) }
}
