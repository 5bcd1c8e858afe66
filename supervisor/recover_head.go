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
	// early: at or before the recorded head, found by looking back; adopted only for
	// a session this fleet's store knows (a head reused from an earlier run of the
	// fleet holds that run's publishes too).
	early bool
}

// landedSince lists the publish commits on the head after recorded, oldest first: the
// head moves by compare-and-swap before the supervisor records the publish, so a
// supervisor that died in between leaves commits the store has not heard of. It also
// looks a few publishes before recorded (see lookBack); adoptLanded skips the ones
// the store knows.
func (s *Supervisor) landedSince(recorded, head string) ([]landedCommit, error) {
	if recorded == "" {
		return nil, nil
	}
	if _, err := s.repo.Git("merge-base", "--is-ancestor", recorded, head); err != nil {
		return nil, fmt.Errorf("the head %.12s does not descend from the recorded head %.12s (moved by hand?)", head, recorded)
	}
	from := s.lookBack(recorded)
	if from == head {
		return nil, nil
	}
	const sep = "\x1e"
	out, err := s.repo.Git("log", "--reverse", "--first-parent", "--no-renames", "--name-only", "-z",
		"--format="+sep+"%H%x00%P%x00%ct%x00%(trailers:key=Corral-Task,valueonly,separator=)%x00"+
			"%(trailers:key=Corral-Session,valueonly,separator=)%x00%(trailers:key=Corral-Base,valueonly,separator=)%x00"+
			"%(trailers:key=Corral-Outcome,valueonly,separator=)%x00%s%x00",
		from+".."+head)
	if err != nil {
		return nil, err
	}
	var landed []landedCommit
	early := from != recorded // until recorded itself has been read
	for _, rec := range strings.Split(out, sep)[1:] {
		f := strings.Split(rec, "\x00")
		if len(f) < 8 {
			return nil, fmt.Errorf("read head history: short record %q", rec)
		}
		var secs int64
		fmt.Sscan(f[2], &secs)
		c := landedCommit{commit: f[0], parent: strings.Fields(f[1] + " ")[0], time: time.Unix(secs, 0),
			task: strings.TrimSpace(f[3]), session: strings.TrimSpace(f[4]), base: strings.TrimSpace(f[5]),
			outcome: strings.TrimSpace(f[6]), subject: f[7], early: early}
		if c.commit == recorded {
			early = false
		}
		for _, p := range f[8:] {
			if p = strings.Trim(p, "\n"); p != "" {
				c.paths = append(c.paths, p)
			}
		}
		landed = append(landed, c)
	}
	return landed, nil
}

// lookBackPublishes is how far before the recorded head recovery also looks.
// Outcomes are recorded in the order they reach the loop, which differs from landing
// order by the few publishes in flight at once (an approval lands on the loop while a
// publish's outcome is on its way), so one that landed just before the recorded head
// may have no record yet.
const lookBackPublishes = 8

// lookBack returns the first-parent ancestor of recorded lookBackPublishes commits
// back, or the fleet's base if that comes first.
func (s *Supervisor) lookBack(recorded string) string {
	out, err := s.repo.Git("rev-list", "--first-parent", fmt.Sprintf("--max-count=%d", lookBackPublishes+1), recorded)
	if err != nil {
		return recorded
	}
	from := recorded
	for _, c := range strings.Fields(out) {
		from = c
		if c == s.fleet.Base {
			break
		}
	}
	return from
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
		if _, err := tx.Session(c.session); c.early && err != nil {
			continue
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
