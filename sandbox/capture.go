package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// ChangeKind classifies one path of a changeset the way git status does.
type ChangeKind string

// The kinds of change; a rename is a Deleted plus an Added, as in git's raw diff.
const (
	Added    ChangeKind = "added"
	Modified ChangeKind = "modified"
	Deleted  ChangeKind = "deleted"
)

// Change is one file or symlink that differs between a session and its base.
type Change struct {
	Path    string      // slash-separated, relative to the workspace root
	Kind    ChangeKind  // added, modified or deleted
	Mode    fs.FileMode // new mode: 0644 or 0755 (git's exec bit), fs.ModeSymlink; 0 when deleted
	OldMode fs.FileMode // base mode, same encoding; 0 when added
	Source  string      // absolute path of the new content ("" when deleted)
	Link    string      // symlink target when Mode is a symlink
}

// Changeset is a session's changes sorted by Path: files and symlinks only, no
// directory entries, like git.
type Changeset []Change

// CaptureOptions says where a session's layers are.
type CaptureOptions struct {
	Upper   string   // the session's upper dir
	Lowers  []string // lower layer dirs, top first (env layer first if any, then snapshot layers)
	Exclude []string // workspace-relative paths (files or dir prefixes) never captured: env-layer paths
}

// Capture computes a session's changeset from its overlay upper dir alone, reading
// the lower layers only where the upper dir touches them. The overlay must be
// unmounted or its session frozen, mounted with redirect_dir=on and without metacopy
// (a metacopy upper file holds no data).
//
// Only the upper dir can differ from the base, so for a directory whose lower origin
// is the base directory at the same path, only its upper entries need a look. A
// directory renamed (trusted.overlay.redirect) or made opaque over a base directory
// has a different origin: its whole merged content is listed and diffed against the
// base listing at its path.
func Capture(opts CaptureOptions) (Changeset, error) {
	cs, _, err := capture(opts)
	return cs, err
}

// capture is Capture that also returns the added files git would ignore (build
// output, caches): never part of a changeset, but part of the session's work tree.
func capture(opts CaptureOptions) (Changeset, Changeset, error) {
	if opts.Upper == "" {
		return nil, nil, fmt.Errorf("capture: no upper dir")
	}
	c := &capturer{
		root:    rootLowerDir(opts.Lowers),
		exclude: newCaptureExcluder(opts.Exclude),
		dirs:    map[string]mergedDir{},
	}
	root := mergedDir{upper: opts.Upper, origin: c.root, hasOrigin: true}
	if err := c.walk(root, c.root); err != nil {
		return nil, nil, fmt.Errorf("capture %s: %w", opts.Upper, err)
	}
	excludeFile, err := c.root.readFile(".git/info/exclude")
	if err != nil {
		return nil, nil, fmt.Errorf("capture %s: %w", opts.Upper, err)
	}
	m := newIgnoreMatcher(excludeFile, func(dir string) ([]byte, error) {
		d, ok := c.dirs[dir]
		if !ok {
			return nil, nil // never walked: it holds no added file to judge
		}
		return d.readFile(".gitignore")
	})
	out, ignored, err := finishChanges(c.changes, m)
	if err != nil {
		return nil, nil, fmt.Errorf("capture %s: %w", opts.Upper, err)
	}
	return out, ignored, nil
}

// mergedDir is one directory of the session's merged view.
type mergedDir struct {
	path       string    // workspace path ("" for the root)
	upper      string    // absolute upper dir; "" when the dir lies wholly in the lowers
	origin     *lowerDir // the lower dir merged under it; nil when none
	originPath string    // workspace path of origin
	hasOrigin  bool      // false for an opaque dir or one under it
}

// sameOrigin reports whether the lower part of d is the base dir at d's own path, so
// every name absent from the upper dir is unchanged.
func (d mergedDir) sameOrigin() bool { return d.hasOrigin && d.originPath == d.path }

