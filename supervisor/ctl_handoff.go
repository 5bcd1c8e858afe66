package supervisor

import (
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"corral/policies"
)

// Handoff policies (Config.Handoffs).
const (
	HandoffInbox = "inbox" // a proposed task waits in the inbox for a human to accept
	HandoffAdmit = "admit" // a proposed task is queued at once
)

// HandoffResult is what `ctl handoff` returns: the proposed task and where it went.
type HandoffResult struct {
	Task  Task  `json:"task"`
	Inbox int64 `json:"inbox,omitempty"` // the inbox item to accept it by, under the inbox policy
}

// ctlHandoff proposes a follow-up task. The artifact must exist in the caller's
// workspace; a one-shot caller's follow-up runs after it is done, so it starts from a
// head that has the artifact. The acceptance command runs after the follow-up's agent,
// in the same sandbox: the attempt counts only if both succeed.
func (s *Supervisor) ctlHandoff(session, id string, flags map[string]string) (HandoffResult, error) {
	if err := policies.ValidTaskID(id); err != nil {
		return HandoffResult{}, fmt.Errorf("handoff: %w", err)
	}
	artifact, accept := flags["artifact"], strings.TrimSpace(flags["accept"])
	if artifact != "" {
		clean := filepath.Clean(artifact)
		if filepath.IsAbs(artifact) || clean == ".." || strings.HasPrefix(clean, "../") {
			return HandoffResult{}, fmt.Errorf("handoff --artifact %q: must be a path in the workspace, relative to its root", artifact)
		}
		artifact = clean
	}
	var intent []string
	for _, g := range strings.Split(flags["intent"], ",") {
		if g = strings.TrimSpace(g); g != "" {
			if err := policies.ValidIntent(g); err != nil {
				return HandoffResult{}, fmt.Errorf("handoff --intent: %w", err)
			}
			intent = append(intent, g)
		}
	}
	var res HandoffResult
	err := s.onSession(session, func(ls *liveSession, from *Task) error {
		if artifact != "" && !inWorkspace(append([]string{ls.sb.Upper()}, ls.sb.Lowers()...), artifact) {
			return fmt.Errorf("handoff --artifact %s: not in this session's workspace", artifact)
		}
		prompt := flags["prompt"]
		if prompt == "" {
			prompt = fmt.Sprintf("Follow up on task %s", from.ID)
		}
		if artifact != "" {
			prompt += "\nArtifact: " + artifact
		}
		if accept != "" {
			prompt += "\nAccepted when this passes: " + accept
		}
		agent := flags["agent"]
		if agent == "" {
			agent = from.Agent
		}
		if accept != "" {
			agent = "(" + agent + ") && (" + accept + ")"
		}
		t := Task{ID: id, Prompt: prompt, Agent: agent, Lifetime: OneShot, Intent: intent, Retries: from.Retries,
			CPU: from.CPU, Memory: from.Memory, Pids: from.Pids, Network: from.Network, EnvFiles: from.EnvFiles}
		if from.Lifetime == OneShot {
			t.After = []string{from.ID}
		}
		if err := s.addTasks([]Task{t}); err != nil {
			return fmt.Errorf("handoff: %w", err)
		}
		added := s.tasks[id]
		s.commit(func(tx Tx) error {
			tx.Emit(Event{Kind: EvHandoff, Task: from.ID, Session: session, Data: jsonData(map[string]any{
				"task": id, "artifact": artifact, "accept": accept, "policy": s.handoffPolicy()})})
			return nil
		})
		if s.handoffPolicy() == HandoffInbox {
			added.State, added.Reason = TaskInbox, fmt.Sprintf("handoff from %s: accept to queue it", session)
			s.saveTask(added)
			it := s.openInbox(InboxItem{Kind: InboxHandoff, Task: id, Session: session, Handoff: id,
				Text: fmt.Sprintf("%s proposes task %s: %s", from.ID, id, firstLine(prompt))})
			res.Inbox = it.ID
		}
		res.Task = *added
		return nil
	})
	s.kick()
	return res, err
}

func (s *Supervisor) handoffPolicy() string {
	if s.cfg.Handoffs == HandoffAdmit {
		return HandoffAdmit
	}
	return HandoffInbox
}

// decideHandoff queues a proposed task on yes, discards it otherwise. It runs on the loop.
func (s *Supervisor) decideHandoff(it *InboxItem, answer string) error {
	t := s.tasks[it.Handoff]
	if t == nil {
		return fmt.Errorf("handoff %s: %w", it.Handoff, ErrNotFound)
	}
	if t.State != TaskInbox {
		return notApplicable("handoff %s is %s already", t.ID, t.State)
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes", "accept", "ok":
		t.State, t.Reason = TaskQueued, "handoff accepted"
		s.saveTask(t, Event{Kind: EvTaskQueued, Task: t.ID, Data: jsonData(map[string]any{"handoff": it.Session})})
	default:
		t.State, t.Reason = TaskDiscarded, "handoff refused"
		s.saveTask(t, Event{Kind: EvTaskDiscarded, Task: t.ID, Data: jsonData(map[string]any{"reason": t.Reason})})
	}
	return nil
}

// inWorkspace reports whether rel exists in the overlay of layers (top first): the
// first layer that has it decides, and a whiteout (0/0 char device) there hides it.
func inWorkspace(layers []string, rel string) bool {
	for _, l := range layers {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(l, rel), &st); err != nil {
			continue
		}
		return !(st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0)
	}
	return false
}
