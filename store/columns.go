package store

import (
	"database/sql"
	"encoding/json"

	"corral/supervisor"
)

// Each record has its column list, its arguments in that order, and its scan in that
// order, side by side here so a new field is added to all three at once.

var fleetCols = []string{"id", "name", "repo", "base_ref", "base", "head_ref", "head", "plan_file", "test",
	"max_running", "cpu", "memory", "interval", "overlap", "created", "lane"}

func fleetArgs(f supervisor.Fleet) ([]any, error) {
	a := f.Admission
	lane, err := jsonText("lane", f.Lane)
	if err != nil {
		return nil, err
	}
	return []any{1, f.Name, f.Repo, f.BaseRef, f.Base, f.HeadRef, f.Head, f.Plan, f.Test,
		a.MaxRunning, a.CPU, a.Memory, int64(a.Interval), a.Overlap, nanos(f.Created), lane}, nil
}

func scanFleet(s scanner) (supervisor.Fleet, error) {
	var (
		f        supervisor.Fleet
		id       int
		interval int64
		created  sql.NullInt64
		lane     string
	)
	a := &f.Admission
	err := s.Scan(&id, &f.Name, &f.Repo, &f.BaseRef, &f.Base, &f.HeadRef, &f.Head, &f.Plan, &f.Test,
		&a.MaxRunning, &a.CPU, &a.Memory, &interval, &a.Overlap, &created, &lane)
	if err != nil {
		return f, err
	}
	a.Interval = durationOf(interval)
	f.Created = fromNanos(created)
	return f, fromJSON("lane", lane, &f.Lane)
}

var taskCols = []string{"id", "prompt", "agent", "lifetime", "intent", "ports", "cpu", "memory", "pids",
	"network", "env_files", "priority", "after_tasks", "retries", "state", "attempts", "reason",
	"created", "updated", "budget_tokens", "budget_cost", "accept", "repairs"}

func taskArgs(t supervisor.Task) ([]any, error) {
	intent, err := jsonText("intent", t.Intent)
	if err != nil {
		return nil, err
	}
	ports, err := jsonText("ports", t.Ports)
	if err != nil {
		return nil, err
	}
	env, err := jsonText("env_files", t.EnvFiles)
	if err != nil {
		return nil, err
	}
	after, err := jsonText("after", t.After)
	if err != nil {
		return nil, err
	}
	return []any{t.ID, t.Prompt, t.Agent, string(t.Lifetime), intent, ports, t.CPU, t.Memory, t.Pids,
		t.Network, env, t.Priority, after, t.Retries, string(t.State), t.Attempts, t.Reason,
		nanos(t.Created), nanos(t.Updated), t.BudgetTokens, t.BudgetCost, t.Accept, t.Repairs}, nil
}

func scanTask(s scanner) (supervisor.Task, error) {
	var (
		t                         supervisor.Task
		intent, ports, env, after string
		created, updated          sql.NullInt64
	)
	err := s.Scan(&t.ID, &t.Prompt, &t.Agent, &t.Lifetime, &intent, &ports, &t.CPU, &t.Memory, &t.Pids,
		&t.Network, &env, &t.Priority, &after, &t.Retries, &t.State, &t.Attempts, &t.Reason,
		&created, &updated, &t.BudgetTokens, &t.BudgetCost, &t.Accept, &t.Repairs)
	if err != nil {
		return t, err
	}
	t.Created, t.Updated = fromNanos(created), fromNanos(updated)
	for _, c := range []struct {
		what, text string
		v          any
	}{{"intent", intent, &t.Intent}, {"ports", ports, &t.Ports}, {"env_files", env, &t.EnvFiles}, {"after", after, &t.After}} {
		if err := fromJSON(c.what, c.text, c.v); err != nil {
			return t, err
		}
	}
	return t, nil
}

var sessionCols = []string{"id", "task", "attempt", "base", "state", "pid", "cgroup", "layer", "recording",
	"exit_code", "started", "ended", "resumes"}

