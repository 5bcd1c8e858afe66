package supervisor

import (
	"fmt"
	"strings"
)

// The integration lane (post gating): publishes land, and the lane verifies the head
// after them. When it is idle and something landed, it tests the newest head — one run
// covers every publish since the last one it judged (a batch). A red head is re-run
// before it counts; then the batch is bisected, testing heads in between, to name the
// publish that turned it red. The verdict steers the fleet: red narrows admission and
// opens repair work (or reverts, or holds for a human), green reopens admission.
//
// All of it runs on the loop except the sandboxes, which run in a goroutine per
// judged commit and post their result back.

// laneState is the lane's in-memory state, owned by the loop.
type laneState struct {
	verified   string     // newest head judged green (or flaky), or the fleet's base
	verifiedAs string     // its outcome: green or flaky
	red        *LaneRun   // the red verdict in force; nil while the head is green
	culprit    *Publish   // the publish it blames
	pending    []laneHead // publishes landed since the last head run began
	job        *laneJob   // the run in flight
	pre        *preQueue  // pre gating's candidates
	fixes      int        // repairs or reverts landed while red, reset by green
	baseRed    bool       // the suite failed on the base: red without a culprit until a green head
}

// laneMaxFixes is how many fixes of one red head the lane tries before a human.
const laneMaxFixes = 3

// batchHasFix reports whether a batch holds a repair task's publish or a revert.
func (s *Supervisor) batchHasFix(heads []laneHead) bool {
	in := map[int64]bool{}
	for _, h := range heads {
		in[h.Publish] = true
	}
	var pubs []Publish
	s.store.View(func(r Reader) error {
		var err error
		pubs, err = r.Publishes()
		return err
	})
	for _, p := range pubs {
		if !in[p.ID] {
			continue
		}
		if t := s.tasks[p.Task]; (t != nil && t.Repairs != 0) || strings.HasPrefix(p.Message, "revert of publish") {
			return true
		}
	}
	return false
}

// laneJob is one head run and the bisection that may follow it.
type laneJob struct {
	run   LaneRun
	heads []laneHead
	bis   *bisection
	probe *LaneRun   // the bisection's run in flight
	red   laneResult // the head's own red result, kept while bisecting
	from  string     // the verified head before the batch
	// baseProbed: the untested base before the batch has been tested (see laneBlame).
	baseProbed bool
}

// laneProbeBase tests the commit before the batch; green (or no answer) lets the blame
// stand, red makes the head run red without a culprit.
func (s *Supervisor) laneProbeBase(job *laneJob, c laneHead) {
	probe := LaneRun{Kind: LaneKindBisect, Commit: job.from, Outcome: LaneRunning, Started: s.now()}
	s.commit(func(tx Tx) error {
		id, err := tx.AddLaneRun(probe)
		probe.ID = id
		tx.Emit(Event{Kind: EvLaneStarted, Data: jsonData(map[string]any{"run": id, "kind": LaneKindBisect,
			"commit": job.from, "base": true, "of": job.run.ID})})
		return err
	})
	job.probe = &probe
	s.laneStart(probe, func(res laneResult) {
		s.finishRun(job.probe, res, map[string]any{"of": job.run.ID, "base": true})
		if res.Outcome != LaneRed {
			s.laneBlame(job, c)
			return
		}
		s.lane.baseRed = true
		s.finishRun(&job.run, job.red, map[string]any{"base_red": true})
		s.laneDone()
	})
}

// laneOn reports whether the fleet has a lane at all.
func (s *Supervisor) laneOn() bool { return strings.TrimSpace(s.fleet.Test) != "" }

// laneConfig is the fleet's lane policy with defaults for what a record leaves unset
// (fleets made before the lane existed, or by hand in tests).
func (s *Supervisor) laneConfig() Lane {
	l, d := s.fleet.Lane, DefaultLane()
	if l.Gating == "" {
		l.Gating = d.Gating
	}
	if l.OnRed == "" {
		l.OnRed = d.OnRed
	}
	if l.Narrow == "" {
		l.Narrow = d.Narrow
	}
	if l.Parallel <= 0 {
		l.Parallel = d.Parallel
	}
	if l == (Lane{Gating: d.Gating, OnRed: d.OnRed, Narrow: d.Narrow, Parallel: d.Parallel}) {
		l.Reruns = d.Reruns // a zero Lane: the defaults throughout
	}
	return l
}

