package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"text/template"

	"corral/policies"
	"corral/sandbox"
)

// admitNext starts the next task admission allows, and records why the others wait.
// It runs on the loop.
func (s *Supervisor) admitNext() {
	if s.ctx != nil && s.ctx.Err() != nil {
		return
	}
	s.adoptDecisions()
	live := map[string]bool{}
	for _, ls := range s.sessions {
		live[ls.rec.Task] = true
	}
	tasks := make([]Task, 0, len(s.order))
	for _, id := range s.order {
		tasks = append(tasks, *s.tasks[id])
	}
	now := s.now()
	next, verdicts := admit(admissionView{
		limits: s.fleet.Admission, tasks: tasks, live: live,
		lastLaunch: s.lastLaunch, now: now, overlaps: s.intentsOverlap, quotaHold: s.quotaHold(), gate: s.laneGateNow(),
	})
	s.admitDue = 0
	for _, v := range verdicts {
		if strings.HasPrefix(v.reason, "staged launch") {
			// Wake exactly when the staged launch is due, not on a polling tick.
			s.admitDue = s.lastLaunch.Add(s.fleet.Admission.Interval).Sub(now)
		}
	}
	for _, v := range verdicts {
		t := s.tasks[v.task.ID]
		if v.never {
			t.State, t.Reason = TaskFailed, "can never be admitted: "+v.reason
			s.saveTask(t, Event{Kind: EvTaskFailed, Task: t.ID, Data: jsonData(map[string]string{"reason": t.Reason})})
			continue
		}
		// Only a changed reason is news; re-evaluating every tick is not.
		if !v.admit && s.verdicts[t.ID] != v.reason && !strings.HasPrefix(v.reason, "staged launch") {
			s.verdicts[t.ID] = v.reason
			t.Reason = v.reason
			s.saveTask(t, Event{Kind: EvTaskBlocked, Task: t.ID, Data: jsonData(map[string]string{"reason": v.reason})})
		}
	}
	if next == nil {
		return
	}
	s.lastLaunch = s.now()
	delete(s.verdicts, next.ID)
	if err := s.startAttempt(s.tasks[next.ID], nil); err != nil {
		s.log.Error("start session", "task", next.ID, "err", err)
	}
}

// startAttempt starts a new session of t at the current head, or — resuming — over
// the private layer an interrupted session left. A session that cannot start fails
// the task with the reason.
func (s *Supervisor) startAttempt(t *Task, resume *Session) error {
	t.Attempts++
	l := launch{id: fmt.Sprintf("%s-%d", t.ID, t.Attempts), base: s.fleet.Head}
	if resume != nil {
		l.base, l.layer, l.follows = resume.Base, resume.Layer, resume.ID
	}
	if err := s.launch(t, l); err != nil {
		t.State, t.Reason = TaskFailed, err.Error()
		s.saveTask(t, Event{Kind: EvTaskFailed, Task: t.ID, Session: l.id, Data: jsonData(map[string]string{"reason": t.Reason})})
		return err
	}
	return nil
}

// launch says what one session starts from.
type launch struct {
	id      string // the new session's id
	base    string // the revision its workspace shows
	layer   string // a private layer to adopt ("" for an empty one)
	follows string // the session this one continues (resumed or rebased)
}