func sessionArgs(s supervisor.Session) []any {
	var exit any
	if s.ExitCode != nil {
		exit = *s.ExitCode
	}
	return []any{s.ID, s.Task, s.Attempt, s.Base, string(s.State), s.Pid, s.Cgroup, s.Layer, s.Recording,
		exit, nanos(s.Started), nanos(s.Ended), s.Resumes}
}

func scanSession(sc scanner) (supervisor.Session, error) {
	var (
		s              supervisor.Session
		exit           sql.NullInt64
		started, ended sql.NullInt64
	)
	err := sc.Scan(&s.ID, &s.Task, &s.Attempt, &s.Base, &s.State, &s.Pid, &s.Cgroup, &s.Layer, &s.Recording,
		&exit, &started, &ended, &s.Resumes)
	if exit.Valid {
		code := int(exit.Int64)
		s.ExitCode = &code
	}
	s.Started, s.Ended = fromNanos(started), fromNanos(ended)
	return s, err
}

var leaseCols = []string{"id", "session", "task", "name", "port", "endpoint", "started", "ended"}

// leaseArgs passes id 0 as NULL so SQLite picks the next one.
func leaseArgs(l supervisor.Lease) []any {
	return []any{nullInt64(l.ID), l.Session, l.Task, l.Name, l.Port, l.Endpoint, nanos(l.Start), nanos(l.End)}
}

func scanLease(s scanner) (supervisor.Lease, error) {
	var (
		l            supervisor.Lease
		start, ended sql.NullInt64
	)
	err := s.Scan(&l.ID, &l.Session, &l.Task, &l.Name, &l.Port, &l.Endpoint, &start, &ended)
	l.Start, l.End = fromNanos(start), fromNanos(ended)
	return l, err
}

var usageCols = []string{"session", "time", "cpu", "cpu_percent", "memory", "memory_peak", "oom_kills",
	"throttled", "pids"}

// usageArgs stores the uint64 counters as int64 bit for bit: the driver refuses uint64
// values with the high bit set, and no counter here gets near 2^63 anyway.
func usageArgs(u supervisor.Usage) []any {
	return []any{u.Session, nanos(u.Time), int64(u.CPU), u.CPUPercent, int64(u.Memory), int64(u.MemoryPeak),
		int64(u.OOMKills), int64(u.Throttled), int64(u.Pids)}
}

func scanUsage(s scanner) (supervisor.Usage, error) {
	var (
		u                                 supervisor.Usage
		t                                 sql.NullInt64
		cpu, mem, peak, oom, thrott, pids int64
	)
	err := s.Scan(&u.Session, &t, &cpu, &u.CPUPercent, &mem, &peak, &oom, &thrott, &pids)
	u.Time = fromNanos(t)
	u.CPU, u.Throttled = durationOf(cpu), durationOf(thrott)
	u.Memory, u.MemoryPeak, u.OOMKills, u.Pids = uint64(mem), uint64(peak), uint64(oom), uint64(pids)
	return u, err
}

var publishCols = []string{"id", "task", "session", "outcome", "base", "head", "new_head", "paths", "message", "time"}

func publishArgs(p supervisor.Publish) ([]any, error) {
	paths, err := jsonText("paths", p.Paths)
	if err != nil {
		return nil, err
	}
	return []any{nullInt64(p.ID), p.Task, p.Session, p.Outcome, p.Base, p.Head, p.NewHead, paths, p.Message,
		nanos(p.Time)}, nil
}

func scanPublish(s scanner) (supervisor.Publish, error) {
	var (
		p     supervisor.Publish
		paths string
		t     sql.NullInt64
	)
	if err := s.Scan(&p.ID, &p.Task, &p.Session, &p.Outcome, &p.Base, &p.Head, &p.NewHead, &paths, &p.Message, &t); err != nil {
		return p, err
	}
	p.Time = fromNanos(t)
	return p, fromJSON("paths", paths, &p.Paths)
}

var conflictCols = []string{"id", "publish", "path", "class", "base", "ours", "theirs", "moved_by"}

func conflictArgs(c supervisor.Conflict) []any {
	return []any{nullInt64(c.ID), c.Publish, c.Path, c.Class, c.Base, c.Ours, c.Theirs, nullInt64(c.MovedBy)}
}

