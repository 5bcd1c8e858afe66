package supervisor

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"corral/policies"
	"corral/sandbox"
)

// Publish outcomes.
const (
	OutcomeAccepted  = "accepted"
	OutcomeMerged    = "merged"
	OutcomeRejected  = "rejected"
	OutcomeEscalated = "escalated"
	OutcomeEmpty     = "empty"
	OutcomeDenied    = "denied" // an escalated publish a human turned down
)

// Conflict classes (Conflict.Class).
const (
	ConflictContent      = "content"       // both sides changed a text file and the merge clashed
	ConflictModifyDelete = "modify-delete" // the session modified a path the head deleted
	ConflictDeleteModify = "delete-modify" // the session deleted a path the head modified
	ConflictAddAdd       = "add-add"       // both added the path with different content
	ConflictBinary       = "binary"        // both changed a binary file
	ConflictType         = "type"          // file/dir/symlink/mode disagree
	ConflictProtected    = "protected"     // a reject rule or a refused path
)

// PublishRequest is a session's changeset offered to the shared head. Change sources
// live in the session's layer, which stays in place until Publish returns.
type PublishRequest struct {
	Task    Task
	Session Session
	Changes sandbox.Changeset
	// Pending, when set, is the commit an escalated publish left (the session's base
	// plus its changes); Changes is then ignored. Approved lets escalated paths merge.
	Pending  string
	Approved bool
	// Rules are the fleet's own path rules (the plan's [[policy]]), tried before the
	// publisher's.
	Rules []policies.PathRule
	// Message, when set, is the commit's subject instead of the task's prompt (an
	// agent's `corral ctl publish --message`).
	Message string
	// Onto, when set, makes the publish a candidate (pre gating): the changeset is
	// integrated onto this commit instead of the head, the resulting commit is returned
	// as NewHead without moving the head (Land moves it later), and the session's work
	// is kept as Pending (base plus its changes) so it can be rebuilt onto another commit.
	Onto string
}

// PublishResult is what a publish did.
type PublishResult struct {
	Outcome   string
	Head      string // head before
	NewHead   string // head after, when it moved
	Message   string
	Conflicts []Conflict
	Refused   []Refusal         // paths a changeset must never carry, with why
	Moves     map[string]string // conflicting path → the head commit that last moved it
	Merged    []string          // paths three-way merged or line-unioned
	Escalated []string          // paths that hold the publish for a human
	Pending   string            // escalated: commit of base + the session's changes, kept for approval
}

// Refusal is a path refused outright, before any merge is tried.
type Refusal struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Publisher integrates changesets onto the shared head, one at a time.
type Publisher interface {
	Publish(PublishRequest) (PublishResult, error)
}

// GitPublisher is the publish engine. For every changed path it compares the session's
// base, the session's version (ours) and the current head (theirs): paths the head did
// not touch take ours, text both sides changed is three-way merged, everything else is
// a typed conflict that rejects the changeset whole. The new tree is built with git
// plumbing against a temporary index — never a work tree — and the head moves only by
// compare-and-swap (update-ref NEW OLD), so a crash leaves it before or after.
type GitPublisher struct {
	Repo    sandbox.Repo
	HeadRef string
	Policy  policies.PathPolicy // zero value: the default rules
	mu      sync.Mutex          // publishes are serialized
	obj     *objects            // the running publish's object access, under mu
}

