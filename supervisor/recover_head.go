package supervisor

import (
	"fmt"
	"strings"
	"time"
)

// landedCommit is a head commit a publish wrote, read back from its trailers.
type landedCommit struct {
	commit, parent               string
	task, session, base, outcome string
	subject                      string
	time                         time.Time
	paths                        []string
}

// landedSince lists the publish commits on the head after recorded, oldest first: the
// head moves by compare-and-swap before the supervisor records the publish, so a
// supervisor that died in between leaves commits the store has not heard of.
func (s *Supervisor) landedSince(recorded, head string) ([]landedCommit, error) {
	if recorded == "" || recorded == head {
		return nil, nil
	}
	if _, err := s.repo.Git("merge-base", "--is-ancestor", recorded, head); err != nil {
		return nil, fmt.Errorf("the head %.12s does not descend from the recorded head %.12s (moved by hand?)", head, recorded)
	}
	const sep = "\x1e"
	out, err := s.repo.Git("log", "--reverse", "--first-parent", "--no-renames", "--name-only", "-z",
		"--format="+sep+"%H%x00%P%x00%ct%x00%(trailers:key=Corral-Task,valueonly,separator=)%x00"+
			"%(trailers:key=Corral-Session,valueonly,separator=)%x00%(trailers:key=Corral-Base,valueonly,separator=)%x00"+
			"%(trailers:key=Corral-Outcome,valueonly,separator=)%x00%s%x00",
		recorded+".."+head)
	if err != nil {
		return nil, err
	}
	var landed []landedCommit
	for _, rec := range strings.Split(out, sep)[1:] {
		f := strings.Split(rec, "\x00")
		if len(f) < 8 {
			return nil, fmt.Errorf("read head history: short record %q", rec)
		}
		var secs int64
		fmt.Sscan(f[2], &secs)
		c := landedCommit{commit: f[0], parent: strings.Fields(f[1] + " ")[0], time: time.Unix(secs, 0),
			task: strings.TrimSpace(f[3]), session: strings.TrimSpace(f[4]), base: strings.TrimSpace(f[5]),
			outcome: strings.TrimSpace(f[6]), subject: f[7]}
		for _, p := range f[8:] {
			if p = strings.Trim(p, "\n"); p != "" {
				c.paths = append(c.paths, p)
			}
		}
		landed = append(landed, c)
	}
	return landed, nil
}

// adoptLanded records, in the transaction that moves the fleet's recorded head, the
// publishes that reached the head while no supervisor could record them, so the store
// agrees with the head again: a Publish row and its event for each; the session that
// published it ended published rather than interrupted (its work is on the head), and
// its one-shot task done. It returns those sessions, whose layers can go.
func (s *Supervisor) adoptLanded(tx Tx, landed []landedCommit) ([]string, error) {
	if len(landed) == 0 {
		return nil, nil
	}
	pubs, err := tx.Publishes()
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, p := range pubs {
		if p.NewHead != "" {
			known[p.NewHead] = true
		}
	}
	var done []string
	for _, c := range landed {
		if known[c.commit] || c.session == "" {
			continue // recorded already, or not a publish (a commit made by hand)
		}
		outcome := c.outcome
		if outcome != OutcomeMerged {
			outcome = OutcomeAccepted
		}
		p := Publish{Task: c.task, Session: c.session, Outcome: outcome, Base: c.base, Head: c.parent,
			NewHead: c.commit, Paths: c.paths, Time: c.time,
			Message: "recorded at recovery: the head moved before the supervisor that published it could record it"}
		id, err := tx.AddPublish(p)
		if err != nil {
			return nil, err
		}
		tx.Emit(Event{Kind: "publish." + outcome, Task: c.task, Session: c.session, Data: jsonData(map[string]any{
			"publish": id, "new_head": c.commit, "paths": len(c.paths), "recovered": true})})
		ss, err := tx.Session(c.session)
		if err != nil {
			continue // the session record itself never made it: nothing else to mend
		}
		if ss.State.Live() || ss.State == SessionExited {
			code := 0
			ss.State, ss.Pid, ss.Ended, ss.ExitCode = SessionPublished, 0, s.now(), &code
			if err := tx.PutSession(ss); err != nil {
				return nil, err
			}
			done = append(done, ss.ID)
		}
		t, err := tx.Task(c.task)
		if err == nil && t.Lifetime == OneShot && !t.State.Ended() && ss.Attempt == t.Attempts {
			t.State, t.Reason, t.Updated = TaskDone, "", s.now()
			if err := tx.PutTask(t); err != nil {
				return nil, err
			}
			tx.Emit(Event{Kind: EvTaskDone, Task: t.ID, Session: ss.ID, Data: jsonData(map[string]any{"recovered": true})})
		}
	}
	return done, nil
}
