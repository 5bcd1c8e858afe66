package sandbox

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// A command run in a live session sees what the agent sees — its workspace with the
// agent's changes, its private /tmp, its hostname, environment and user — and only the
// session's processes; its exit code and output come back.
func TestSessionExec(t *testing.T) {
	repo, snap := sessionFixture(t)
	hostOnly := fmt.Sprintf("/tmp/corral-exec-host-%d", os.Getpid())
	if err := os.WriteFile(hostOnly, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(hostOnly)
	s := testSession(t, repo, snap, `echo agent-work > changed.txt; echo agent-tmp > /tmp/agent-tmp; echo ready; sleep 60`)
	waitOutput(t, s, "ready")
	script := fmt.Sprintf(`pwd; cat changed.txt /tmp/agent-tmp; hostname; echo base=$CORRAL_BASE
test -e %s && echo host-visible
echo procs=$(ls /proc | grep -c '^[0-9]')
echo oops >&2; exit 3`, hostOnly)
	out, code, err := s.Exec(context.Background(), []string{"/bin/sh", "-c", script})
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 {
		t.Errorf("exit code %d, want 3:\n%s", code, out)
	}
	for _, want := range []string{repo.WorkTree + "\n", "agent-work\nagent-tmp\n", "corral-" + s.ID(), "base=" + snap.Commit, "oops"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "host-visible") {
		t.Errorf("the command saw the host's /tmp:\n%s", out)
	}
	// The session's init, its shell, sleep, and the command's own shell and ls: a
	// handful, never the host's hundreds.
	var procs int
	for _, l := range strings.Split(string(out), "\n") {
		fmt.Sscanf(l, "procs=%d", &procs)
	}
	if procs == 0 || procs > 10 {
		t.Errorf("the command saw %d processes; want only the session's:\n%s", procs, out)
	}
}

// A command runs as the session's user. Cut by its context, or by its session
// ending, it returns an error rather than a made-up exit code, and leaves nothing
// running, not even what it started in the background.
func TestSessionExecEnds(t *testing.T) {
	repo, snap := sessionFixture(t)
	s := testSession(t, repo, snap, `echo ready; sleep 60`, func(c *SessionConfig) {
		c.User = &User{UID: 65534, GID: 65534, Name: "nobody", Home: "/home/nobody"}
	})
	waitOutput(t, s, "ready")
	if out, code, err := s.Exec(context.Background(), []string{"id", "-u"}); err != nil || code != 0 || string(out) != "65534\n" {
		t.Errorf("id -u: %q, exit %d, %v", out, code, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, _, err := s.Exec(ctx, []string{"/bin/sh", "-c", "sleep 31 & sleep 32"}); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Errorf("cut by its context: %v", err)
	}
	if out, _, _ := s.Exec(context.Background(), []string{"ps", "-eo", "args"}); strings.Contains(string(out), "sleep 3") {
		t.Errorf("the cut command's processes live on:\n%s", out)
	}
	if _, code, err := s.Exec(context.Background(), []string{"/bin/sh", "-c", "sleep 33 & exit 0"}); err != nil || code != 0 {
		t.Errorf("background sleep: exit %d, %v", code, err)
	}
	if out, _, _ := s.Exec(context.Background(), []string{"ps", "-eo", "args"}); strings.Contains(string(out), "sleep 33") {
		t.Errorf("what the command left in the background lives on:\n%s", out)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := s.Exec(context.Background(), []string{"sleep", "30"})
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	s.Signal(9)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "ended") {
			t.Errorf("a command whose session ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command outlived its session")
	}
	<-s.Done()
	if _, _, err := s.Exec(context.Background(), []string{"true"}); err == nil || !strings.Contains(err.Error(), "ended") {
		t.Errorf("exec in an ended session: %v", err)
	}
}