// launch starts and records a session of t's current attempt.
func (s *Supervisor) launch(t *Task, l launch) error {
	launched := s.now()
	id, base := l.id, l.base
	snap, err := s.snaps.Ensure(base)
	if err != nil {
		return fmt.Errorf("snapshot %.12s: %w", base, err)
	}
	argv, env, err := s.agentCommand(t, id)
	if err != nil {
		return err
	}
	var ports []sandbox.Port
	for _, p := range t.Ports {
		ports = append(ports, sandbox.Port{Inside: p})
	}
	cfg := sandbox.SessionConfig{
		ID: id, Repo: s.repo, Snapshot: snap, Command: argv, Env: env, Ports: ports,
		Network: sandbox.Network(t.Network), EnvFiles: t.EnvFiles, Pool: s.pool,
		Limits:   sandbox.Limits{CPU: t.CPU, Memory: t.Memory, Pids: t.Pids},
		Services: s.gatewayService(id),
	}
	s.sessionTask[id] = t.ID
	cfg.AdoptLayer = l.layer
	cfg.Recording = RecordingPath(s.repo, s.fleet, id)
	if p := s.conflictView(id); fileExists(p) {
		cfg.Binds = append(cfg.Binds, sandbox.Bind{Path: p})
	}
	if p := s.failureView(id); fileExists(p) {
		cfg.Binds = append(cfg.Binds, sandbox.Bind{Path: p})
	}
	// The workspace protocol: the session's own control socket, and corral itself.
	user, err := sandbox.InvokingUser()
	if err != nil {
		return err
	}
	ctl, err := s.openCtl(id, user)
	if err != nil {
		return err
	}
	cfg.User = user
	cfg.Binds = append(cfg.Binds, ctl.binds(s.cfg.CtlBinary)...)
	cfg.Env = append(cfg.Env, ctl.env(s.cfg.CtlBinary)...)
	if s.cfg.CtlBinary != "" {
		cfg.HomeFiles = ctlHomeFiles()
		cfg.Env = append(cfg.Env, "CORRAL_MCP_CONFIG="+path.Join(user.Home, CtlMCPConfigInside))
	}
	sb, err := sandbox.StartSession(cfg)
	if err != nil {
		ctl.close()
		return err
	}
	ctl.serve(sb.Pid())
	rec := Session{
		ID: id, Task: t.ID, Attempt: t.Attempts, Base: base, State: SessionRunning, Pid: sb.Pid(),
		Layer: sb.Upper(), Recording: sb.RecordingPath(), Started: launched,
	}
	rec.Resumes = l.follows
	ls := &liveSession{rec: rec, sb: sb, lastAt: s.now(), ctl: ctl}
	s.sessions[id] = ls
	t.State, t.Reason = TaskRunning, ""
	_, err = s.commit(func(tx Tx) error {
		if err := tx.PutTask(*t); err != nil {
			return err
		}
		if err := tx.PutSession(rec); err != nil {
			return err
		}
		tx.Emit(Event{Kind: EvSessionStarted, Task: t.ID, Session: id, Data: jsonData(map[string]any{
			"base": base, "attempt": t.Attempts, "pid": sb.Pid(), "resumes": rec.Resumes, "warm": sb.Timings().Warm,
			"start_ms": float64(sb.Timings().Total.Microseconds()) / 1000})})
		for _, ep := range sb.Endpoints() {
			l := Lease{Session: id, Task: t.ID, Port: ep.Inside, Endpoint: ep.Host, Start: s.now()}
			lid, err := tx.AddLease(l)
			if err != nil {
				return err
			}
			ls.leases = append(ls.leases, lid)
			tx.Emit(Event{Kind: EvLeaseGranted, Task: t.ID, Session: id, Data: jsonData(map[string]any{"port": ep.Inside, "endpoint": ep.Host})})
		}
		return nil
	})
	if err != nil {
		s.log.Error("record session start", "session", id, "err", err)
	}
	s.watch(ls)
	s.watchQuiet(ls)
	return nil
}

// agentCommand renders the task's agent template and its environment.
func (s *Supervisor) agentCommand(t *Task, session string) ([]string, []string, error) {
	conflict := ""
	if p := s.conflictFile(t.ID); fileExists(p) {
		var err error
		if conflict, err = s.exposeConflict(p, session); err != nil {
			return nil, nil, fmt.Errorf("task %s: %w", t.ID, err)
		}
	}
	tmpl, err := template.New(t.ID).Option("missingkey=error").Parse(t.Agent)
	if err != nil {
		return nil, nil, fmt.Errorf("task %s: agent template: %w", t.ID, err)
	}
	var cmd bytes.Buffer
	data := map[string]string{"Prompt": t.Prompt, "Task": t.ID, "Session": session, "ConflictFile": conflict}
	if err := tmpl.Execute(&cmd, data); err != nil {
		return nil, nil, fmt.Errorf("task %s: agent template: %w", t.ID, err)
	}
	env := []string{"CORRAL_TASK=" + t.ID, "CORRAL_PROMPT=" + t.Prompt}
	if conflict != "" {
		env = append(env, "CORRAL_CONFLICT="+conflict)
	}
	if p := s.failureFile(t.ID); fileExists(p) {
		view, err := s.exposeFile(p, s.failureView(session))
		if err != nil {
			return nil, nil, fmt.Errorf("task %s: failure report: %w", t.ID, err)
		}
		env = append(env, "CORRAL_FAILURE="+view)
	}
	argv := []string{"/bin/sh", "-c", cmd.String()}
	if t.Accept != "" {
		argv, env = acceptCommand(cmd.String(), t.Accept, env)
	}
	return argv, env, nil
}

