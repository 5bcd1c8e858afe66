package supervisor

import "time"

// Lane is how a fleet's integration lane runs its test command and steers the fleet
// with the result (the plan's [fleet] lane keys).
type Lane struct {
	Gating   string        `json:"gating"`   // "post": publishes land, the lane verifies after; "pre": only green candidates land
	OnRed    string        `json:"on_red"`   // "repair", "revert" or "hold"
	Narrow   string        `json:"narrow"`   // while red: "stop" admits nothing new, "paths" only tasks touching the culprit's paths
	Reruns   int           `json:"reruns"`   // times a red result is re-run before it counts
	Parallel int           `json:"parallel"` // pre gating: candidates tested at once
	Timeout  time.Duration `json:"timeout"`  // a test run longer than this is red (0: none)
	CPU      float64       `json:"cpu"`      // cores of a test sandbox (0: no limit)
	Memory   int64         `json:"memory"`   // bytes of a test sandbox (0: no limit)
	// EveryHead tests each landed head on its own instead of batching what landed
	// while the lane was busy: more runs, no bisection (and the benchmark's baseline).
	EveryHead bool `json:"every_head,omitempty"`
}

// Lane policies.
const (
	GatingPost = "post"
	GatingPre  = "pre"

	OnRedRepair = "repair"
	OnRedRevert = "revert"
	OnRedHold   = "hold"

	NarrowStop  = "stop"
	NarrowPaths = "paths"
)

// DefaultLane is the lane of a plan that sets no lane key.
func DefaultLane() Lane {
	return Lane{Gating: GatingPost, OnRed: OnRedRepair, Narrow: NarrowStop, Reruns: 1, Parallel: 2}
}

// Lane outcomes, per tested head (LaneRun.Outcome).
const (
	LaneRunning = "running"
	LaneGreen   = "green"   // the test passed
	LaneRed     = "red"     // it failed every time it ran; Culprit names the publish that turned the head red
	LaneFlaky   = "flaky"   // it failed, then passed on a re-run: reported, never blamed
	LaneSkipped = "skipped" // superseded: a later head's run covered it
)

// Lane run purposes (LaneRun.Kind).
const (
	LaneKindHead      = "head"      // the newest head, covering every publish since the last verdict
	LaneKindBisect    = "bisect"    // a head between a green and a red one, to name the culprit
	LaneKindCandidate = "candidate" // pre gating: a merged tree not on the head yet
)

// LaneRun is the lane's verdict on one commit: a head (post gating) or a candidate
// (pre gating). Each run is a fresh one-shot sandbox over a snapshot of Commit.
type LaneRun struct {
	ID      int64     `json:"id"`
	Kind    string    `json:"kind"`
	Commit  string    `json:"commit"`
	Publish int64     `json:"publish,omitempty"` // the publish whose commit this is
	Batch   []int64   `json:"batch,omitempty"`   // head runs: the publishes it covers, oldest first
	Outcome string    `json:"outcome"`
	Culprit int64     `json:"culprit,omitempty"` // red: the first publish whose head failed
	Runs    int       `json:"runs"`              // executions, re-runs included
	Session string    `json:"session,omitempty"` // the last execution's sandbox id
	Output  string    `json:"output,omitempty"`  // red or flaky: the failing run's output (its tail)
	Record  string    `json:"record,omitempty"`  // host path of the failing run's full output
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
}

// Lane event kinds.
const (
	EvLaneStarted  = "lane.started"  // a run began: data has run, kind, commit, batch
	EvLaneGreen    = "lane.green"    // a commit passed
	EvLaneRed      = "lane.red"      // a commit failed twice: data has the culprit once known
	EvLaneFlaky    = "lane.flaky"    // a commit failed, then passed
	EvLaneSkipped  = "lane.skipped"  // a head a later run covered
	EvLaneCulprit  = "lane.culprit"  // bisection named the publish that turned the head red
	EvLaneNarrowed = "lane.narrowed" // admission narrowed while the head is red
	EvLaneReopened = "lane.reopened" // the head is green again: admission reopened
	EvLaneRepair   = "lane.repair"   // a repair task was opened for the culprit's task
	EvLaneReverted = "lane.reverted" // the culprit's commit was reverted by a new commit on the head
	EvLaneHeld     = "lane.held"     // the red head waits for a human
	EvAcceptFailed = "accept.failed" // a task's accept check failed in its session: nothing published
)
