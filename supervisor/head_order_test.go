package supervisor

import "testing"

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