// watch waits for the session's agent to exit and tells the loop.
func (s *Supervisor) watch(ls *liveSession) {
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		<-ls.sb.Done()
		st := ls.sb.Wait()
		s.post(func() { s.onExit(ls, st) })
	}()
}

// onExit follows a session whose agent exited: a zero exit sends its changeset to
// publish; a non-zero one fails the attempt, keeps the layer, and retries if allowed.
func (s *Supervisor) onExit(ls *liveSession, st sandbox.ExitStatus) {
	if s.sessions[ls.rec.ID] != ls {
		return // discarded or killed meanwhile; that path recorded it
	}
	code := st.Code
	t := s.tasks[ls.rec.Task]
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvSessionExited, Task: t.ID, Session: ls.rec.ID, Data: jsonData(st)})
		return nil
	})
	if code != 0 {
		s.endSession(ls, true, SessionFailed, &code)
		out, _ := ls.sb.Output().Since(0) // whole: the sandbox is down, its output drained
		if report, ok := acceptFailure(code, out); ok && t.Accept != "" {
			s.onAcceptFailed(t, ls.rec.ID, report)
			return
		}
		s.failAttempt(t, ls.rec.ID, fmt.Sprintf("agent exited %d", code))
		return
	}
	s.publishSession(ls, code, true)
}

// publishSession captures the session's changeset and hands it to the publisher; the
// outcome comes back to the loop. final: the session ends with it (one-shot exit).
func (s *Supervisor) publishSession(ls *liveSession, code int, final bool) {
	s.publishSessionMsg(ls, code, final, "")
}

// publishSessionMsg is publishSession with the commit's subject given (ctl publish).
// A publish while the agent runs passes the task's accept check first.
func (s *Supervisor) publishSessionMsg(ls *liveSession, code int, final bool, message string) {
	if t := s.tasks[ls.rec.Task]; !final && t.Accept != "" {
		s.acceptThenPublish(ls, message)
		return
	}
	s.capturePublish(ls, code, final, message)
}

// capturePublish captures the session's changeset and hands it to the publisher.
func (s *Supervisor) capturePublish(ls *liveSession, code int, final bool, message string) {
	t := s.tasks[ls.rec.Task]
	cs, err := ls.sb.Capture()
	if err != nil {
		if final {
			s.endSession(ls, true, SessionFailed, &code)
		}
		s.failAttempt(t, ls.rec.ID, "capture: "+err.Error())
		return
	}
	t.State = TaskPublishing
	s.saveTask(t, Event{Kind: EvPublishQueued, Task: t.ID, Session: ls.rec.ID, Data: jsonData(map[string]int{"paths": len(cs)})})
	req := PublishRequest{Task: *t, Session: ls.rec, Changes: cs, Rules: s.planRules(), Message: message}
	if _, ok := s.preGated(); ok {
		c := s.preEnqueue(req, 0, func(res PublishResult, err error) { s.onPublished(ls, code, final, req, res, err) })
		if c != nil && final {
			c.ls = ls
			// The candidate holds the work now: the sandbox goes down and frees its
			// admission slot while the lane tests; the layer waits for the verdict.
			delete(s.sessions, ls.rec.ID)
			if err := ls.sb.Destroy(true); err != nil {
				s.log.Error("destroy gated session", "session", ls.rec.ID, "err", err)
			}
			ls.gated = true
			s.kick()
		}
		return
	}
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		res, err := s.pub.Publish(req)
		s.post(func() { s.onPublished(ls, code, final, req, res, err) })
	}()
}

