package supervisor

import (
	"io/fs"
	"path"
	"strings"

	"corral/policies"
	"corral/sandbox"
)

// entry is one tree entry: a git mode ("100644", "100755", "120000", "040000") and an
// object id. The zero entry means absent.
type entry struct {
	mode, sha string
}

func (e entry) exists() bool { return e.sha != "" }
func (e entry) isTree() bool { return e.mode == "040000" }
func (e entry) isLink() bool { return e.mode == "120000" }
func (e entry) kind() string { // file, symlink or dir: what a mode-only change cannot reconcile
	switch {
	case e.isTree():
		return "dir"
	case e.isLink():
		return "symlink"
	}
	return "file"
}

// oursEntry is the session's version of one path; a zero entry deletes it.
type oursEntry struct {
	path string
	e    entry
}

// integration is what the per-path comparison decided.
type integration struct {
	final     []oursEntry // what to write on top of head
	merged    []string
	escalated []string
	conflicts []Conflict
}

// refusePaths names the paths no changeset may carry: outside the repository, inside
// .git, symlinks that resolve outside the workspace, and env-layer files (which the
// session saw read-only from the user's work tree and must never publish).
func refusePaths(cs sandbox.Changeset, envFiles []string) []Refusal {
	var out []Refusal
	for _, c := range cs {
		if reason := refuseReason(c, envFiles); reason != "" {
			out = append(out, Refusal{Path: c.Path, Reason: reason})
		}
	}
	return out
}

func refuseReason(c sandbox.Change, envFiles []string) string {
	p := c.Path
	if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return "outside the repository"
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".git" {
			return "inside .git (repository metadata is never published)"
		}
	}
	for _, env := range envFiles {
		env = strings.Trim(path.Clean(env), "/")
		if p == env || strings.HasPrefix(p, env+"/") {
			return "env-layer file " + env + " (read-only from the work tree, never published)"
		}
	}
	if c.Kind != sandbox.Deleted && c.Mode&fs.ModeSymlink != 0 {
		if strings.HasPrefix(c.Link, "/") {
			return "symlink to absolute path " + c.Link + " escapes the workspace"
		}
		target := path.Join(path.Dir(p), c.Link)
		if target == ".." || strings.HasPrefix(target, "../") {
			return "symlink to " + c.Link + " escapes the workspace"
		}
		if target == ".git" || strings.HasPrefix(target, ".git/") {
			return "symlink to " + c.Link + " points into .git"
		}
	}
	return ""
}

// integrate compares base, ours and theirs (head) for every path of ours and decides
// what lands. approved lets escalated paths merge (a human said yes).
func (g *GitPublisher) integrate(base, head string, ours []oursEntry, pol policies.PathPolicy, approved bool) (integration, error) {
	var in integration
	paths := make([]string, 0, len(ours))
	for _, o := range ours {
		paths = append(paths, o.path)
	}
	// Parents are looked up too: a file on the head where ours needs a directory
	// (or the reverse) is a type conflict that update-index would silently resolve.
	lookup := append(append([]string(nil), paths...), parentDirs(paths)...)
	baseTree, err := g.lsTree(base, lookup)
	if err != nil {
		return in, err
	}
	headTree, err := g.lsTree(head, lookup)
	if err != nil {
		return in, err
	}
	for _, o := range ours {
		b, h := baseTree[o.path], headTree[o.path]
		conflict := func(class string) {
			in.conflicts = append(in.conflicts, Conflict{Path: o.path, Class: class, Base: b.sha, Ours: o.e.sha, Theirs: h.sha})
		}
		action := pol.Action(o.path)
		if action == policies.ActionReject {
			conflict(ConflictProtected)
			continue
		}
		if o.e.exists() && ((h.isTree() && h != b) || parentChanged(baseTree, headTree, o.path)) {
			conflict(ConflictType)
			continue
		}
		switch {
		case h == b: // the head did not touch it since base: take ours
			in.final = append(in.final, o)
			continue
		case h == o.e: // both made the same change
			continue
		case !o.e.exists():
			conflict(ConflictDeleteModify)
			continue
		case !h.exists():
			conflict(ConflictModifyDelete)
			continue
		case h.kind() != o.e.kind() || (b.exists() && b.kind() != h.kind()):
			conflict(ConflictType)
			continue
		}
		// Both changed (or both added) the same path of the same kind.
		if action == policies.ActionEscalate && !approved {
			in.escalated = append(in.escalated, o.path)
			continue
		}
		if !b.exists() && action != policies.ActionUnion {
			conflict(ConflictAddAdd)
			continue
		}
		mode, ok := mergeMode(b.mode, o.e.mode, h.mode)
		if !ok {
			conflict(ConflictType)
			continue
		}
		if o.e.isLink() {
			conflict(ConflictContent) // a symlink target has no lines to merge
			continue
		}
		sha, class, err := g.mergeBlobs(b.sha, o.e.sha, h.sha, action == policies.ActionUnion)
		if err != nil {
			return in, err
		}
		if class != "" {
			conflict(class)
			continue
		}
		in.final = append(in.final, oursEntry{path: o.path, e: entry{mode: mode, sha: sha}})
		in.merged = append(in.merged, o.path)
	}
	return in, nil
}

// mergeMode three-way merges the exec bit: a side that kept the base mode yields.
func mergeMode(base, ours, theirs string) (string, bool) {
	switch {
	case ours == theirs:
		return ours, true
	case ours == base:
		return theirs, true
	case theirs == base || base == "":
		return ours, base != "" // an add-add with two modes cannot pick one
	}
	return "", false
}

// parentDirs lists every proper parent directory of paths, once.
func parentDirs(paths []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		for d := path.Dir(p); d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// parentChanged reports whether the head made some parent of p a non-directory since
// base: then ours needs a directory where the head put a file or symlink.
func parentChanged(base, head map[string]entry, p string) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if e, ok := head[d]; ok && !e.isTree() && base[d] != e {
			return true
		}
	}
	return false
}
