package supervisor

import (
	"encoding/json"
	"time"
)

// TaskState is where a task is in its life. A task ends done, failed or discarded, or
// waits in the inbox for a human.
type TaskState string

const (
	TaskQueued      TaskState = "queued"      // waiting for admission (or its dependencies)
	TaskRunning     TaskState = "running"     // a session of it is live
	TaskPaused      TaskState = "paused"      // its session is frozen
	TaskPublishing  TaskState = "publishing"  // its changeset is in the publish queue
	TaskRetrying    TaskState = "retrying"    // an attempt failed; another is queued
	TaskInterrupted TaskState = "interrupted" // the supervisor died under it; its layer is kept
	TaskInbox       TaskState = "inbox"       // waits for a human (escalated, out of retries)
	TaskDone        TaskState = "done"        // its work is on the head, or it had nothing to publish
	TaskFailed      TaskState = "failed"
	TaskDiscarded   TaskState = "discarded"
)

// Ended reports whether the task will not run again without a human.
func (s TaskState) Ended() bool {
	return s == TaskDone || s == TaskFailed || s == TaskDiscarded
}

// SessionState is where one attempt is.
type SessionState string

const (
	SessionStarting    SessionState = "starting"
	SessionRunning     SessionState = "running"
	SessionPaused      SessionState = "paused"
	SessionExited      SessionState = "exited"      // the agent exited; layer kept until published or discarded
	SessionPublished   SessionState = "published"   // its changeset went to publish; sandbox destroyed
	SessionFailed      SessionState = "failed"      // non-zero exit; layer kept for inspection
	SessionInterrupted SessionState = "interrupted" // its process vanished with a supervisor; layer kept
	SessionDiscarded   SessionState = "discarded"   // killed and destroyed, layer dropped
	SessionRebased     SessionState = "rebased"     // its layer moved onto a newer head; a new session continues it
)

// Live reports whether the session's processes should exist.
func (s SessionState) Live() bool {
	return s == SessionStarting || s == SessionRunning || s == SessionPaused
}

// Lifetime says whether a task's session ends with its agent or lives until discarded.
type Lifetime string

const (
	OneShot    Lifetime = "one-shot"
	Persistent Lifetime = "persistent"
)

// Admission limits of a fleet.
type Admission struct {
	MaxRunning int           `json:"max_running"` // sessions running at once
	CPU        float64       `json:"cpu"`         // cores the fleet may reserve (0: the host's)
	Memory     int64         `json:"memory"`      // bytes the fleet may reserve (0: most of the host's)
	Interval   time.Duration `json:"interval"`    // at most one launch per interval ("grow in steps")
	Overlap    string        `json:"overlap"`     // what overlapping intents do: "warn" or "serialize"
}

// Fleet is one repository, a base revision, and the shared head.
type Fleet struct {
	Name      string    `json:"name"`
	Repo      string    `json:"repo"` // work tree path
	BaseRef   string    `json:"base_ref"`
	Base      string    `json:"base"`     // commit the head started from
	HeadRef   string    `json:"head_ref"` // e.g. corral/head
	Head      string    `json:"head"`     // current head commit
	Plan      string    `json:"plan"`     // plan file path, "" when added by hand
	Test      string    `json:"test"`     // integration test command
	Lane      Lane      `json:"lane"`     // how the integration lane runs Test and steers the fleet
	Admission Admission `json:"admission"`
	Created   time.Time `json:"created"`
}

