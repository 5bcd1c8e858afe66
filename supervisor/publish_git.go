package supervisor

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"corral/sandbox"
)

const zeroSHA = "0000000000000000000000000000000000000000"

// hashChanges writes the changeset's contents as blobs and returns ours per path.
// The objects are hashed and written here, not by `git hash-object`: a publish costs a
// handful of processes however many paths it carries.
func (g *GitPublisher) hashChanges(cs sandbox.Changeset) ([]oursEntry, error) {
	out := make([]oursEntry, len(cs))
	for i, c := range cs {
		out[i].path = c.Path
		switch {
		case c.Kind == sandbox.Deleted:
		case c.Mode&fs.ModeSymlink != 0:
			sha, err := g.obj.write("blob", []byte(c.Link))
			if err != nil {
				return nil, fmt.Errorf("hash symlink %s: %w", c.Path, err)
			}
			out[i].e = entry{mode: "120000", sha: sha}
		default:
			// Read as stored, no filters: the sandbox holds the repository's bytes.
			data, err := os.ReadFile(c.Source)
			if err != nil {
				return nil, fmt.Errorf("hash %s: %w", c.Path, err)
			}
			sha, err := g.obj.write("blob", data)
			if err != nil {
				return nil, fmt.Errorf("hash %s: %w", c.Path, err)
			}
			mode := "100644"
			if c.Mode&0o111 != 0 {
				mode = "100755"
			}
			out[i].e = entry{mode: mode, sha: sha}
		}
	}
	return out, nil
}

// pendingChanges reads ours back from an escalated publish's pending commit.
func (g *GitPublisher) pendingChanges(base, pending string) ([]oursEntry, error) {
	raw, err := g.git(nil, nil, "diff-tree", "-r", "-z", "--no-renames", base, pending)
	if err != nil {
		return nil, fmt.Errorf("read pending %.12s: %w", pending, err)
	}
	// -z raw format: ":oldmode newmode oldsha newsha status\0path\0" per path.
	f := strings.Split(strings.TrimSuffix(raw, "\x00"), "\x00")
	var out []oursEntry
	for i := 0; i+1 < len(f); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(f[i], ":"))
		if len(meta) < 5 {
			return nil, fmt.Errorf("read pending %.12s: bad diff-tree line %q", pending, f[i])
		}
		o := oursEntry{path: f[i+1]}
		if meta[3] != zeroSHA {
			o.e = entry{mode: meta[1], sha: meta[3]}
		}
		out = append(out, o)
	}
	return out, nil
}

// lsTree returns the entries of rev at exactly the given paths (directories as tree
// entries, not their contents). Absent paths are absent from the map.
func (g *GitPublisher) lsTree(rev string, paths []string) (map[string]entry, error) {
	tree := map[string]entry{}
	root, err := g.obj.commitTree(rev)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		e, err := g.obj.lookup(root, p)
		if err != nil {
			return nil, fmt.Errorf("%.12s:%s: %w", rev, p, err)
		}
		if e.exists() {
			tree[p] = e
		}
	}
	return tree, nil
}

// mergeBlobs three-way merges text blobs with git merge-file (git 2.39 has no
// --object-id, so the three versions go through temporary files). class is
// ConflictBinary or ConflictContent when they do not merge.
func (g *GitPublisher) mergeBlobs(base, ours, theirs string, union bool) (sha, class string, err error) {
	return g.mergeText(base, ours, theirs, mergeOpts{union: union})
}

// mergeOpts says how mergeText merges. markers keeps a clashing merge's result, conflict
// markers and all, labelled with labels (ours, base, theirs) — what a rebase leaves in
// the workspace for the agent to resolve.
type mergeOpts struct {
	union   bool
	markers bool
	labels  [3]string
}

// mergeText is mergeBlobs with options; with markers, a clashing merge returns the
// blob of the marked-up result together with ConflictContent.
func (g *GitPublisher) mergeText(base, ours, theirs string, opt mergeOpts) (sha, class string, err error) {
	dir, err := os.MkdirTemp(g.Repo.StateDir, "merge-")
	if err != nil {
		return "", "", fmt.Errorf("merge: %w", err)
	}
	defer os.RemoveAll(dir)
	names := [3]string{}
	for i, id := range []string{ours, base, theirs} {
		var data []byte
		if id != "" {
			_, s, err := g.obj.read(id)
			if err != nil {
				return "", "", fmt.Errorf("merge: read %.12s: %w", id, err)
			}
			data = s
		}
		// git's own test for binary: a NUL in the first 8000 bytes.
		if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
			return "", ConflictBinary, nil
		}
		names[i] = filepath.Join(dir, []string{"ours", "base", "theirs"}[i])
		if err := os.WriteFile(names[i], data, 0o600); err != nil {
			return "", "", fmt.Errorf("merge: %w", err)
		}
	}
	args := []string{"merge-file", "-p"}
	if opt.union {
		args = append(args, "--union")
	}
	for _, l := range opt.labels {
		if l != "" {
			args = append(args, "-L", l)
		}
	}
	cmd := exec.Command("git", append(args, names[0], names[1], names[2])...)
	merged, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() > 0 && ee.ExitCode() < 127 {
			// The exit code is the number of clashing hunks.
			if !opt.markers {
				return "", ConflictContent, nil
			}
			sha, err = g.obj.write("blob", merged)
			return sha, ConflictContent, err
		}
		return "", "", fmt.Errorf("merge-file: %w", err)
	}
	sha, err = g.obj.write("blob", merged)
	return sha, "", err
}

