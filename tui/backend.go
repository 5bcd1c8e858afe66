package tui

import (
	"io"
	"time"
)

// Backend is what the TUI needs of a running fleet. main adapts the supervisor to it,
// which keeps this package free of the store and the sandbox (DESIGN.md's import
// rule) and lets tests drive the UI with a hand-built fleet. Every method may block
// briefly, so the TUI calls them only from commands, never from Update.
type Backend interface {
	// Snapshot is a consistent picture of the fleet for every pane.
	Snapshot() (Snapshot, error)
	// Subscribe returns live events; a slow reader loses some (the next snapshot
	// catches up), it never slows the fleet.
	Subscribe() (<-chan Event, func())
	// Output is a live session's terminal output ring.
	Output(session string) (Output, bool)
	// Input is a live session's terminal keyboard.
	Input(session string) (io.Writer, bool)
	// Act performs a user action and says what came of it in a line ("" for plain
	// success). An error wrapping a "not applicable" reason is shown as why the key
	// does not apply.
	Act(Action) (string, error)
}

// Output is a session's terminal output: bytes after an offset, and a signal when new
// bytes arrive.
type Output interface {
	Since(int64) ([]byte, int64)
	Changed() <-chan struct{}
}

// Verb names a user action.
type Verb string

const (
	VerbPause   Verb = "pause"
	VerbResume  Verb = "resume"
	VerbDiscard Verb = "discard"
	VerbKill    Verb = "kill"
	VerbRetry   Verb = "retry"
	VerbPublish Verb = "publish now"
	VerbRebase  Verb = "rebase"
	// VerbFallback moves the fleet's model calls to the plan's fallback upstreams and
	// resumes the sessions the quota paused.
	VerbFallback Verb = "fallback"
	VerbApprove  Verb = "approve"
	VerbDeny     Verb = "deny"
	VerbAdd      Verb = "add task"
	VerbAnswer   Verb = "answer" // an agent's inbox item (answer.go)
)

// Action is one user action on a task or a publish.
type Action struct {
	Verb    Verb
	Task    string
	Publish int64
	Reason  string // deny's reason; add's prompt; an answer's text
	Item    int64  // the agent inbox item an answer is for
}

// Snapshot is the fleet as the panes show it.
type Snapshot struct {
	Fleet       string
	HeadRef     string
	Head        string
	CPUBudget   float64 // cores the fleet may reserve (0: the host's)
	MemBudget   int64
	ReservedCPU float64
	ReservedMem int64
	Tasks       []TaskRow
	Leases      []Lease
	Publishes   []Publish
	Usage       map[string][]UsagePoint // by session, oldest first
	Inbox       []InboxItem
	Events      []Event // recent, oldest first
	Taken       time.Time
	Lane        LaneStatus // the integration lane; zero when the fleet has no test
	// Model spend through the gateway, and the fleet quota (nil without one).
	ModelCalls  int
	ModelTokens int64
	ModelCost   float64
	Quota       *Quota
	// FallbackReady: the plan names a fallback upstream the fleet is not on yet.
	FallbackReady bool
}

// Quota is where the fleet stands in its provider's usage window.
type Quota struct {
	Fraction   float64 // of the window used
	Soft, Hard float64
	Level      string // ok, soft, hard
	Window     time.Duration
	Reset      time.Time
	Fallback   bool // on the fallback upstream
}

// LaneStatus is the integration lane's verdict on the head, for the header.
type LaneStatus struct {
	Outcome  string // green, red, flaky, testing, untested; "" without a lane
	Culprit  int64  // red: the publish blamed
	Task     string // red: its task
	Narrowed string // red: how admission is narrowed (stop, paths)
	Queue    int    // pre gating: candidates waiting
}

// TaskRow is one task with its live session's figures.
type TaskRow struct {
	ID       string
	State    string
	Reason   string
	Lifetime string
	Attempt  int
	Session  string // live session, "" when none
	// LastSession is the task's most recent ended session when it has no live one:
	// the session pane shows its recorded terminal as it ended.
	LastSession string
	Base        string
	Behind      int // commits the head has moved past Base
	CPUPercent  float64
	CPULimit    float64
	Memory      uint64
	MemLimit    int64
	OOMKills    uint64
	Throttled   time.Duration
	Ports       []string // "4173→127.0.0.1:41234"
	LayerBytes  int64    // disk the live session's private layer takes
	LastPublish string
	Since       time.Time // when it entered its state
	// Model spend over the task's attempts, and its budgets (0: none).
	ModelTokens  int64
	ModelCost    float64
	BudgetTokens int64
	BudgetCost   float64
}

// Lease is a port held by a session.
type Lease struct {
	Port     int
	Endpoint string
	Task     string
	Session  string
	Since    time.Time
}

// Publish is a publish outcome; a rejected one carries its conflicts.
type Publish struct {
	ID        int64
	Task      string
	Session   string
	Outcome   string
	Head      string
	NewHead   string
	Message   string
	Paths     []string
	Conflicts []Conflict
	Time      time.Time
	Decided   string // approve/deny once a human decided an escalation
	Lane      string // the lane's verdict on the commit it landed (green, red, flaky, skipped, running)
	Culprit   bool   // the lane blamed this publish for turning the head red
	// LaneSession is the test sandbox of the lane's latest run over this publish, live
	// while it runs, then recorded: the session pane shows it while the Publishes pane
	// has focus.
	LaneSession string
	LaneCommit  string // the commit that run tested
}

// Conflict is one reason a publish was rejected.
type Conflict struct {
	Path    string
	Class   string
	MovedBy int64
}

// UsagePoint is one telemetry sample.
type UsagePoint struct {
	CPUPercent float64
	Memory     uint64
}

// InboxItem is something waiting on a human.
type InboxItem struct {
	Task    string
	Publish int64 // an escalated publish to approve or deny; 0 otherwise
	What    string
	Paths   []string
	Diff    []string // an escalated publish's diff against its base, a few dozen lines at most
	// An agent waiting on a human (a prompt noticed on its terminal, or `corral ctl
	// ask`): the item to answer, its kind (needs input, permission, done,
	// rate-limited, handoff) and the agent's last screen.
	Item   int64
	Kind   string
	Screen []string
}

// Event is one fleet event, for the timeline.
type Event struct {
	Seq     int64
	Time    time.Time
	Kind    string
	Task    string
	Session string
	Data    string
}