// child derives the merged dir of the subdirectory name, given its upper entry (upperAbs
// is "" when the subdir exists only in the lowers).
func (d mergedDir) child(name, upperAbs string, root *lowerDir) (mergedDir, error) {
	ch := mergedDir{path: path.Join(d.path, name), upper: upperAbs}
	if upperAbs != "" {
		opaque, err := isOpaqueDir(upperAbs)
		if err != nil {
			return ch, err
		}
		// The kernel checks opaque before redirect: an opaque dir merges nothing.
		if opaque {
			return ch, nil
		}
		redirect, err := redirectOf(upperAbs)
		if err != nil {
			return ch, err
		}
		if strings.HasPrefix(redirect, "/") {
			ch.originPath, ch.hasOrigin = strings.Trim(redirect, "/"), true
			n, err := root.resolve(ch.originPath)
			if n.kind == kindDir {
				ch.origin = n.dir
			}
			return ch, err
		}
		if redirect != "" {
			name = redirect // relative: a sibling in the parent's origin
		}
	}
	if !d.hasOrigin {
		return ch, nil
	}
	ch.originPath, ch.hasOrigin = path.Join(d.originPath, name), true
	n, err := d.origin.lookup(name)
	if n.kind == kindDir {
		ch.origin = n.dir
	}
	return ch, err
}

// readFile reads a regular file of the merged view in d; nil when absent. Git does not
// follow a symlinked .gitignore, so a symlink counts as absent.
func (d mergedDir) readFile(name string) ([]byte, error) {
	if d.upper != "" {
		e, err := lstatEntry(filepath.Join(d.upper, name))
		if err != nil {
			return nil, err
		}
		if e.info != nil {
			if e.kind != kindFile || !e.info.Mode().IsRegular() {
				return nil, nil
			}
			return readLayerFile(e.abs)
		}
	}
	n, err := d.origin.lookup(name)
	if err != nil || n.kind != kindFile || !n.file.info.Mode().IsRegular() {
		return nil, err
	}
	return readLayerFile(n.file.abs)
}

// readFile reads a regular file of the lower stack by workspace path; nil when absent.
func (d *lowerDir) readFile(rel string) ([]byte, error) {
	n, err := d.resolve(rel)
	if err != nil || n.kind != kindFile || !n.file.info.Mode().IsRegular() {
		return nil, err
	}
	return readLayerFile(n.file.abs)
}

func readLayerFile(abs string) ([]byte, error) {
	b, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", abs, err)
	}
	return b, nil
}

type capturer struct {
	root    *lowerDir
	exclude captureExcluder
	dirs    map[string]mergedDir // every walked dir, for reading .gitignore files later
	changes []Change
}

// newEntry is what a name is in the session's merged view.
type newEntry struct {
	kind entryKind // kindNone, kindFile or kindDir
	file treeFile
	dir  mergedDir
}

// walk diffs the merged dir d against base, the lower dir at d's path (nil when the
// base has no dir there).
func (c *capturer) walk(d mergedDir, base *lowerDir) error {
	c.dirs[d.path] = d
	upper := map[string]layerEntry{}
	if d.upper != "" {
		names, err := dirNames(d.upper)
		if err != nil {
			return err
		}
		for _, name := range names {
			e, err := lstatEntry(filepath.Join(d.upper, name))
			if err != nil {
				return err
			}
			upper[name] = e
		}
	}
	if d.sameOrigin() {
		// base == d.origin: names only in the lowers are unchanged.
		for name, e := range upper {
			if err := c.diffName(d, name, e, true, base); err != nil {
				return err
			}
		}
		return nil
	}
	names := map[string]bool{}
	for name := range upper {
		names[name] = true
	}
	for _, l := range []*lowerDir{d.origin, base} {
		listed, err := l.names()
		if err != nil {
			return err
		}
		for _, name := range listed {
			names[name] = true
		}
	}
	for name := range names {
		e, inUpper := upper[name]
		if err := c.diffName(d, name, e, inUpper, base); err != nil {
			return err
		}
	}
	return nil
}

