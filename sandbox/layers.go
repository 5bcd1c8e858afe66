package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Overlay xattrs, as the kernel writes them when it mounts as root (the "trusted."
// namespace; a rootless mount with userxattr would use "user.overlay.*" instead).
const (
	xattrOpaque   = "trusted.overlay.opaque"
	xattrRedirect = "trusted.overlay.redirect"
)

// entryKind is what one name resolves to in a layer or a stack of layers.
type entryKind uint8

const (
	kindNone     entryKind = iota // absent, hidden by a whiteout, or a type git ignores
	kindFile                      // regular file or symlink
	kindDir                       // directory
	kindWhiteout                  // 0/0 character device: deletes the name below it
)

// layerEntry is one name as found in one layer dir.
type layerEntry struct {
	kind entryKind
	abs  string      // absolute path in the layer
	info fs.FileInfo // Lstat of abs (nil for kindNone)
}

// classifyEntry turns an Lstat result into the kind overlayfs gives it. Char devices other
// than 0/0, fifos and sockets are not content git tracks: they count as absent.
func classifyEntry(abs string, info fs.FileInfo) layerEntry {
	e := layerEntry{abs: abs, info: info}
	switch m := info.Mode(); {
	case m.IsDir():
		e.kind = kindDir
	case m.IsRegular(), m&fs.ModeSymlink != 0:
		e.kind = kindFile
	case m&fs.ModeCharDevice != 0 && isWhiteoutDev(info):
		e.kind = kindWhiteout
	}
	return e
}

func isWhiteoutDev(info fs.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// lstatEntry looks one path up in one layer; a missing path is kindNone.
func lstatEntry(abs string) (layerEntry, error) {
	info, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return layerEntry{abs: abs}, nil
	}
	if err != nil {
		return layerEntry{}, fmt.Errorf("layer entry %s: %w", abs, err)
	}
	return classifyEntry(abs, info), nil
}

// isOpaqueDir reports whether a layer dir hides everything below it at its path.
func isOpaqueDir(dir string) (bool, error) {
	v, err := overlayXattr(dir, xattrOpaque)
	return v == "y", err
}

// redirectOf returns the trusted.overlay.redirect of an upper dir, "" when none.
func redirectOf(dir string) (string, error) { return overlayXattr(dir, xattrRedirect) }

// overlayXattr reads a small xattr; a missing one is "" without error.
func overlayXattr(p, name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Lgetxattr(p, name, buf)
		switch {
		case errors.Is(err, unix.ENODATA), errors.Is(err, unix.ENOTSUP):
			return "", nil
		case errors.Is(err, unix.ERANGE):
			buf = make([]byte, len(buf)*4)
			continue
		case err != nil:
			return "", fmt.Errorf("xattr %s of %s: %w", name, p, err)
		}
		return string(buf[:n]), nil
	}
}

// lowerDir is one directory of the read-only lower stack: the layer dirs that merge
// into it, top first. Merging stops after an opaque dir, and at a whiteout or a
// non-directory in a lower layer (overlayfs gives the top-most entry's type).
type lowerDir struct {
	dirs []string
}

// rootLowerDir is the root of the lower stack; layer roots are never opaque.
func rootLowerDir(lowers []string) *lowerDir {
	if len(lowers) == 0 {
		return nil
	}
	return &lowerDir{dirs: append([]string(nil), lowers...)}
}

// lowerNode is what a name resolves to in the lower stack.
type lowerNode struct {
	kind entryKind // kindNone, kindFile or kindDir
	file layerEntry
	dir  *lowerDir
}

// lookup resolves one child name of d through the stack, top layer first.
func (d *lowerDir) lookup(name string) (lowerNode, error) {
	if d == nil {
		return lowerNode{}, nil
	}
	var sub []string
	for _, dir := range d.dirs {
		e, err := lstatEntry(filepath.Join(dir, name))
		if err != nil {
			return lowerNode{}, err
		}
		if e.kind == kindNone && e.info == nil {
			continue // missing in this layer: look below
		}
		if len(sub) == 0 {
			switch e.kind {
			case kindFile:
				return lowerNode{kind: kindFile, file: e}, nil
			case kindDir:
			default: // whiteout or ignored type hides everything below
				return lowerNode{}, nil
			}
		} else if e.kind != kindDir {
			break // a lower non-dir under a dir is hidden and stops the merge
		}
		sub = append(sub, e.abs)
		opaque, err := isOpaqueDir(e.abs)
		if err != nil {
			return lowerNode{}, err
		}
		if opaque {
			break
		}
	}
	if len(sub) == 0 {
		return lowerNode{}, nil
	}
	return lowerNode{kind: kindDir, dir: &lowerDir{dirs: sub}}, nil
}

// resolve walks a slash path from d, component by component, so that whiteouts and
// opaque dirs at any ancestor in any layer are honoured.
func (d *lowerDir) resolve(rel string) (lowerNode, error) {
	node := lowerNode{kind: kindDir, dir: d}
	if d == nil {
		return lowerNode{}, nil
	}
	for _, name := range strings.Split(rel, "/") {
		if name == "" {
			continue
		}
		if node.kind != kindDir {
			return lowerNode{}, nil
		}
		var err error
		if node, err = node.dir.lookup(name); err != nil {
			return lowerNode{}, err
		}
	}
	return node, nil
}

// list returns the merged children of d by name. Whiteouts are applied, so every
// returned node is a file or a dir.
func (d *lowerDir) list() (map[string]lowerNode, error) {
	out := map[string]lowerNode{}
	if d == nil {
		return out, nil
	}
	seen := map[string]bool{}
	for _, dir := range d.dirs {
		names, err := dirNames(dir)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if seen[name] {
				continue
			}
			seen[name] = true
			// lookup re-resolves through the whole stack; names are few per dir and
			// this keeps one definition of the merge rules.
			n, err := d.lookup(name)
			if err != nil {
				return nil, err
			}
			if n.kind != kindNone {
				out[name] = n
			}
		}
	}
	return out, nil
}

// dirNames lists a directory's entry names.
func dirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	return names, nil
}

// treeFile is one file or symlink of a tree: what git would see of it.
type treeFile struct {
	abs  string
	info fs.FileInfo
}

// walkLower adds every file under the lower dir d (at workspace path rel) to out.
func walkLower(d *lowerDir, rel string, out map[string]treeFile) error {
	children, err := d.list()
	if err != nil {
		return err
	}
	for name, n := range children {
		p := path.Join(rel, name)
		if n.kind == kindFile {
			out[p] = treeFile{abs: n.file.abs, info: n.file.info}
			continue
		}
		if err := walkLower(n.dir, p, out); err != nil {
			return err
		}
	}
	return nil
}