// Task is a unit of work as the plan (or `corral add`) declared it, and where it is.
type Task struct {
	ID       string   `json:"id"`
	Prompt   string   `json:"prompt"`
	Agent    string   `json:"agent"` // command template, run by /bin/sh -c
	Lifetime Lifetime `json:"lifetime"`
	Intent   []string `json:"intent"` // path globs it declares it will touch
	Ports    []int    `json:"ports"`
	CPU      float64  `json:"cpu"`    // cores reserved and enforced
	Memory   int64    `json:"memory"` // bytes reserved and enforced
	Pids     int64    `json:"pids"`
	Network  string   `json:"network"` // "private" or "host"
	EnvFiles []string `json:"env_files"`
	Priority int      `json:"priority"`          // higher starts first
	After    []string `json:"after"`             // tasks that must be done first
	Retries  int      `json:"retries"`           // further attempts after a failed one
	Accept   string   `json:"accept,omitempty"`  // acceptance check run in the session before it publishes
	Repairs  int64    `json:"repairs,omitempty"` // the red lane run this task was opened to repair
	// Budget caps the task's model spend over all its attempts; over it, its session
	// pauses and the task goes to the inbox.
	BudgetTokens int64     `json:"budget_tokens,omitempty"`
	BudgetCost   float64   `json:"budget_cost,omitempty"`
	State        TaskState `json:"state"`
	Attempts     int       `json:"attempts"`
	Reason       string    `json:"reason,omitempty"` // why it is in its state (e.g. why it cannot be admitted)
	Created      time.Time `json:"created"`
	Updated      time.Time `json:"updated"`
}

// Endpoint is where a session's port is reachable from the host.
type Endpoint struct {
	Port int    `json:"port"`
	Host string `json:"host"`
}

// Session is one attempt at a task.
type Session struct {
	ID        string       `json:"id"` // <task>-<attempt>, never reused
	Task      string       `json:"task"`
	Attempt   int          `json:"attempt"`
	Base      string       `json:"base"` // commit it started from
	State     SessionState `json:"state"`
	Pid       int          `json:"pid"` // the init's host pid while live
	Cgroup    string       `json:"cgroup"`
	Layer     string       `json:"layer"` // private upper dir
	Recording string       `json:"recording"`
	ExitCode  *int         `json:"exit_code,omitempty"`
	Started   time.Time    `json:"started"`
	Ended     time.Time    `json:"ended,omitzero"`
	Resumes   string       `json:"resumes,omitempty"` // the interrupted session whose layer it continues
}

// Lease is a port (or named resource) held by a session.
type Lease struct {
	ID       int64     `json:"id"`
	Session  string    `json:"session"`
	Task     string    `json:"task"`
	Name     string    `json:"name,omitempty"`
	Port     int       `json:"port"`     // inside the sandbox
	Endpoint string    `json:"endpoint"` // outside it, e.g. 127.0.0.1:41234
	Start    time.Time `json:"start"`
	End      time.Time `json:"end,omitzero"`
}

// Usage is one telemetry sample of a session.
type Usage struct {
	Session    string        `json:"session"`
	Time       time.Time     `json:"time"`
	CPU        time.Duration `json:"cpu"`         // cumulative CPU time
	CPUPercent float64       `json:"cpu_percent"` // of one core, since the previous sample
	Memory     uint64        `json:"memory"`
	MemoryPeak uint64        `json:"memory_peak"`
	OOMKills   uint64        `json:"oom_kills"`
	Throttled  time.Duration `json:"throttled"`
	Pids       uint64        `json:"pids"`
}

// ModelCall is one model API call a session made through the gateway, as metered:
// tokens by category (priced differently, so kept apart), its cost from the plan's
// price table, latency, and what the provider's rate-limit headers said.
type ModelCall struct {
	ID         int64         `json:"id"`
	Session    string        `json:"session"`
	Task       string        `json:"task"`
	Time       time.Time     `json:"time"`     // when the call started
	Upstream   string        `json:"upstream"` // anthropic or openai
	Model      string        `json:"model"`
	Status     int           `json:"status"`
	Streamed   bool          `json:"streamed"`
	Input      int64         `json:"input"` // uncached input tokens
	Output     int64         `json:"output"`
	CacheRead  int64         `json:"cache_read"`
	CacheWrite int64         `json:"cache_write"`
	Cost       float64       `json:"cost"`
	Latency    time.Duration `json:"latency"`
	// Rate-limit headers: tokens remaining (-1 unknown), the earliest reset, the
	// window's utilisation (0..1, -1 unknown), and every such header as sent.
	Remaining   int64             `json:"remaining"`
	Reset       time.Time         `json:"reset,omitzero"`
	Utilization float64           `json:"utilization"`
	Limits      map[string]string `json:"limits,omitempty"`
}

