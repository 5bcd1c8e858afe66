package supervisor

import (
	"fmt"
	"sort"
	"time"
)

// admissionView is what admission decides from: the fleet's limits, the tasks, which of
// them hold a live session, and when the last launch happened.
type admissionView struct {
	limits     Admission
	tasks      []Task
	live       map[string]bool // task id → has a live session
	lastLaunch time.Time
	now        time.Time
	overlaps   func(a, b Task) bool // nil: intents never overlap
	quotaHold  string               // non-empty: the fleet quota is past its soft threshold, and why
	gate       *laneGate            // nil: the lane does not narrow admission
}

// laneGate is how a red head narrows admission: no new session at all (stop), or only
// tasks whose declared intent touches a path the culprit changed (paths). Repair
// tasks are always let through: they are how the head turns green again.
type laneGate struct {
	mode   string   // NarrowStop or NarrowPaths
	paths  []string // the culprit's paths
	reason string   // e.g. "head a1b2c3 red since publish 5 (pricing)"
	exempt string   // the culprit's task: its own retry is how a human or a revert fixes it
}

// blocks says why the gate holds t back, or "".
func (g *laneGate) blocks(t Task) string {
	if g == nil || t.Repairs != 0 || t.ID == g.exempt {
		return ""
	}
	if g.mode == NarrowPaths {
		for _, p := range g.paths {
			if matchAny(t.Intent, p) {
				return ""
			}
		}
		return "lane red, admitting only tasks that touch the culprit's paths: " + g.reason
	}
	return "lane red, admission stopped: " + g.reason
}

// verdict is admission's answer for one queued task.
type verdict struct {
	task   Task
	admit  bool
	never  bool   // can never be admitted: fail it rather than wait forever
	reason string // why not (yet)
}

// admit decides which queued task starts next, if any, and for every queued task why
// it waits. It is pure: the supervisor applies the result.
//
// Order: a task whose dependencies are all done, highest priority first, then oldest.
// It starts when fewer than MaxRunning sessions are live, its CPU and memory
// reservations fit what live tasks leave of the fleet budget, the last launch is at
// least Interval ago (launches grow in steps, not bursts), and — under the serialize
// policy — no live task's intent overlaps its own.
func admit(v admissionView) (next *Task, verdicts []verdict) {
	byID := map[string]Task{}
	for _, t := range v.tasks {
		byID[t.ID] = t
	}
	running := 0
	var usedCPU float64
	var usedMem int64
	for _, t := range v.tasks {
		if v.live[t.ID] {
			running++
			usedCPU += t.CPU
			usedMem += t.Memory
		}
	}
	var queued []Task
	for _, t := range v.tasks {
		if (t.State == TaskQueued || t.State == TaskRetrying) && !v.live[t.ID] {
			queued = append(queued, t)
		}
	}
	sort.SliceStable(queued, func(i, j int) bool {
		if queued[i].Priority != queued[j].Priority {
			return queued[i].Priority > queued[j].Priority
		}
		return queued[i].Created.Before(queued[j].Created)
	})
	lim := v.limits
	for _, t := range queued {
		vd := verdict{task: t}
		switch {
		case lim.CPU > 0 && t.CPU > lim.CPU:
			vd.never, vd.reason = true, fmt.Sprintf("needs %.2g CPUs; the fleet budget is %.2g", t.CPU, lim.CPU)
		case lim.Memory > 0 && t.Memory > lim.Memory:
			vd.never, vd.reason = true, fmt.Sprintf("needs %s of memory; the fleet budget is %s", fmtBytes(t.Memory), fmtBytes(lim.Memory))
		default:
			vd.reason, vd.never = depsReason(t, byID)
		}
		if vd.reason == "" {
			vd.reason = v.gate.blocks(t)
		}
		if vd.reason == "" {
			switch {
			case v.quotaHold != "":
				vd.reason = v.quotaHold
			case lim.MaxRunning > 0 && running >= lim.MaxRunning:
				vd.reason = fmt.Sprintf("%d of %d sessions running", running, lim.MaxRunning)
			case lim.CPU > 0 && usedCPU+t.CPU > lim.CPU+1e-9:
				vd.reason = fmt.Sprintf("needs %.2g CPUs; %.2g of %.2g free", t.CPU, lim.CPU-usedCPU, lim.CPU)
			case lim.Memory > 0 && usedMem+t.Memory > lim.Memory:
				vd.reason = fmt.Sprintf("needs %s of memory; %s of %s free", fmtBytes(t.Memory), fmtBytes(lim.Memory-usedMem), fmtBytes(lim.Memory))
			case lim.Overlap == "serialize" && v.overlaps != nil:
				for _, o := range v.tasks {
					if v.live[o.ID] && v.overlaps(t, o) {
						vd.reason = fmt.Sprintf("intent overlaps live task %s", o.ID)
						break
					}
				}
			}
		}
		if vd.reason == "" && next == nil {
			if wait := v.lastLaunch.Add(lim.Interval).Sub(v.now); !v.lastLaunch.IsZero() && wait > 0 {
				vd.reason = fmt.Sprintf("staged launch: next in %s", wait.Round(time.Millisecond))
			} else {
				vd.admit = true
				t := t
				next = &t
			}
		} else if vd.reason == "" {
			vd.reason = "waiting for its turn"
		}
		verdicts = append(verdicts, vd)
	}
	return next, verdicts
}

// depsReason says why t's dependencies hold it back; never is set when one ended
// without being done, so t can never run.
func depsReason(t Task, byID map[string]Task) (reason string, never bool) {
	for _, d := range t.After {
		dep, ok := byID[d]
		switch {
		case !ok:
			return fmt.Sprintf("depends on unknown task %s", d), true
		case dep.State == TaskFailed || dep.State == TaskDiscarded:
			return fmt.Sprintf("depends on %s, which %s", d, dep.State), true
		case dep.State != TaskDone:
			return fmt.Sprintf("waiting for %s (%s)", d, dep.State), false
		}
	}
	return "", false
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0fM", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%dB", n)
}
