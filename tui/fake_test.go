package tui

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"
)

// fakeFleet is a hand-built Backend: a fixed snapshot, recorded actions, and errors
// to answer with.
type fakeFleet struct {
	mu      sync.Mutex
	snap    Snapshot
	acts    []Action
	errs    map[Verb]error
	notes   map[Verb]string
	events  chan Event
	typed   bytes.Buffer
	outputs map[string]*fakeRing
}

func newFakeFleet() *fakeFleet {
	return &fakeFleet{snap: sampleSnapshot(), errs: map[Verb]error{}, events: make(chan Event, 16),
		outputs: map[string]*fakeRing{"slow-1": {data: []byte("\x1b[1mstep 1\x1b[0m\r\nstep 2\r\nprogress 10%\rprogress 90%\r\n")},
			"tests-1":        {data: []byte("running the suite\r\n--- FAIL: TestTotals\r\nexit 1\r\n")},
			"lane7-1-a1b2c3": {data: []byte("ok  \tshop/pricing\t0.012s\r\n")}}}
}

func (f *fakeFleet) Snapshot() (Snapshot, error)       { return f.snap, nil }
func (f *fakeFleet) Subscribe() (<-chan Event, func()) { return f.events, func() {} }
func (f *fakeFleet) Output(s string) (Output, bool) {
	r, ok := f.outputs[s]
	return r, ok
}
func (f *fakeFleet) Input(string) (io.Writer, bool) { return &f.typed, true }
func (f *fakeFleet) Act(a Action) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acts = append(f.acts, a)
	return f.notes[a.Verb], f.errs[a.Verb]
}

type fakeRing struct{ data []byte }

func (r *fakeRing) Since(off int64) ([]byte, int64) { return r.data[off:], int64(len(r.data)) }
func (r *fakeRing) Changed() <-chan struct{}        { return nil }

var t0 = time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)

// sampleSnapshot is the demo's fleet midway: something in every pane.
func sampleSnapshot() Snapshot {
	row := func(id, state string, sess string, cpu float64, mem uint64, pub string, ago time.Duration) TaskRow {
		r := TaskRow{ID: id, State: state, Session: sess, Attempt: 1, Base: "7d3fc38aa", CPUPercent: cpu, Memory: mem,
			CPULimit: 0.25, MemLimit: 128 << 20, LastPublish: pub, Since: t0.Add(-ago), Lifetime: "one-shot"}
		if sess != "" {
			r.LayerBytes = int64(len(id)) << 10 // a few KiB, like an idle session's layer
		}
		return r
	}
	s := Snapshot{Fleet: "demo", HeadRef: "corral/head", Head: "d51a129ff", CPUBudget: 4, MemBudget: 2 << 30,
		ReservedCPU: 1, ReservedMem: 512 << 20, Usage: map[string][]UsagePoint{}, Taken: t0}
	s.Tasks = []TaskRow{
		row("pricing", "done", "", 0, 0, "accepted", 40*time.Second),
		row("checkout", "running", "checkout-2", 3, 2<<20, "rejected", 5*time.Second),
		row("lockfile", "inbox", "", 0, 0, "escalated", 20*time.Second),
		row("changelog", "done", "", 0, 0, "merged", 30*time.Second),
		row("preview-a", "running", "preview-a-1", 0, 12<<20, "", 50*time.Second),
		row("preview-b", "running", "preview-b-1", 0, 11<<20, "", 50*time.Second),
		row("burner", "running", "burner-1", 24.5, 640<<10, "", 9*time.Second),
		row("slow", "running", "slow-1", 1, 1<<20, "", 9*time.Second),
		row("docs", "queued", "", 0, 0, "", 50*time.Second),
		row("tests", "failed", "", 0, 0, "", 3*time.Second),
	}
	s.Tasks[2].Reason = "publish escalated: go.sum is a lockfile"
	s.Tasks[9].Reason = "killed by the user"
	s.Tasks[9].LastSession = "tests-1"
	s.Tasks[4].Ports = []string{"4173→127.0.0.1:41121"}
	s.Tasks[5].Ports = []string{"4173→127.0.0.1:45089"}
	s.Tasks[6].Throttled = 1200 * time.Millisecond
	s.Tasks[1].Behind = 2 // checkout-2 started before changelog merged
	s.Leases = []Lease{{Port: 4173, Endpoint: "127.0.0.1:41121", Task: "preview-a", Session: "preview-a-1", Since: t0.Add(-50 * time.Second)},
		{Port: 4173, Endpoint: "127.0.0.1:45089", Task: "preview-b", Session: "preview-b-1", Since: t0.Add(-50 * time.Second)}}
	s.Publishes = []Publish{
		{ID: 1, Task: "pricing", Outcome: "accepted", Head: "7d3fc38aa", NewHead: "ad0232eff", Message: "1 path(s)"},
		{ID: 2, Task: "changelog", Outcome: "merged", Head: "ad0232eff", NewHead: "b00b1e5aa", Message: "1 path(s)",
			Lane: "green", LaneSession: "lane7-1-a1b2c3", LaneCommit: "b00b1e5aa"},
		{ID: 3, Task: "checkout", Outcome: "rejected", Head: "b00b1e5aa", Message: "content conflict on pricing/shipping.go",
			Conflicts: []Conflict{{Path: "pricing/shipping.go", Class: "content", MovedBy: 1}}},
		{ID: 4, Task: "lockfile", Outcome: "escalated", Head: "b00b1e5aa", Message: "go.sum is a lockfile", Paths: []string{"go.sum"}},
	}
	s.Inbox = []InboxItem{{Task: "lockfile", Publish: 4, What: "escalated publish waits for approval", Paths: []string{"go.sum"}}}
	for _, sess := range []string{"burner-1", "slow-1"} {
		for i := range 8 {
			s.Usage[sess] = append(s.Usage[sess], UsagePoint{CPUPercent: float64(i * 3), Memory: uint64(i+1) << 20})
		}
	}
	kinds := []string{"task.queued", "session.started", "publish.accepted", "publish.rejected", "task.retrying", "publish.escalated"}
	for i, k := range kinds {
		s.Events = append(s.Events, Event{Seq: int64(i + 1), Time: t0.Add(time.Duration(i) * time.Second), Kind: k,
			Task: s.Tasks[i%len(s.Tasks)].ID, Data: fmt.Sprintf(`{"n":%d}`, i)})
	}
	return s
}