// lastMoves finds, for each path, the newest commit in base..head that changed it.
func (g *GitPublisher) lastMoves(base, head string, paths []string) (map[string]string, error) {
	moves := map[string]string{}
	if base == head || len(paths) == 0 {
		return moves, nil
	}
	out, err := g.git([]string{"GIT_LITERAL_PATHSPECS=1"}, nil,
		append(append([]string{"log", "--no-renames", "--format=@%H", "--name-only", "-z", base + ".." + head, "--"}, paths...), parentDirs(paths)...)...)
	if err != nil {
		return nil, fmt.Errorf("log %.12s..%.12s: %w", base, head, err)
	}
	commit := ""
	for _, tok := range strings.FieldsFunc(out, func(r rune) bool { return r == 0 || r == '\n' }) {
		if strings.HasPrefix(tok, "@") && len(tok) == 41 {
			commit = tok[1:]
			continue
		}
		// A type conflict's path may be a parent or a child of what the head changed.
		for _, p := range paths {
			if _, seen := moves[p]; !seen && commit != "" && (tok == p || strings.HasPrefix(tok, p+"/") || strings.HasPrefix(p, tok+"/")) {
				moves[p] = commit
			}
		}
	}
	return moves, nil
}

// writeTree applies ours on top of parent's tree and writes the trees that change.
func (g *GitPublisher) writeTree(parent string, ours []oursEntry) (string, error) {
	root, err := g.obj.commitTree(parent)
	if err != nil {
		return "", err
	}
	changes := make(map[string]entry, len(ours))
	for _, o := range ours {
		changes[o.path] = o.e
	}
	tree, err := g.obj.applyTree(root, changes)
	if err != nil {
		return "", err
	}
	if tree == "" { // everything deleted: git's empty tree
		return g.obj.write("tree", nil)
	}
	return tree, nil
}

// commit writes one attributable commit of ours on top of head. empty: the tree
// would not change.
func (g *GitPublisher) commit(req PublishRequest, head string, ours []oursEntry, outcome string) (string, bool, error) {
	tree, err := g.writeTree(head, ours)
	if err != nil {
		return "", false, err
	}
	headTree, err := g.obj.commitTree(head)
	if err != nil {
		return "", false, err
	}
	if tree == headTree {
		return "", true, nil
	}
	subject := firstLine(req.Task.Prompt)
	if req.Message != "" {
		subject = firstLine(req.Message)
	}
	msg := fmt.Sprintf("%s: %s\n\nCorral-Task: %s\nCorral-Session: %s\nCorral-Base: %s\nCorral-Outcome: %s\n",
		req.Task.ID, subject, req.Task.ID, req.Session.ID, req.Session.Base, outcome)
	commit, err := g.writeCommit(req.Task.ID, tree, head, msg)
	return commit, false, err
}

// pendingCommit records an escalated publish's work — base plus ours — as a commit
// under refs/corral/escalated/, so it survives the session's layer and gc.
func (g *GitPublisher) pendingCommit(req PublishRequest, base string, ours []oursEntry) (string, error) {
	return g.keepWork(req, base, ours, "refs/corral/escalated/"+req.Session.ID)
}

// keepWork writes base plus ours as a commit and points ref at it.
func (g *GitPublisher) keepWork(req PublishRequest, base string, ours []oursEntry, ref string) (string, error) {
	tree, err := g.writeTree(base, ours)
	if err != nil {
		return "", err
	}
	msg := fmt.Sprintf("%s: %s (escalated)\n\nCorral-Task: %s\nCorral-Session: %s\nCorral-Base: %s\nCorral-Outcome: %s\n",
		req.Task.ID, firstLine(req.Task.Prompt), req.Task.ID, req.Session.ID, base, OutcomeEscalated)
	commit, err := g.writeCommit(req.Task.ID, tree, base, msg)
	if err != nil {
		return "", err
	}
	if _, err := g.git(nil, nil, "update-ref", ref, commit); err != nil {
		return "", err
	}
	return commit, nil
}

// writeCommit writes a commit authored by the task, committed by corral.
func (g *GitPublisher) writeCommit(task, tree, parent, msg string) (string, error) {
	now := time.Now()
	stamp := fmt.Sprintf("%d %s", now.Unix(), now.Format("-0700"))
	clean := func(s string) string { return strings.NewReplacer("<", "", ">", "", "\n", " ").Replace(s) }
	body := fmt.Sprintf("tree %s\nparent %s\nauthor corral %s <%s@corral.local> %s\ncommitter corral <corral@corral.local> %s\n\n%s",
		tree, parent, clean(task), clean(task), stamp, stamp, msg)
	return g.obj.write("commit", []byte(body))
}

func (g *GitPublisher) git(env []string, stdin []byte, args ...string) (string, error) {
	out, err := g.gitRaw(env, stdin, args...)
	return strings.TrimSpace(string(out)), err
}

func (g *GitPublisher) gitRaw(env []string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"--git-dir", g.Repo.GitDir}, args...)...)
	cmd.Dir = g.Repo.GitDir
	cmd.Env = append(append(os.Environ(), "LC_ALL=C"), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