// diffName compares one name of d (its upper entry when inUpper, else whatever d's
// origin has) with the base dir.
func (c *capturer) diffName(d mergedDir, name string, up layerEntry, inUpper bool, base *lowerDir) error {
	p := path.Join(d.path, name)
	if c.exclude.excluded(p) {
		return nil
	}
	var nw newEntry
	switch {
	case inUpper && up.kind == kindFile:
		nw = newEntry{kind: kindFile, file: treeFile{abs: up.abs, info: up.info}}
	case inUpper && up.kind == kindDir:
		ch, err := d.child(name, up.abs, c.root)
		if err != nil {
			return err
		}
		nw = newEntry{kind: kindDir, dir: ch}
	case inUpper: // whiteout or a type git does not track
	default:
		n, err := d.origin.lookup(name)
		if err != nil {
			return err
		}
		switch n.kind {
		case kindFile:
			nw = newEntry{kind: kindFile, file: treeFile{abs: n.file.abs, info: n.file.info}}
		case kindDir:
			ch, err := d.child(name, "", c.root)
			if err != nil {
				return err
			}
			nw = newEntry{kind: kindDir, dir: ch}
		}
	}
	b, err := base.lookup(name)
	if err != nil {
		return err
	}
	return c.diffEntry(p, nw, b)
}

// diffEntry records the changes between one new entry and the base node at path p.
func (c *capturer) diffEntry(p string, nw newEntry, b lowerNode) error {
	if b.kind == kindFile && nw.kind == kindFile {
		ch, err := compareFiles(p, treeFile{abs: b.file.abs, info: b.file.info}, nw.file)
		if err != nil || ch == nil {
			return err
		}
		c.changes = append(c.changes, *ch)
		return nil
	}
	switch b.kind {
	case kindFile:
		c.changes = append(c.changes, deletedChange(p, b.file.info))
	case kindDir:
		if nw.kind != kindDir {
			if err := c.deleteAll(b.dir, p); err != nil {
				return err
			}
		}
	}
	switch nw.kind {
	case kindFile:
		ch, err := addedChange(p, nw.file)
		if err != nil {
			return err
		}
		c.changes = append(c.changes, ch)
	case kindDir:
		var baseDir *lowerDir
		if b.kind == kindDir {
			baseDir = b.dir
		}
		return c.walk(nw.dir, baseDir)
	}
	return nil
}

// deleteAll records every base file under the lower dir d as deleted.
func (c *capturer) deleteAll(d *lowerDir, p string) error {
	files := map[string]treeFile{}
	if err := walkLower(d, p, files); err != nil {
		return err
	}
	for fp, f := range files {
		if !c.exclude.excluded(fp) {
			c.changes = append(c.changes, deletedChange(fp, f.info))
		}
	}
	return nil
}

// names lists the merged names of a lower dir (nil-safe).
func (d *lowerDir) names() ([]string, error) {
	m, err := d.list()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(m))
	for name := range m {
		out = append(out, name)
	}
	return out, nil
}

// captureExcluder answers whether a workspace path is never captured: the top-level .git
// and the env-layer paths, each with everything under it.
type captureExcluder []string

func newCaptureExcluder(paths []string) captureExcluder {
	ex := captureExcluder{".git"}
	for _, p := range paths {
		p = strings.Trim(path.Clean("/"+filepath.ToSlash(p)), "/")
		if p != "" {
			ex = append(ex, p)
		}
	}
	return ex
}

func (ex captureExcluder) excluded(p string) bool {
	for _, e := range ex {
		if p == e || (strings.HasPrefix(p, e) && p[len(e)] == '/') {
			return true
		}
	}
	return false
}

// finishChanges sets apart the added files git would ignore and sorts the changes by
// path. Modified and deleted files are tracked, so ignore rules do not apply to them.
func finishChanges(changes []Change, m *ignoreMatcher) (out, ignored Changeset, err error) {
	out = make(Changeset, 0, len(changes))
	for _, ch := range changes {
		if ch.Kind == Added {
			ign, err := m.ignored(ch.Path, false)
			if err != nil {
				return nil, nil, err
			}
			if ign {
				ignored = append(ignored, ch)
				continue
			}
		}
		out = append(out, ch)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, ignored, nil
}
