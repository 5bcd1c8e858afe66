package supervisor

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ConflictReport is what a rejected attempt leaves for the next one, as JSON at
// $CORRAL_CONFLICT (and {{.ConflictFile}} in the agent template): why the changeset did
// not land, every path it carried, and the head commits that moved the paths it
// collided on — enough for an agent to redo its change on the new head.
type ConflictReport struct {
	Task      string           `json:"task"`
	Session   string           `json:"session"` // the rejected attempt
	Attempt   int              `json:"attempt"`
	Publish   int64            `json:"publish"`
	Base      string           `json:"base"` // what the rejected attempt started from
	Head      string           `json:"head"` // the head it was offered to; the retry starts here or later
	Message   string           `json:"message"`
	Conflicts []Conflict       `json:"conflicts"`
	Refused   []Refusal        `json:"refused,omitempty"`
	Paths     []string         `json:"paths"` // the rejected changeset's paths, none of which landed
	Commits   []ConflictCommit `json:"commits"`
}

// ConflictCommit is a head commit that moved a conflicting path.
type ConflictCommit struct {
	Commit  string   `json:"commit"`
	Task    string   `json:"task,omitempty"` // its Corral-Task trailer
	Subject string   `json:"subject"`
	Paths   []string `json:"paths"` // the conflicting paths it moved last
}

// conflictFile is where a task's latest conflict report lives.
func (s *Supervisor) conflictFile(task string) string {
	return filepath.Join(s.repo.StateDir, "conflicts", task+".json")
}

// conflictView is where a session reads its task's conflict report: a copy outside
// the repository, because the report's home in the host's .git is invisible to the
// session and sandbox binds may not overlap the repository.
func (s *Supervisor) conflictView(session string) string {
	sum := sha256.Sum256([]byte(s.repo.StateDir))
	return filepath.Join(os.TempDir(), fmt.Sprintf("corral-%x", sum[:6]), "conflict-"+session+".json")
}

// exposeConflict copies the report to the session's view and returns its path.
func (s *Supervisor) exposeConflict(report, session string) (string, error) {
	data, err := os.ReadFile(report)
	if err != nil {
		return "", fmt.Errorf("conflict report: %w", err)
	}
	view := s.conflictView(session)
	if err := os.MkdirAll(filepath.Dir(view), 0o755); err != nil {
		return "", fmt.Errorf("conflict report %s: %w", view, err)
	}
	if err := os.WriteFile(view, data, 0o644); err != nil {
		return "", fmt.Errorf("conflict report %s: %w", view, err)
	}
	return view, nil
}

// writeConflictReport stores the report a retry of the task will read.
func (s *Supervisor) writeConflictReport(p Publish, res PublishResult, conflicts []Conflict, attempt int) error {
	rep := ConflictReport{Task: p.Task, Session: p.Session, Attempt: attempt, Publish: p.ID, Base: p.Base,
		Head: res.Head, Message: res.Message, Conflicts: conflicts, Refused: res.Refused, Paths: p.Paths}
	byCommit := map[string][]string{}
	for path, c := range res.Moves {
		byCommit[c] = append(byCommit[c], path)
	}
	for c, paths := range byCommit {
		sort.Strings(paths)
		cc := ConflictCommit{Commit: c, Paths: paths}
		if out, err := s.repo.Git("log", "-1", "--format=%s%x00%(trailers:key=Corral-Task,valueonly)", c); err == nil {
			subj, task, _ := strings.Cut(out, "\x00")
			cc.Subject, cc.Task = subj, strings.TrimSpace(task)
		}
		rep.Commits = append(rep.Commits, cc)
	}
	sort.Slice(rep.Commits, func(i, j int) bool { return rep.Commits[i].Commit < rep.Commits[j].Commit })
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	path := s.conflictFile(p.Task)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("conflict report %s: %w", path, err)
	}
	// Write then rename: a retry starting meanwhile never reads half a report.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("conflict report %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// resolveMovedBy names, on each conflict, the publish whose commit last moved its path.
func (s *Supervisor) resolveMovedBy(conflicts []Conflict, moves map[string]string) {
	if len(moves) == 0 {
		return
	}
	var pubs []Publish
	if err := s.store.View(func(r Reader) error {
		var err error
		pubs, err = r.Publishes()
		return err
	}); err != nil {
		return
	}
	byCommit := map[string]int64{}
	for _, p := range pubs {
		if p.NewHead != "" {
			byCommit[p.NewHead] = p.ID
		}
	}
	for i := range conflicts {
		conflicts[i].MovedBy = byCommit[moves[conflicts[i].Path]]
	}
}

// rejectAttempt follows a rejected publish of a one-shot session: a fresh session at
// the new head if retries are left, else the human inbox — a task that cannot land is
// a decision for a person, not a silent failure.
func (s *Supervisor) rejectAttempt(t *Task, session, reason string) {
	if t.Attempts <= t.Retries {
		s.failAttempt(t, session, reason)
		return
	}
	t.State, t.Reason = TaskInbox, fmt.Sprintf("out of retries after %d attempt(s): %s", t.Attempts, reason)
	s.saveTask(t, Event{Kind: EvTaskInbox, Task: t.ID, Session: session, Data: jsonData(map[string]any{
		"reason": t.Reason, "attempts": t.Attempts, "conflict_file": s.conflictFile(t.ID)})})
	s.kick()
}

// EvTaskInbox: a task waits for a human (out of retries, an escalated publish, a red
// lane's hold). Its data's "reason" is the task's reason, whole.
const EvTaskInbox = "task.inbox"
