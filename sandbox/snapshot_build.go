package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// errSnapNotDerivable says a derived build would be wrong or not worth it; build fresh.
var errSnapNotDerivable = errors.New("snapshot not derivable")

// snapDeriveMinChanges: a diff this small is always derived, whatever the tree size.
const snapDeriveMinChanges = 1000

const snapXattrOpaque = "trusted.overlay.opaque" // hides the lower dirs of the same name

// buildFresh checks commit out in full: a shared clone (objects stay in the repository)
// then a detached checkout, so the layer has a .git whose index matches the files and
// git status inside the sandbox is instant.
func (s *Snapshots) buildFresh(commit, id string) (*snapMeta, error) {
	tmp, err := s.tempDir()
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	defer os.RemoveAll(tmp) // empty after a successful publish
	layer := filepath.Join(tmp, snapLayerName)
	if _, err := snapGit(tmp, nil, nil, "clone", "--shared", "--no-checkout", "-q",
		"--template=", s.repo.GitDir, layer); err != nil {
		return nil, fmt.Errorf("snapshot %s: clone: %w", id, err)
	}
	if _, err := snapGit(layer, nil, nil, "checkout", "-q", "--detach", commit); err != nil {
		return nil, fmt.Errorf("snapshot %s: checkout: %w", id, err)
	}
	out, err := snapGit(layer, nil, nil, "ls-files", "-z")
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: list files: %w", id, err)
	}
	meta := &snapMeta{Commit: commit, Layers: []string{filepath.Join(id, snapLayerName)}}
	for _, p := range strings.Split(string(out), "\x00") {
		if p == "" {
			continue
		}
		meta.Files++
		if path.Base(p) == ".gitattributes" && !meta.Converts {
			data, err := os.ReadFile(filepath.Join(layer, p))
			meta.Converts = err != nil || snapAttrsConvert(data)
		}
	}
	if s.chown {
		// Handing the files over changes their ctime and owner, which git's index
		// records: without this every git status in the sandbox would re-hash the tree.
		err := snapAppend(filepath.Join(layer, ".git", "config"),
			"[core]\n\tcheckStat = minimal\n\ttrustCtime = false\n")
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: config: %w", id, err)
		}
	}
	// Inside the sandbox the host object dir is bound at SnapshotObjectsDir; the clone's
	// own path to it is hidden by the workspace overlay.
	alt := filepath.Join(layer, ".git", "objects", "info", "alternates")
	if err := os.WriteFile(alt, []byte(SnapshotObjectsDir+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("snapshot %s: alternates: %w", id, err)
	}
	if err := s.fixOwner(layer); err != nil {
		return nil, fmt.Errorf("snapshot %s: owner: %w", id, err)
	}
	return meta, s.publish(tmp, id, meta)
}

// buildDerived writes one layer holding only what changed between parent's commit and
// commit, stacked on parent's layers: blobs for added and modified paths, whiteouts
// for deleted ones, and a .git with the new HEAD and an index patched from parent's.
// Its cost follows the size of the diff, not of the tree.
func (s *Snapshots) buildDerived(parent *snapEntry, commit, id string) (*snapMeta, error) {
	if parent.meta.Converts {
		return nil, errSnapNotDerivable
	}
	changes, err := s.diffTree(parent.snap.Commit, commit)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: diff from %s: %w", id, parent.snap.ID, err)
	}
	if len(changes) > snapDeriveMinChanges && 2*len(changes) > parent.meta.Files {
		return nil, errSnapNotDerivable // as costly as a checkout, and deepens the stack
	}
	files := parent.meta.Files
	for _, c := range changes {
		if strings.Contains(c.path, "\n") {
			return nil, errSnapNotDerivable // cat-file --batch-check reads lines
		}
		if c.status == 'A' {
			files++
		} else if c.deleted() {
			files--
		}
		if path.Base(c.path) == ".gitattributes" && !c.deleted() {
			data, err := snapGit(s.repo.GitDir, nil, nil, "--git-dir", s.repo.GitDir,
				"cat-file", "blob", c.newSHA)
			if err != nil || snapAttrsConvert(data) {
				return nil, errSnapNotDerivable
			}
		}
	}
	tmp, err := s.tempDir()
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	defer os.RemoveAll(tmp)
	layer := filepath.Join(tmp, snapLayerName)
	if err := os.MkdirAll(filepath.Join(layer, ".git"), 0o755&^os.FileMode(s.umask)); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	if err := s.writeChanges(layer, commit, changes); err != nil {
		return nil, fmt.Errorf("snapshot %s: write layer: %w", id, err)
	}
	if err := s.writeIndex(layer, parent.snap.Layers, changes); err != nil {
		return nil, fmt.Errorf("snapshot %s: index: %w", id, err)
	}
	head := filepath.Join(layer, ".git", "HEAD")
	if err := os.WriteFile(head, []byte(commit+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("snapshot %s: HEAD: %w", id, err)
	}
	if err := s.fixOwner(layer); err != nil {
		return nil, fmt.Errorf("snapshot %s: owner: %w", id, err)
	}
	meta := &snapMeta{Commit: commit, Parent: parent.snap.Commit, Files: files,
		Layers: append([]string{filepath.Join(id, snapLayerName)}, parent.meta.Layers...)}
	return meta, s.publish(tmp, id, meta)
}

