package supervisor

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"corral/sandbox"
)

// Outcomes can be recorded out of landing order: here tests' approval (h2→h3) was
// recorded before pricing's publish (h1→h2), whose outcome was still on its way. The
// replay follows the records' chain: pricing's head is two commits past the base,
// and the head never goes back from h3 to h2.
func TestHeadOrderIsLandingOrder(t *testing.T) {
	pubs := []Publish{
		{ID: 1, Task: "lockfile", Outcome: OutcomeAccepted, Head: "h0", NewHead: "h1", Time: at(1)},
		{ID: 2, Task: "tests", Outcome: OutcomeMerged, Head: "h2", NewHead: "h3", Time: at(2)},
		{ID: 3, Task: "pricing", Outcome: OutcomeAccepted, Head: "h1", NewHead: "h2", Time: at(3)},
	}
	events := []Event{
		ev(1, EvPublishAccepted, "lockfile", "lockfile-1", map[string]any{"publish": 1, "new_head": "h1"}),
		ev(2, EvPublishApproved, "tests", "tests-1", map[string]any{"publish": 2, "outcome": "merged", "new_head": "h3"}),
		ev(3, EvPublishAccepted, "pricing", "pricing-1", map[string]any{"publish": 3, "new_head": "h2"}),
	}
	for i := range events {
		events[i].Seq = int64(i + 1)
	}
	h := NewHistory(Fleet{Name: "f", Base: "h0", Head: "h3", Created: t0}, nil, nil, nil, pubs, nil, nil, events)
	for head, want := range map[string]int{"h1": 1, "h2": 2, "h3": 3} {
		if n, ok := h.Behind("h0", head); !ok || n != want {
			t.Errorf("Behind(h0, %s) = %d, %v; want %d", head, n, ok, want)
		}
	}
	if got := h.At(at(4)).State.Fleet.Head; got != "h3" {
		t.Errorf("head after every outcome = %s, want h3 (the last to land)", got)
	}
	if got := h.At(at(2.5)).State.Fleet.Head; got != "h3" {
		t.Errorf("head after the approval = %s, want h3", got)
	}
}

// The supervisor's recorded head follows landing order too: an outcome that arrives
// after a later head was recorded does not take the head back.
func TestAdvanceHeadNeverGoesBack(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	var c []string
	for i := range 4 {
		git("commit", "-q", "--allow-empty", "-m", "c"+string(rune('0'+i)))
		c = append(c, git("rev-parse", "HEAD"))
	}
	repo, err := sandbox.OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &Supervisor{repo: repo, fleet: Fleet{Head: c[0]}}
	s.advanceHead(PublishResult{Head: c[1], NewHead: c[2]}) // landed second, arrives first
	if s.fleet.Head != c[2] {
		t.Fatalf("head %.7s, want %.7s", s.fleet.Head, c[2])
	}
	s.advanceHead(PublishResult{Head: c[0], NewHead: c[1]}) // landed first, arrives late
	if s.fleet.Head != c[2] {
		t.Errorf("a late outcome took the head back to %.7s", s.fleet.Head)
	}
	s.advanceHead(PublishResult{Head: c[2], NewHead: c[3]})
	if s.fleet.Head != c[3] {
		t.Errorf("head %.7s, want %.7s", s.fleet.Head, c[3])
	}
	s.advanceHead(PublishResult{Outcome: OutcomeRejected})
	if s.fleet.Head != c[3] {
		t.Errorf("a rejection moved the head to %q", s.fleet.Head)
	}
}