func scanConflict(s scanner) (supervisor.Conflict, error) {
	var (
		c       supervisor.Conflict
		movedBy sql.NullInt64
	)
	err := s.Scan(&c.ID, &c.Publish, &c.Path, &c.Class, &c.Base, &c.Ours, &c.Theirs, &movedBy)
	c.MovedBy = movedBy.Int64
	return c, err
}

var approvalCols = []string{"id", "publish", "decision", "reason", "time"}

func approvalArgs(a supervisor.Approval) []any {
	return []any{nullInt64(a.ID), a.Publish, a.Decision, a.Reason, nanos(a.Time)}
}

func scanApproval(s scanner) (supervisor.Approval, error) {
	var (
		a supervisor.Approval
		t sql.NullInt64
	)
	err := s.Scan(&a.ID, &a.Publish, &a.Decision, &a.Reason, &t)
	a.Time = fromNanos(t)
	return a, err
}

var modelCallCols = []string{"id", "session", "task", "time", "upstream", "model", "status", "streamed",
	"input", "output", "cache_read", "cache_write", "cost", "latency", "remaining", "reset", "utilization", "limits"}

func modelCallArgs(c supervisor.ModelCall) ([]any, error) {
	limits, err := jsonText("limits", c.Limits)
	if err != nil {
		return nil, err
	}
	return []any{nullInt64(c.ID), c.Session, c.Task, nanos(c.Time), c.Upstream, c.Model, c.Status, c.Streamed,
		c.Input, c.Output, c.CacheRead, c.CacheWrite, c.Cost, int64(c.Latency), c.Remaining, nanos(c.Reset),
		c.Utilization, limits}, nil
}

func scanModelCall(s scanner) (supervisor.ModelCall, error) {
	var (
		c         supervisor.ModelCall
		at, reset sql.NullInt64
		latency   int64
		limits    string
	)
	err := s.Scan(&c.ID, &c.Session, &c.Task, &at, &c.Upstream, &c.Model, &c.Status, &c.Streamed,
		&c.Input, &c.Output, &c.CacheRead, &c.CacheWrite, &c.Cost, &latency, &c.Remaining, &reset,
		&c.Utilization, &limits)
	if err != nil {
		return c, err
	}
	c.Time, c.Reset, c.Latency = fromNanos(at), fromNanos(reset), durationOf(latency)
	return c, fromJSON("limits", limits, &c.Limits)
}

var laneRunCols = []string{"id", "kind", "commit_id", "publish", "batch", "outcome", "culprit", "runs",
	"session", "output", "record", "started", "ended"}

func laneRunArgs(r supervisor.LaneRun) ([]any, error) {
	batch, err := jsonText("batch", r.Batch)
	if err != nil {
		return nil, err
	}
	return []any{nullInt64(r.ID), r.Kind, r.Commit, r.Publish, batch, r.Outcome, r.Culprit, r.Runs,
		r.Session, r.Output, r.Record, nanos(r.Started), nanos(r.Ended)}, nil
}

func scanLaneRun(s scanner) (supervisor.LaneRun, error) {
	var (
		r              supervisor.LaneRun
		batch          string
		started, ended sql.NullInt64
	)
	if err := s.Scan(&r.ID, &r.Kind, &r.Commit, &r.Publish, &batch, &r.Outcome, &r.Culprit, &r.Runs,
		&r.Session, &r.Output, &r.Record, &started, &ended); err != nil {
		return r, err
	}
	r.Started, r.Ended = fromNanos(started), fromNanos(ended)
	return r, fromJSON("batch", batch, &r.Batch)
}

var eventCols = []string{"seq", "time", "kind", "task", "session", "data"}

func scanEvent(s scanner) (supervisor.Event, error) {
	var (
		e    supervisor.Event
		t    sql.NullInt64
		data []byte // NULL scans as nil; Scan copies, so the bytes outlive the row
	)
	err := s.Scan(&e.Seq, &t, &e.Kind, &e.Task, &e.Session, &data)
	e.Time = fromNanos(t)
	if len(data) > 0 {
		e.Data = json.RawMessage(data)
	}
	return e, err
}