// laneInit restores the lane from the store: the last verdict, and the publishes
// landed since the last head run (a run a dead supervisor left is marked skipped).
func (s *Supervisor) laneInit() error {
	s.lane.verified = s.fleet.Base
	if !s.laneOn() {
		return nil
	}
	var runs []LaneRun
	var pubs []Publish
	if err := s.store.View(func(r Reader) error {
		var err error
		if runs, err = r.LaneRuns(); err != nil {
			return err
		}
		pubs, err = r.Publishes()
		return err
	}); err != nil {
		return fmt.Errorf("supervisor: lane: %w", err)
	}
	var covered int64
	for i := range runs {
		run := &runs[i]
		if run.Outcome == LaneRunning {
			run.Outcome, run.Output, run.Ended = LaneSkipped, "supervisor stopped during the run", s.now()
			r := *run
			s.commit(func(tx Tx) error { return tx.PutLaneRun(r) })
			continue
		}
		if run.Kind != LaneKindHead || run.Outcome == LaneSkipped || run.Outcome == LaneError {
			continue
		}
		covered = max(covered, run.Publish)
		switch run.Outcome {
		case LaneGreen, LaneFlaky:
			s.lane.verified, s.lane.verifiedAs, s.lane.red, s.lane.culprit = run.Commit, run.Outcome, nil, nil
		case LaneRed:
			if run.Culprit == 0 {
				s.lane.baseRed = true // red from the base on: nobody to blame
				continue
			}
			r := *run
			s.lane.red = &r
			for _, p := range pubs {
				if p.ID == run.Culprit {
					p := p
					s.lane.culprit = &p
				}
			}
		}
	}
	if s.laneConfig().Gating == GatingPre {
		return nil // every head landed as a candidate the lane passed
	}
	for _, p := range pubs {
		if p.NewHead != "" && p.ID > covered && landed(p.Outcome) {
			s.lane.pending = append(s.lane.pending, laneHead{Publish: p.ID, Commit: p.NewHead})
		}
	}
	return nil
}

func landed(outcome string) bool { return outcome == OutcomeAccepted || outcome == OutcomeMerged }

// laneLanded tells the lane a publish moved the head.
func (s *Supervisor) laneLanded(p Publish) {
	if !s.laneOn() || p.NewHead == "" || s.laneConfig().Gating == GatingPre {
		return
	}
	s.lane.pending = append(s.lane.pending, laneHead{Publish: p.ID, Commit: p.NewHead})
	s.laneKick()
}

// laneKick starts a head run when the lane is idle and something landed: the newest
// head, covering the whole batch; the heads it passes over are recorded skipped.
func (s *Supervisor) laneKick() {
	if s.lane.job != nil || len(s.lane.pending) == 0 || s.ctx == nil || s.ctx.Err() != nil {
		return
	}
	batch := s.lane.pending
	s.lane.pending = nil
	if s.laneConfig().EveryHead {
		batch, s.lane.pending = batch[:1], batch[1:]
	}
	newest := batch[len(batch)-1]
	job := &laneJob{heads: batch, from: s.lane.verified, run: LaneRun{Kind: LaneKindHead, Commit: newest.Commit, Publish: newest.Publish,
		Outcome: LaneRunning, Started: s.now()}}
	for _, h := range batch {
		job.run.Batch = append(job.run.Batch, h.Publish)
	}
	_, err := s.commit(func(tx Tx) error {
		for _, h := range batch[:len(batch)-1] {
			sk := LaneRun{Kind: LaneKindHead, Commit: h.Commit, Publish: h.Publish, Outcome: LaneSkipped,
				Started: s.now(), Ended: s.now(), Output: fmt.Sprintf("covered by the run of %.12s", newest.Commit)}
			if _, err := tx.AddLaneRun(sk); err != nil {
				return err
			}
			tx.Emit(Event{Kind: EvLaneSkipped, Data: jsonData(map[string]any{"commit": h.Commit, "publish": h.Publish, "by": newest.Commit})})
		}
		id, err := tx.AddLaneRun(job.run)
		job.run.ID = id
		tx.Emit(Event{Kind: EvLaneStarted, Data: jsonData(map[string]any{"run": id, "kind": LaneKindHead,
			"commit": newest.Commit, "publish": newest.Publish, "batch": job.run.Batch})})
		return err
	})
	if err != nil {
		s.log.Error("lane: record run", "err", err)
		return
	}
	s.lane.job = job
	s.laneStart(job.run, func(res laneResult) { s.onLaneHead(job, res) })
}