// writeChanges puts the diff into layer. Deleted paths become whiteouts — at the
// highest directory left without tracked files when there is one, since a checkout
// removes such directories. A directory that replaces a file or a submodule's empty
// dir is marked opaque so nothing of the lower layers shows through it.
func (s *Snapshots) writeChanges(layer, commit string, changes []snapChange) error {
	written := map[string]bool{}
	var blobs []snapChange
	for _, c := range changes {
		if c.deleted() {
			continue
		}
		written[c.path] = true
		if c.newMode != "160000" {
			blobs = append(blobs, c)
		}
	}
	// Ask once what every deleted path and its ancestors are in the new commit.
	var ask []string
	seen := map[string]bool{}
	for _, c := range changes {
		if !c.deleted() {
			continue
		}
		for p := c.path; p != "."; p = path.Dir(p) {
			if !seen[p] && !written[p] {
				seen[p] = true
				ask = append(ask, p)
			}
		}
	}
	types, err := s.treeTypes(commit, ask)
	if err != nil {
		return err
	}
	whiteouts, opaque := map[string]bool{}, map[string]bool{}
	for _, c := range changes {
		if c.deleted() {
			snapPlanDelete(c.path, written, types, whiteouts, opaque)
		} else if c.newMode == "160000" {
			opaque[c.path] = true // a submodule is an empty dir, whatever was there
		}
	}
	if err := s.writeBlobs(layer, blobs); err != nil {
		return err
	}
	for p := range opaque {
		full := filepath.Join(layer, p)
		if err := s.mkdirs(layer, p); err != nil {
			return err
		}
		if err := unix.Lsetxattr(full, snapXattrOpaque, []byte("y"), 0); err != nil {
			return fmt.Errorf("%s: set opaque: %w", p, err)
		}
	}
	for p := range whiteouts {
		if err := s.mkdirs(layer, path.Dir(p)); err != nil {
			return err
		}
		if err := unix.Mknod(filepath.Join(layer, p), unix.S_IFCHR|0, 0); err != nil {
			return fmt.Errorf("%s: whiteout: %w", p, err)
		}
	}
	return nil
}

// snapPlanDelete decides how the deletion of p shows in the new layer.
func snapPlanDelete(p string, written map[string]bool, types map[string]string,
	whiteouts, opaque map[string]bool) {
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		if written[dir] {
			return // a file or submodule now stands where the directory was
		}
		switch types[dir] {
		case "tree":
			continue
		case "":
			whiteouts[dir] = true // nothing tracked left below: remove the whole dir
		}
		return
	}
	switch {
	case written[p]:
	case types[p] == "tree":
		opaque[p] = true // file turned into a directory
	default:
		whiteouts[p] = true
	}
}

// writeBlobs writes added and modified files and symlinks from one cat-file process.
func (s *Snapshots) writeBlobs(layer string, blobs []snapChange) error {
	if len(blobs) == 0 {
		return nil
	}
	shas := make([]string, len(blobs))
	for i, c := range blobs {
		shas[i] = c.newSHA
	}
	w, err := s.startBlobs(shas)
	if err != nil {
		return err
	}
	for _, c := range blobs {
		if err := s.writeBlob(w, layer, c); err != nil {
			_ = w.close(true)
			return fmt.Errorf("%s: %w", c.path, err)
		}
	}
	return w.close(false)
}