// Tokens is the call's total over every category.
func (c ModelCall) Tokens() int64 { return c.Input + c.Output + c.CacheRead + c.CacheWrite }

// Publish is a session's changeset offered to the shared head, and its outcome.
type Publish struct {
	ID      int64     `json:"id"`
	Task    string    `json:"task"`
	Session string    `json:"session"`
	Outcome string    `json:"outcome"` // accepted, merged, rejected, escalated, empty, or queued
	Base    string    `json:"base"`    // the session's base
	Head    string    `json:"head"`    // head before
	NewHead string    `json:"new_head,omitempty"`
	Paths   []string  `json:"paths"`
	Message string    `json:"message,omitempty"`
	Time    time.Time `json:"time"`
}

// Conflict is one reason a publish was rejected.
type Conflict struct {
	ID      int64  `json:"id"`
	Publish int64  `json:"publish"`
	Path    string `json:"path"`
	Class   string `json:"class"` // content, modify-delete, delete-modify, add-add, binary, type, protected
	Base    string `json:"base"`
	Ours    string `json:"ours"`
	Theirs  string `json:"theirs"`
	MovedBy int64  `json:"moved_by,omitempty"` // the publish that last moved the path
}

// Approval is a human's decision on something in the inbox.
type Approval struct {
	ID       int64     `json:"id"`
	Publish  int64     `json:"publish"`
	Decision string    `json:"decision"` // approve or deny
	Reason   string    `json:"reason,omitempty"`
	Time     time.Time `json:"time"`
}

// Event is an append-only, numbered record of a state change. Kinds are noun.verb.
type Event struct {
	Seq     int64           `json:"seq"`
	Time    time.Time       `json:"time"`
	Kind    string          `json:"kind"`
	Task    string          `json:"task,omitempty"`
	Session string          `json:"session,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Event kinds the supervisor emits (DESIGN.md lists the contract's minimum).
const (
	EvFleetStarted      = "fleet.started"
	EvFleetFinished     = "fleet.finished"
	EvTaskQueued        = "task.queued"
	EvTaskBlocked       = "task.blocked" // cannot be admitted (yet, or ever): data says why
	EvTaskRetrying      = "task.retrying"
	EvTaskDone          = "task.done"
	EvTaskFailed        = "task.failed"
	EvTaskDiscarded     = "task.discarded"
	EvTaskInterrupted   = "task.interrupted"
	EvIntentOverlap     = "intent.overlap"
	EvSessionStarted    = "session.started"
	EvSessionExited     = "session.exited"
	EvSessionPaused     = "session.paused"
	EvSessionResumed    = "session.resumed"
	EvSessionKilled     = "session.killed"
	EvSessionDiscarded  = "session.discarded"
	EvSessionOOM        = "session.oom"
	EvSessionRebased    = "session.rebased"
	EvLeaseGranted      = "lease.granted"
	EvLeaseReleased     = "lease.released"
	EvPublishQueued     = "publish.queued"
	EvPublishAccepted   = "publish.accepted"
	EvPublishMerged     = "publish.merged"
	EvPublishRejected   = "publish.rejected"
	EvPublishEscalated  = "publish.escalated"
	EvPublishEmpty      = "publish.empty"
	EvSupervisorRecover = "supervisor.recovered"

	// The model gateway and the quota policy.
	EvModelCall      = "model.call"        // a metered call: tokens, cost, latency
	EvEgressRefused  = "egress.refused"    // a host outside gateway.allow
	EvQuotaSoft      = "quota.soft"        // admission stops
	EvQuotaHard      = "quota.hard"        // running sessions pause
	EvQuotaReset     = "quota.reset"       // a new window: paused sessions resume, staged
	EvQuotaSampled   = "quota.sampled"     // the probe command's reading
	EvBudgetExceeded = "budget.exceeded"   // a task went over its budget: paused, to the inbox
	EvUpstreamSwitch = "upstream.switched" // the fallback upstream took over (or the primary came back)
)
