package supervisor

import (
	"fmt"
	"io/fs"
	"sort"

	"corral/policies"
	"corral/sandbox"
)

// RebaseRequest asks to carry a live session's changeset onto the current head.
type RebaseRequest struct {
	Session Session           // its Base is what the changes were made against
	Changes sandbox.Changeset // captured with the session frozen
	Rules   []policies.PathRule
}

// RebaseResult is a changeset moved onto a new base. Unlike a publish nothing is
// refused and nothing lands: every path comes out with some content, and the paths
// that clashed are listed for the agent to resolve.
type RebaseResult struct {
	Head string // the new base
	// Layer is the private layer the session continues from, relative to Head: only
	// paths whose result differs from the head.
	Layer     []sandbox.LayerEntry
	Moved     []string   // paths carried over untouched (the head had not changed them)
	Merged    []string   // text both sides changed, merged cleanly
	Conflicts []Conflict // clashes: text ones carry conflict markers, others keep the session's side
	Moves     map[string]string
}

// Rebaser is implemented by publishers that can rebase a session's changeset.
type Rebaser interface {
	Rebase(RebaseRequest) (RebaseResult, error)
}

// Rebase moves a changeset from its session's base onto the current head. For each
// path: a path the head did not touch moves as it is; the same change on both sides
// drops out; text both sides changed is three-way merged, and a clash leaves conflict
// markers (labelled with the session, the base and the head) and is listed; any other
// clash — modify/delete, binary, type — keeps the session's side and is listed, so
// nothing the agent wrote is lost. Union paths (changelogs) merge by line-union.
// The head does not move.
func (g *GitPublisher) Rebase(req RebaseRequest) (RebaseResult, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	id := req.Session.ID
	obj, err := openObjects(g.Repo.GitDir)
	if err != nil {
		return RebaseResult{}, fmt.Errorf("rebase %s: %w", id, err)
	}
	g.obj = obj
	defer func() { obj.close(); g.obj = nil }()
	head, typ, _, err := obj.readNamed("refs/heads/" + g.HeadRef)
	if err != nil || typ != "commit" {
		return RebaseResult{}, fmt.Errorf("rebase %s: read head %s: %v", id, g.HeadRef, err)
	}
	res := RebaseResult{Head: head}
	base := req.Session.Base
	ours, err := g.hashChanges(req.Changes)
	if err != nil {
		return res, fmt.Errorf("rebase %s: %w", id, err)
	}
	paths := make([]string, len(ours))
	for i, o := range ours {
		paths[i] = o.path
	}
	lookup := append(append([]string(nil), paths...), parentDirs(paths)...)
	baseTree, err := g.lsTree(base, lookup)
	if err != nil {
		return res, fmt.Errorf("rebase %s: %w", id, err)
	}
	headTree, err := g.lsTree(head, lookup)
	if err != nil {
		return res, fmt.Errorf("rebase %s: %w", id, err)
	}
	pol := g.policy(req.Rules)
	labels := [3]string{"session " + id, "base " + short(base), "head " + short(head)}
	for _, o := range ours {
		b, h := baseTree[o.path], headTree[o.path]
		keep := o.e // what the path becomes on the new base
		class := ""
		switch {
		case o.e.exists() && parentChanged(baseTree, headTree, o.path):
			class = ConflictType // the head put a file where the session needs a directory
		case h == b:
			res.Moved = append(res.Moved, o.path)
		case h == o.e:
			continue // the head has exactly this; nothing private is left
		case !o.e.exists():
			class = ConflictDeleteModify
		case !h.exists():
			class = ConflictModifyDelete
		case h.isTree() || h.kind() != o.e.kind() || (b.exists() && b.kind() != h.kind()):
			class = ConflictType
		case o.e.isLink():
			class = ConflictContent // a link target has no lines; the session's stays
		default:
			union := pol.Action(o.path) == policies.ActionUnion
			if !b.exists() && !union {
				class = ConflictAddAdd
			}
			mode, ok := mergeMode(b.mode, o.e.mode, h.mode)
			if !ok {
				mode = o.e.mode
			}
			sha, mc, err := g.mergeText(b.sha, o.e.sha, h.sha, mergeOpts{union: union, markers: true, labels: labels})
			if err != nil {
				return res, fmt.Errorf("rebase %s: %s: %w", id, o.path, err)
			}
			switch {
			case mc == ConflictBinary:
				class = ConflictBinary
			case mc != "" && class == "":
				class = mc
				keep = entry{mode: mode, sha: sha}
			case mc != "": // add-add with markers
				keep = entry{mode: mode, sha: sha}
			default:
				keep = entry{mode: mode, sha: sha}
				if class == "" {
					res.Merged = append(res.Merged, o.path)
				}
			}
		}
		if class != "" {
			res.Conflicts = append(res.Conflicts, Conflict{Path: o.path, Class: class, Base: b.sha, Ours: o.e.sha, Theirs: h.sha})
		}
		if keep == h {
			continue // a clean merge that came out as the head's version
		}
		le, err := g.layerEntry(o.path, keep)
		if err != nil {
			return res, fmt.Errorf("rebase %s: %w", id, err)
		}
		res.Layer = append(res.Layer, le)
	}
	if len(res.Conflicts) > 0 {
		if res.Moves, err = g.lastMoves(base, head, conflictPaths(res.Conflicts)); err != nil {
			return res, fmt.Errorf("rebase %s: %w", id, err)
		}
	}
	sort.Slice(res.Layer, func(i, j int) bool { return res.Layer[i].Path < res.Layer[j].Path })
	return res, nil
}

// layerEntry turns a tree entry into what the session's new layer holds at p.
func (g *GitPublisher) layerEntry(p string, e entry) (sandbox.LayerEntry, error) {
	if !e.exists() {
		return sandbox.LayerEntry{Path: p, Deleted: true}, nil
	}
	_, data, err := g.obj.read(e.sha)
	if err != nil {
		return sandbox.LayerEntry{}, fmt.Errorf("read %s (%.12s): %w", p, e.sha, err)
	}
	switch e.mode {
	case "120000":
		return sandbox.LayerEntry{Path: p, Mode: fs.ModeSymlink, Link: string(data)}, nil
	case "100755":
		return sandbox.LayerEntry{Path: p, Mode: 0o755, Data: data}, nil
	}
	return sandbox.LayerEntry{Path: p, Mode: 0o644, Data: data}, nil
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