// laneStart judges run.Commit off the loop and hands the result to done on the loop.
func (s *Supervisor) laneStart(run LaneRun, done func(laneResult)) {
	lane, test, ctx := s.laneConfig(), s.fleet.Test, s.ctx
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		res := s.laneJudge(ctx, run.ID, run.Commit, lane, test)
		s.post(func() { done(res) })
	}()
}

// finishRun stores a run's verdict with its event.
func (s *Supervisor) finishRun(run *LaneRun, res laneResult, extra map[string]any) {
	run.Outcome, run.Runs, run.Session, run.Output, run.Record, run.Ended = res.Outcome, res.Runs, res.Session, res.Output, res.Record, s.now()
	data := map[string]any{"run": run.ID, "kind": run.Kind, "commit": run.Commit, "publish": run.Publish, "runs": res.Runs}
	for k, v := range extra {
		data[k] = v
	}
	kind := "lane." + res.Outcome
	r := *run
	if _, err := s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: kind, Data: jsonData(data)})
		return tx.PutLaneRun(r)
	}); err != nil {
		s.log.Error("lane: record verdict", "run", run.ID, "err", err)
	}
}

// onLaneHead follows a head run's verdict.
func (s *Supervisor) onLaneHead(job *laneJob, res laneResult) {
	switch res.Outcome {
	case LaneGreen, LaneFlaky, LaneError:
		s.finishRun(&job.run, res, nil)
		if res.Outcome != LaneError {
			s.laneGreen(job.run)
		}
		s.laneDone()
	case LaneRed:
		job.red = res
		switch {
		case s.lane.baseRed && s.lane.verifiedAs == "":
			// The base itself fails and nothing has passed since: there is no green
			// head to bisect from, and no publish to blame.
			s.finishRun(&job.run, res, map[string]any{"base_red": true})
			s.laneDone()
		case s.lane.red != nil:
			// Red on red: with no green head since, bisection has nothing to stand on,
			// so the break already blamed keeps the blame. If its repair (or revert)
			// landed in this batch and the head is still red, the fix fell short or
			// another break hid behind the first: the red policy runs again, with the
			// new output, up to laneMaxFixes times before a human is asked.
			job.run.Culprit = s.lane.red.Culprit
			s.finishRun(&job.run, res, map[string]any{"culprit": job.run.Culprit, "still": true})
			s.lane.red = &job.run
			s.laneDone()
			if s.lane.culprit != nil && s.batchHasFix(job.heads) {
				s.lane.fixes++
				if s.lane.fixes < laneMaxFixes {
					s.laneOnRed(job.run, *s.lane.culprit)
				} else {
					s.laneHold(job.run, *s.lane.culprit, s.tasks[s.lane.culprit.Task],
						fmt.Sprintf("still red after %d fixes", s.lane.fixes))
				}
			}
		case len(job.heads) == 1:
			s.laneBlame(job, job.heads[0])
		default:
			job.bis = newBisection(job.heads)
			s.laneProbe(job)
		}
	}
}

