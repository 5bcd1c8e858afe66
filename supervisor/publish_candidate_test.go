package supervisor_test

import (
	"strings"
	"testing"

	"corral/supervisor"
)

// A candidate (Onto set) is built onto the given commit without moving the head, keeps
// the session's work for rebuilding, stacks onto another candidate, and lands only by
// compare-and-swap from the commit it was built on.
func TestPublishCandidateAndLand(t *testing.T) {
	r := newPubRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	head := r.head()
	req := r.request("one", r.base, map[string]string{"a.txt": "A\n"})
	req.Onto = head
	c1, err := r.pub.Publish(req)
	if err != nil || c1.Outcome != supervisor.OutcomeAccepted || c1.NewHead == "" || c1.Pending == "" || c1.Head != head {
		t.Fatalf("candidate 1: %v %+v", err, c1)
	}
	if r.head() != head {
		t.Fatal("building a candidate moved the head")
	}
	// The next candidate stacks onto the first, as if it had landed.
	req2 := r.request("two", r.base, map[string]string{"b.txt": "B\n"})
	req2.Onto = c1.NewHead
	c2, err := r.pub.Publish(req2)
	if err != nil || c2.NewHead == "" || c2.Head != c1.NewHead {
		t.Fatalf("candidate 2: %v %+v", err, c2)
	}
	if got := run(t, r.dir, "git", "rev-parse", c2.NewHead+"^"); got != c1.NewHead {
		t.Errorf("candidate 2's parent %s, want candidate 1 %s", got, c1.NewHead)
	}
	// Landing out of order fails and moves nothing.
	if err := r.pub.Land(c2.NewHead, head); err == nil || r.head() != head {
		t.Fatalf("landed candidate 2 onto %s: %v (head %s)", head, err, r.head())
	}
	if err := r.pub.Land(c1.NewHead, head); err != nil || r.head() != c1.NewHead {
		t.Fatalf("land candidate 1: %v (head %s)", err, r.head())
	}
	// Candidate 2 rebuilt from its kept work onto the head it would now land on.
	req2.Onto, req2.Pending, req2.Changes = r.head(), c2.Pending, nil
	again, err := r.pub.Publish(req2)
	if err != nil || again.NewHead == "" || again.Head != c1.NewHead {
		t.Fatalf("rebuild: %v %+v", err, again)
	}
	if err := r.pub.Land(again.NewHead, c1.NewHead); err != nil {
		t.Fatal(err)
	}
	if r.show("a.txt") != "A\n" || r.show("b.txt") != "B\n" {
		t.Errorf("head a=%q b=%q, want both candidates' changes", r.show("a.txt"), r.show("b.txt"))
	}
	r.pub.Forget(req2.Session.ID)
	if out, _ := r.repo.Git("for-each-ref", "refs/corral/candidates/"+req2.Session.ID); strings.TrimSpace(out) != "" {
		t.Errorf("candidate ref kept after Forget: %s", out)
	}
}