// onPublished records a publish's outcome and moves the task on.
func (s *Supervisor) onPublished(ls *liveSession, code int, final bool, req PublishRequest, res PublishResult, err error) {
	t := s.tasks[ls.rec.Task]
	if err != nil {
		res = PublishResult{Outcome: OutcomeRejected, Message: err.Error()}
	}
	p := Publish{Task: t.ID, Session: ls.rec.ID, Outcome: res.Outcome, Base: ls.rec.Base, Head: res.Head,
		NewHead: res.NewHead, Message: res.Message, Time: s.now()}
	for _, c := range req.Changes {
		p.Paths = append(p.Paths, c.Path)
	}
	s.advanceHead(res)
	if final {
		// The publisher has read the layer; what it kept is on the head or in the record.
		keep := res.Outcome == OutcomeRejected || res.Outcome == OutcomeEscalated
		s.endSession(ls, keep, SessionPublished, &code)
	}
	switch res.Outcome {
	case OutcomeAccepted, OutcomeMerged, OutcomeEmpty:
		if final {
			t.State, t.Reason = TaskDone, ""
		} else {
			t.State = TaskRunning
		}
	case OutcomeEscalated:
		t.State, t.Reason = TaskInbox, "publish escalated: "+res.Message
	default:
		if final {
			s.resolveMovedBy(res.Conflicts, res.Moves)
			p.ID = s.recordPublish(t, p, res.Conflicts)
			if err := s.writeConflictReport(p, res, res.Conflicts, t.Attempts); err != nil {
				s.log.Error("write conflict report", "task", t.ID, "err", err)
			}
			s.rejectAttempt(t, ls.rec.ID, "publish rejected: "+res.Message)
			return
		}
		t.State = TaskRunning
	}
	s.resolveMovedBy(res.Conflicts, res.Moves)
	p.ID = s.recordPublish(t, p, res.Conflicts)
	if t.State == TaskInbox {
		s.saveTask(t, Event{Kind: EvTaskInbox, Task: t.ID, Session: ls.rec.ID, Data: jsonData(map[string]any{
			"reason": t.Reason, "publish": p.ID})})
	}
	s.laneLanded(p)
	if t.State == TaskDone {
		// The conflict and failure reports served their retry; a later run starts clean.
		os.Remove(s.conflictFile(t.ID))
		os.Remove(s.failureFile(t.ID))
		s.saveTask(t, Event{Kind: EvTaskDone, Task: t.ID, Session: ls.rec.ID})
	}
	s.kick()
}

// advanceHead records the head a publish moved. Publishes land one at a time, but
// their outcomes can reach the loop out of order (an approval lands on the loop while
// a publish's outcome is still on its way), so a head already behind the recorded one
// is not taken back to.
func (s *Supervisor) advanceHead(res PublishResult) {
	if res.NewHead == "" || res.NewHead == s.fleet.Head {
		return
	}
	if res.Head != s.fleet.Head && s.fleet.Head != "" {
		if _, err := s.repo.Git("merge-base", "--is-ancestor", res.NewHead, s.fleet.Head); err == nil {
			return // landed before the recorded head, which already contains it
		}
	}
	s.fleet.Head = res.NewHead
}

// recordPublish stores a publish with its conflicts, the task and the fleet's head,
// and emits publish.<outcome>.
func (s *Supervisor) recordPublish(t *Task, p Publish, conflicts []Conflict) int64 {
	var id int64
	_, err := s.commit(func(tx Tx) error {
		var err error
		id, err = tx.AddPublish(p)
		if err != nil {
			return err
		}
		for i := range conflicts {
			conflicts[i].Publish = id
		}
		if err := tx.AddConflicts(conflicts...); err != nil {
			return err
		}
		if err := tx.PutTask(*t); err != nil {
			return err
		}
		if err := tx.PutFleet(s.fleet); err != nil {
			return err
		}
		tx.Emit(Event{Kind: "publish." + p.Outcome, Task: t.ID, Session: p.Session, Data: jsonData(map[string]any{
			"publish": id, "new_head": p.NewHead, "paths": len(p.Paths), "conflicts": len(conflicts), "message": p.Message})})
		return nil
	})
	if err != nil {
		s.log.Error("record publish", "task", t.ID, "err", err)
	}
	return id
}