// Publish implements Publisher.
func (g *GitPublisher) Publish(req PublishRequest) (PublishResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	obj, err := openObjects(g.Repo.GitDir)
	if err != nil {
		return PublishResult{}, fmt.Errorf("publish %s: %w", req.Session.ID, err)
	}
	g.obj = obj
	defer func() { obj.close(); g.obj = nil }()
	ref := "refs/heads/" + g.HeadRef
	head, typ, _, err := obj.readNamed(ref)
	if err != nil || typ != "commit" {
		return PublishResult{}, fmt.Errorf("publish %s: read head %s: %v", req.Session.ID, g.HeadRef, err)
	}
	if len(head) != 40 {
		// Objects are hashed here with SHA-1; a SHA-256 repository would get ids git
		// cannot find, so refuse before writing any.
		return PublishResult{}, fmt.Errorf("publish %s: head %s: only SHA-1 repositories are supported", req.Session.ID, head)
	}
	if req.Onto != "" {
		head = req.Onto
	}
	res := PublishResult{Head: head}
	base := req.Session.Base
	var ours []oursEntry
	if req.Pending != "" {
		ours, err = g.pendingChanges(base, req.Pending)
	} else {
		if res.Refused = refusePaths(req.Changes, req.Task.EnvFiles); len(res.Refused) > 0 {
			return refusedResult(res), nil
		}
		ours, err = g.hashChanges(req.Changes)
	}
	if err != nil {
		return res, fmt.Errorf("publish %s: %w", req.Session.ID, err)
	}
	if len(ours) == 0 {
		res.Outcome, res.Message = OutcomeEmpty, "no changes"
		return res, nil
	}
	plan, err := g.integrate(base, head, ours, g.policy(req.Rules), req.Approved)
	if err != nil {
		return res, fmt.Errorf("publish %s: %w", req.Session.ID, err)
	}
	res.Conflicts, res.Merged, res.Escalated = plan.conflicts, plan.merged, plan.escalated
	switch {
	case len(plan.conflicts) > 0:
		if res.Moves, err = g.lastMoves(base, head, conflictPaths(plan.conflicts)); err != nil {
			return res, fmt.Errorf("publish %s: %w", req.Session.ID, err)
		}
		res.Outcome = OutcomeRejected
		res.Message = describeConflicts(plan.conflicts)
		return res, nil
	case len(plan.escalated) > 0:
		// Keep the session's work as a commit on its base so a human's approval can
		// re-run the publish against whatever the head is then, after the layer is gone.
		if res.Pending, err = g.pendingCommit(req, base, ours); err != nil {
			return res, fmt.Errorf("publish %s: %w", req.Session.ID, err)
		}
		res.Outcome = OutcomeEscalated
		res.Message = "needs approval: both sides changed " + strings.Join(plan.escalated, ", ")
		return res, nil
	}
	outcome := OutcomeAccepted
	if len(plan.merged) > 0 {
		outcome = OutcomeMerged
	}
	commit, empty, err := g.commit(req, head, plan.final, outcome)
	if err != nil {
		return res, fmt.Errorf("publish %s: %w", req.Session.ID, err)
	}
	if empty {
		res.Outcome, res.Message = OutcomeEmpty, "the head already has these changes"
		return res, nil
	}
	if req.Onto != "" {
		res.Pending = req.Pending
		if res.Pending == "" {
			if res.Pending, err = g.keepWork(req, base, ours, candidateRef(req.Session.ID)); err != nil {
				return res, fmt.Errorf("publish %s: %w", req.Session.ID, err)
			}
		}
		res.Outcome, res.NewHead = outcome, commit
		res.Message = fmt.Sprintf("%d path(s), candidate on %.12s", len(ours), head)
		return res, nil
	}
	if _, err := g.git(nil, nil, "update-ref", "-m", "corral publish "+req.Session.ID, ref, commit, head); err != nil {
		return res, fmt.Errorf("publish %s: move head %.12s→%.12s: %w", req.Session.ID, head, commit, err)
	}
	res.Outcome, res.NewHead = outcome, commit
	res.Message = fmt.Sprintf("%d path(s)", len(ours))
	if len(plan.merged) > 0 {
		res.Message += ", merged " + strings.Join(plan.merged, ", ")
	}
	return res, nil
}

// candidateRef keeps a pre-gated publish's work until it lands or is rejected.
func candidateRef(session string) string { return "refs/corral/candidates/" + session }

// Land moves the head from old to a candidate commit Publish built with Onto = old,
// by compare-and-swap: it fails, and nothing moves, if the head is not at old or the
// candidate was not built on old (each landed publish stays one commit on the head).
func (g *GitPublisher) Land(commit, old string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if parent, err := g.git(nil, nil, "rev-parse", "--verify", commit+"^"); err != nil || parent != old {
		return fmt.Errorf("land %.12s: built on %.12s, not on %.12s (%v)", commit, parent, old, err)
	}
	if _, err := g.git(nil, nil, "update-ref", "-m", "corral land "+commit, "refs/heads/"+g.HeadRef, commit, old); err != nil {
		return fmt.Errorf("land %.12s on %.12s: %w", commit, old, err)
	}
	return nil
}

// Forget drops the ref that kept a candidate's work.
func (g *GitPublisher) Forget(session string) {
	g.git(nil, nil, "update-ref", "-d", candidateRef(session))
}

// policy puts the request's rules ahead of the publisher's (or the defaults).
func (g *GitPublisher) policy(rules []policies.PathRule) policies.PathPolicy {
	pol := g.Policy
	if pol.Rules == nil {
		pol = policies.NewPathPolicy(nil)
	}
	pol.Rules = append(append([]policies.PathRule(nil), rules...), pol.Rules...)
	return pol
}

func refusedResult(res PublishResult) PublishResult {
	res.Outcome = OutcomeRejected
	var msgs []string
	for _, r := range res.Refused {
		res.Conflicts = append(res.Conflicts, Conflict{Path: r.Path, Class: ConflictProtected})
		msgs = append(msgs, r.Path+": "+r.Reason)
	}
	res.Message = "refused: " + strings.Join(msgs, "; ")
	return res
}

func conflictPaths(cs []Conflict) []string {
	var ps []string
	for _, c := range cs {
		ps = append(ps, c.Path)
	}
	return ps
}

// describeConflicts says, in one line, what rejected a publish.
func describeConflicts(cs []Conflict) string {
	byClass := map[string][]string{}
	for _, c := range cs {
		byClass[c.Class] = append(byClass[c.Class], c.Path)
	}
	var parts []string
	for class, ps := range byClass {
		parts = append(parts, fmt.Sprintf("%s conflict on %s", class, strings.Join(ps, ", ")))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 72 {
		s = s[:72]
	}
	return s
}
