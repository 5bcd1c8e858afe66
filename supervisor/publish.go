package supervisor

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"corral/sandbox"
)

// Publish outcomes.
const (
	OutcomeAccepted  = "accepted"
	OutcomeMerged    = "merged"
	OutcomeRejected  = "rejected"
	OutcomeEscalated = "escalated"
	OutcomeEmpty     = "empty"
)

// PublishRequest is a session's changeset offered to the shared head. Change sources
// live in the session's layer, which stays in place until Publish returns.
type PublishRequest struct {
	Task    Task
	Session Session
	Changes sandbox.Changeset
}

// PublishResult is what a publish did.
type PublishResult struct {
	Outcome   string
	Head      string // head before
	NewHead   string // head after, when it moved
	Message   string
	Conflicts []Conflict
}

// Publisher integrates changesets onto the shared head, one at a time.
type Publisher interface {
	Publish(PublishRequest) (PublishResult, error)
}

// GitPublisher lands a changeset as one commit on the head branch when nothing it
// touches moved since its base, and rejects it whole otherwise: the head moves only by
// compare-and-swap, so it is either before or after, never between. (Three-way merges,
// typed conflict classes and path policies build on this in the publish engine.)
type GitPublisher struct {
	Repo    sandbox.Repo
	HeadRef string
	mu      sync.Mutex // publishes are serialized
}

// Publish implements Publisher.
func (g *GitPublisher) Publish(req PublishRequest) (PublishResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ref := "refs/heads/" + g.HeadRef
	out, err := g.Repo.Git("rev-parse", "--verify", ref)
	if err != nil {
		return PublishResult{}, fmt.Errorf("publish %s: read head: %w", req.Session.ID, err)
	}
	head := strings.TrimSpace(out)
	res := PublishResult{Head: head}
	if len(req.Changes) == 0 {
		res.Outcome, res.Message = OutcomeEmpty, "no changes"
		return res, nil
	}
	moved, err := g.movedSince(req.Session.Base, head)
	if err != nil {
		return res, fmt.Errorf("publish %s: %w", req.Session.ID, err)
	}
	for _, c := range req.Changes {
		if moved[c.Path] {
			res.Conflicts = append(res.Conflicts, Conflict{Path: c.Path, Class: "content",
				Base: req.Session.Base, Ours: req.Session.ID, Theirs: head})
		}
	}
	if len(res.Conflicts) > 0 {
		res.Outcome = OutcomeRejected
		res.Message = fmt.Sprintf("%d path(s) moved on the head since %.12s", len(res.Conflicts), req.Session.Base)
		return res, nil
	}
	commit, err := g.commit(req, head)
	if err != nil {
		return res, fmt.Errorf("publish %s: %w", req.Session.ID, err)
	}
	if _, err := g.Repo.Git("update-ref", "-m", "corral publish "+req.Session.ID, ref, commit, head); err != nil {
		return res, fmt.Errorf("publish %s: move head: %w", req.Session.ID, err)
	}
	res.Outcome, res.NewHead = OutcomeAccepted, commit
	res.Message = fmt.Sprintf("%d path(s)", len(req.Changes))
	return res, nil
}

// movedSince lists the paths the head changed since base.
func (g *GitPublisher) movedSince(base, head string) (map[string]bool, error) {
	moved := map[string]bool{}
	if base == head {
		return moved, nil
	}
	out, err := g.Repo.Git("diff", "--name-only", "--no-renames", "-z", base, head)
	if err != nil {
		return nil, fmt.Errorf("diff %.12s..%.12s: %w", base, head, err)
	}
	for _, p := range strings.Split(out, "\x00") {
		if p != "" {
			moved[p] = true
		}
	}
	return moved, nil
}

// commit builds the new tree against a temporary index (never a work tree) and
// writes one attributable commit on top of head.
func (g *GitPublisher) commit(req PublishRequest, head string) (string, error) {
	idx, err := os.CreateTemp(g.Repo.StateDir, "publish-index-")
	if err != nil {
		return "", err
	}
	idx.Close()
	defer os.Remove(idx.Name())
	env := []string{"GIT_INDEX_FILE=" + idx.Name()}
	if _, err := g.git(env, nil, "read-tree", head); err != nil {
		return "", err
	}
	var info bytes.Buffer
	for _, c := range req.Changes {
		if c.Kind == sandbox.Deleted {
			fmt.Fprintf(&info, "0 0000000000000000000000000000000000000000\t%s\x00", c.Path)
			continue
		}
		sha, mode, err := g.hashChange(c)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&info, "%s %s\t%s\x00", mode, sha, c.Path)
	}
	if _, err := g.git(env, info.Bytes(), "update-index", "-z", "--index-info"); err != nil {
		return "", err
	}
	tree, err := g.git(env, nil, "write-tree")
	if err != nil {
		return "", err
	}
	msg := fmt.Sprintf("%s: %s\n\nCorral-Task: %s\nCorral-Session: %s\nCorral-Base: %s\nCorral-Outcome: %s\n",
		req.Task.ID, firstLine(req.Task.Prompt), req.Task.ID, req.Session.ID, req.Session.Base, OutcomeAccepted)
	author := []string{"GIT_AUTHOR_NAME=corral " + req.Task.ID, "GIT_AUTHOR_EMAIL=" + req.Task.ID + "@corral.local",
		"GIT_COMMITTER_NAME=corral", "GIT_COMMITTER_EMAIL=corral@corral.local"}
	return g.git(author, []byte(msg), "commit-tree", tree, "-p", head)
}

// hashChange writes a change's content as a blob and returns it with its git mode.
func (g *GitPublisher) hashChange(c sandbox.Change) (sha, mode string, err error) {
	if c.Mode&fs.ModeSymlink != 0 {
		sha, err = g.git(nil, []byte(c.Link), "hash-object", "-w", "--stdin")
		return sha, "120000", err
	}
	mode = "100644"
	if c.Mode&0o111 != 0 {
		mode = "100755"
	}
	sha, err = g.git(nil, nil, "hash-object", "-w", "--no-filters", "--", c.Source)
	return sha, mode, err
}

func (g *GitPublisher) git(env []string, stdin []byte, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"--git-dir", g.Repo.GitDir}, args...)...)
	cmd.Dir = filepath.Dir(g.Repo.GitDir)
	cmd.Env = append(append(os.Environ(), "LC_ALL=C"), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 72 {
		s = s[:72]
	}
	return s
}