// failAttempt retries the task if it has retries left, else fails it.
func (s *Supervisor) failAttempt(t *Task, session, reason string) {
	if t.Attempts <= t.Retries {
		t.State, t.Reason = TaskRetrying, reason
		s.saveTask(t, Event{Kind: EvTaskRetrying, Task: t.ID, Session: session, Data: jsonData(map[string]any{
			"reason": reason, "attempt": t.Attempts, "retries": t.Retries})})
	} else {
		t.State, t.Reason = TaskFailed, reason
		s.saveTask(t, Event{Kind: EvTaskFailed, Task: t.ID, Session: session, Data: jsonData(map[string]string{"reason": reason})})
	}
	s.kick()
}

// endSession takes a live session down — its sandbox destroyed, its layer kept or
// dropped — forgets it, and records its end. Every way a session ends goes through here.
func (s *Supervisor) endSession(ls *liveSession, keepLayer bool, state SessionState, code *int) {
	if ls.gated {
		// Its sandbox went down when its candidate entered the lane's gate.
		if !keepLayer {
			if err := sandbox.DiscardSession(s.repo, ls.rec.ID); err != nil {
				s.log.Error("drop gated session's layer", "session", ls.rec.ID, "err", err)
			}
		}
		s.finishSession(ls, state, code)
		return
	}
	delete(s.sessions, ls.rec.ID)
	if err := ls.sb.Destroy(keepLayer); err != nil {
		s.log.Error("destroy session", "session", ls.rec.ID, "err", err)
	}
	s.finishSession(ls, state, code)
}

// finishSession records a session's end and releases its leases.
func (s *Supervisor) finishSession(ls *liveSession, state SessionState, code *int) {
	os.Remove(s.conflictView(ls.rec.ID))
	s.closeProtocol(ls)
	os.Remove(s.failureView(ls.rec.ID))
	ls.rec.State, ls.rec.ExitCode, ls.rec.Ended, ls.rec.Pid = state, code, s.now(), 0
	_, err := s.commit(func(tx Tx) error {
		for _, lid := range ls.leases {
			if err := tx.EndLease(lid, s.now()); err != nil {
				return err
			}
			tx.Emit(Event{Kind: EvLeaseReleased, Task: ls.rec.Task, Session: ls.rec.ID})
		}
		return tx.PutSession(ls.rec)
	})
	if err != nil {
		s.log.Error("record session end", "session", ls.rec.ID, "err", err)
	}
	ls.leases = nil
}

// saveTask stores a task with the events its change caused.
func (s *Supervisor) saveTask(t *Task, evs ...Event) {
	t.Updated = s.now()
	_, err := s.commit(func(tx Tx) error {
		for _, e := range evs {
			tx.Emit(e)
		}
		return tx.PutTask(*t)
	})
	if err != nil {
		s.log.Error("record task", "task", t.ID, "err", err)
	}
}

// intentsOverlap reports whether two tasks declare intents that match a common file of
// the base (the files they could both touch).
func (s *Supervisor) intentsOverlap(a, b Task) bool {
	if len(a.Intent) == 0 || len(b.Intent) == 0 {
		return false
	}
	for _, f := range s.baseFiles {
		if matchAny(a.Intent, f) && matchAny(b.Intent, f) {
			return true
		}
	}
	// Globs that name new files (no base match) overlap when they are the same.
	for _, ga := range a.Intent {
		for _, gb := range b.Intent {
			if ga == gb {
				return true
			}
		}
	}
	return false
}

func matchAny(globs []string, path string) bool {
	for _, g := range globs {
		if policies.MatchGlob(g, path) {
			return true
		}
	}
	return false
}

func jsonData(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(strconv.Quote(err.Error()))
	}
	return data
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, os.ErrNotExist)
}