// laneProbe tests the bisection's next head, or blames the culprit when it is known.
func (s *Supervisor) laneProbe(job *laneJob) {
	i, done := job.bis.next()
	if done {
		s.laneBlame(job, job.bis.culprit())
		return
	}
	h := job.heads[i]
	probe := LaneRun{Kind: LaneKindBisect, Commit: h.Commit, Publish: h.Publish, Outcome: LaneRunning, Started: s.now()}
	if _, err := s.commit(func(tx Tx) error {
		id, err := tx.AddLaneRun(probe)
		probe.ID = id
		tx.Emit(Event{Kind: EvLaneStarted, Data: jsonData(map[string]any{"run": id, "kind": LaneKindBisect,
			"commit": h.Commit, "publish": h.Publish, "of": job.run.ID})})
		return err
	}); err != nil {
		s.log.Error("lane: record probe", "err", err)
	}
	job.probe = &probe
	s.laneStart(probe, func(res laneResult) {
		s.finishRun(job.probe, res, map[string]any{"of": job.run.ID})
		if res.Outcome == LaneError {
			// No answer: blame the newest red head rather than guess.
			s.laneBlame(job, job.bis.heads[job.bis.hi])
			return
		}
		job.bis.record(i, res.Outcome == LaneRed)
		s.laneProbe(job)
	})
}

// laneBlame closes a red head run with its culprit and applies the red policy. Blame
// that falls on the first publish after a base the lane never tested checks the base
// first: a suite that already failed there is nobody's fault.
func (s *Supervisor) laneBlame(job *laneJob, c laneHead) {
	if c == job.heads[0] && job.from != "" && s.lane.verifiedAs == "" && !job.baseProbed {
		job.baseProbed = true
		s.laneProbeBase(job, c)
		return
	}
	job.run.Culprit = c.Publish
	var culprit Publish
	s.store.View(func(r Reader) error {
		var err error
		culprit, err = findPublish(r, c.Publish)
		return err
	})
	s.finishRun(&job.run, job.red, map[string]any{"culprit": c.Publish, "culprit_task": culprit.Task, "culprit_commit": c.Commit})
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvLaneCulprit, Task: culprit.Task, Session: culprit.Session, Data: jsonData(map[string]any{
			"run": job.run.ID, "publish": c.Publish, "commit": c.Commit, "head": job.run.Commit, "paths": culprit.Paths})})
		return nil
	})
	s.lane.red, s.lane.culprit = &job.run, &culprit
	s.laneDone()
	s.laneOnRed(job.run, culprit)
}

// laneDone ends the job in flight and starts the next if something landed meanwhile.
func (s *Supervisor) laneDone() {
	s.lane.job = nil
	s.laneKick()
	s.kick()
}

// laneGreen records a green head: admission reopens if it was narrowed.
func (s *Supervisor) laneGreen(run LaneRun) {
	s.lane.verified, s.lane.verifiedAs, s.lane.baseRed = run.Commit, run.Outcome, false
	if s.lane.red == nil {
		return
	}
	was := s.lane.red
	s.lane.red, s.lane.culprit, s.lane.fixes = nil, nil, 0
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvLaneReopened, Data: jsonData(map[string]any{"run": run.ID, "commit": run.Commit, "red_run": was.ID, "culprit": was.Culprit})})
		return nil
	})
	s.kick()
}

// laneGateNow is the admission gate while the head is red, nil while it is green.
func (s *Supervisor) laneGateNow() *laneGate {
	if s.lane.red == nil {
		return nil
	}
	g := &laneGate{mode: s.laneConfig().Narrow, reason: fmt.Sprintf("head %.7s red", s.lane.red.Commit)}
	if c := s.lane.culprit; c != nil {
		g.paths, g.exempt = c.Paths, c.Task
		g.reason += fmt.Sprintf(" since publish %d (%s)", c.ID, c.Task)
	}
	return g
}

// laneBusy reports whether the lane still has work: a run in flight, heads to test,
// or candidates waiting.
func (s *Supervisor) laneBusy() bool {
	return s.lane.job != nil || len(s.lane.pending) > 0 || (s.lane.pre != nil && s.lane.pre.busy())
}