func (s *Snapshots) writeBlob(w *snapBlobWriter, layer string, c snapChange) error {
	size, err := w.next(c.newSHA)
	if err != nil {
		return err
	}
	if err := s.mkdirs(layer, path.Dir(c.path)); err != nil {
		return err
	}
	full := filepath.Join(layer, c.path)
	switch c.newMode {
	case "120000":
		target := make([]byte, size)
		if _, err := io.ReadFull(w.out, target); err != nil {
			return err
		}
		if err := os.Symlink(string(target), full); err != nil {
			return err
		}
		return w.endObject()
	case "100755":
		return w.writeFile(full, size, 0o755&^os.FileMode(s.umask))
	default:
		return w.writeFile(full, size, 0o644&^os.FileMode(s.umask))
	}
}

// mkdirs creates rel's directories inside layer with the mode a checkout would give.
func (s *Snapshots) mkdirs(layer, rel string) error {
	if rel == "." || rel == "" {
		return nil
	}
	return os.MkdirAll(filepath.Join(layer, rel), 0o755&^os.FileMode(s.umask))
}

// writeIndex copies the effective index below (the top-most layer that has one) and
// applies the diff with update-index. Updated entries carry no stat data, so git
// status hashes just those files once — the rest keep the stat data of the checkout.
func (s *Snapshots) writeIndex(layer string, lowers []string, changes []snapChange) error {
	idx := filepath.Join(layer, ".git", "index")
	var src []byte
	var err error
	for _, l := range lowers {
		if src, err = os.ReadFile(filepath.Join(l, ".git", "index")); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("no index below: %w", err)
	}
	if err := os.WriteFile(idx, src, 0o644&^os.FileMode(s.umask)); err != nil {
		return err
	}
	// Removals first, so a path that turns from file to directory (or back) is free.
	var in bytes.Buffer
	for _, c := range changes {
		if c.deleted() {
			fmt.Fprintf(&in, "0 %s\t%s\x00", strings.Repeat("0", len(c.newSHA)), c.path)
		}
	}
	for _, c := range changes {
		if !c.deleted() {
			fmt.Fprintf(&in, "%s %s\t%s\x00", c.newMode, c.newSHA, c.path)
		}
	}
	_, err = snapGit(s.repo.GitDir, []string{"GIT_INDEX_FILE=" + idx}, in.Bytes(),
		"--git-dir", s.repo.GitDir, "update-index", "-z", "--index-info")
	return err
}

// publish writes meta.json into the build dir and renames it into place, so a
// snapshot appears whole or not at all. If the name is taken by a snapshot of the same
// commit (another process won the race) that one stands; a broken leftover is removed.
func (s *Snapshots) publish(tmp, id string, meta *snapMeta) error {
	meta.Created = time.Now().UTC()
	data, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", id, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, snapMetaName), data, 0o644); err != nil {
		return fmt.Errorf("snapshot %s: %s: %w", id, snapMetaName, err)
	}
	if s.chown {
		_ = os.Lchown(filepath.Join(tmp, snapMetaName), s.uid, s.gid)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("snapshot %s: %w", id, err)
	}
	final := filepath.Join(s.dir, id)
	err = os.Rename(tmp, final)
	if err == nil || !(errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY)) {
		if err != nil {
			return fmt.Errorf("snapshot %s: publish: %w", id, err)
		}
		return nil
	}
	if old, rerr := s.readMeta(id); rerr == nil && old.Commit == meta.Commit {
		*meta = old
		return nil
	}
	if err := s.remove(&Snapshot{ID: id}); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("snapshot %s: publish: %w", id, err)
	}
	return nil
}

// snapAttrsConvert reports whether .gitattributes content asks checkout to rewrite
// file content on this system: eol=crlf, ident, working-tree-encoding. Plain text,
// text=auto and eol=lf leave LF blobs alone on Linux when no config asks otherwise, and
// filters are not listed because their drivers live in config, which builds (and
// sandboxes) do not read. Macros ([attr]x eol=crlf) are caught by checking every
// field; over-matching only costs fresh builds.
func snapAttrsConvert(data []byte) bool {
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		for _, attr := range fields[1:] {
			name, value, _ := strings.Cut(attr, "=")
			switch {
			case name == "eol" && value == "crlf", name == "ident",
				name == "working-tree-encoding":
				return true
			}
		}
	}
	return false
}

// snapAppend appends text to a file.
func snapAppend(name, text string) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
