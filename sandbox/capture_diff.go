package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
)

// DiffTrees is the reference full-walk diff between two directory trees (e.g. a merged
// base view and a merged session view), with Capture's exclusions: the top-level .git,
// the exclude paths, and added files that the new tree's .gitignore files (or the base
// tree's .git/info/exclude) ignore. Tests check Capture against it, and the benchmark
// prices what a user would otherwise pay.
func DiffTrees(baseDir, newDir string, exclude []string) (Changeset, error) {
	ex := newCaptureExcluder(exclude)
	base, err := listTreeFiles(baseDir, ex)
	if err != nil {
		return nil, fmt.Errorf("diff trees: base: %w", err)
	}
	next, err := listTreeFiles(newDir, ex)
	if err != nil {
		return nil, fmt.Errorf("diff trees: new: %w", err)
	}
	var changes []Change
	for p, nf := range next {
		bf, ok := base[p]
		if !ok {
			ch, err := addedChange(p, nf)
			if err != nil {
				return nil, fmt.Errorf("diff trees: %w", err)
			}
			changes = append(changes, ch)
			continue
		}
		ch, err := compareFiles(p, bf, nf)
		if err != nil {
			return nil, fmt.Errorf("diff trees: %w", err)
		}
		if ch != nil {
			changes = append(changes, *ch)
		}
	}
	for p, bf := range base {
		if _, ok := next[p]; !ok {
			changes = append(changes, deletedChange(p, bf.info))
		}
	}
	excludeFile, err := readRegularFile(filepath.Join(baseDir, ".git", "info", "exclude"))
	if err != nil {
		return nil, fmt.Errorf("diff trees: %w", err)
	}
	m := newIgnoreMatcher(excludeFile, func(dir string) ([]byte, error) {
		return readRegularFile(filepath.Join(newDir, filepath.FromSlash(dir), ".gitignore"))
	})
	out, _, err := finishChanges(changes, m)
	if err != nil {
		return nil, fmt.Errorf("diff trees: %w", err)
	}
	return out, nil
}

// readRegularFile reads a regular file; nil when it is missing or not a regular file.
func readRegularFile(abs string) ([]byte, error) {
	info, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !info.Mode().IsRegular()) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", abs, err)
	}
	return readLayerFile(abs)
}

// listTreeFiles lists every file and symlink under root by workspace path.
func listTreeFiles(root string, ex captureExcluder) (map[string]treeFile, error) {
	out := map[string]treeFile{}
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("list %s: %w", dir, err)
		}
		for _, e := range entries {
			p := path.Join(rel, e.Name())
			if ex.excluded(p) {
				continue
			}
			abs := filepath.Join(dir, e.Name())
			switch {
			case e.IsDir():
				if err := walk(abs, p); err != nil {
					return err
				}
			case e.Type().IsRegular(), e.Type()&fs.ModeSymlink != 0:
				info, err := e.Info()
				if err != nil {
					return fmt.Errorf("stat %s: %w", abs, err)
				}
				out[p] = treeFile{abs: abs, info: info}
			}
		}
		return nil
	}
	return out, walk(root, "")
}

// changeMode is the mode git records for a file: a symlink, or a regular file that is
// 0755 when the owner may execute it and 0644 otherwise (git keeps no other bits).
func changeMode(info fs.FileInfo) fs.FileMode {
	if info.Mode()&fs.ModeSymlink != 0 {
		return fs.ModeSymlink
	}
	if info.Mode().Perm()&0o100 != 0 {
		return 0o755
	}
	return 0o644
}

func addedChange(p string, f treeFile) (Change, error) {
	ch := Change{Path: p, Kind: Added, Mode: changeMode(f.info), Source: f.abs}
	if ch.Mode == fs.ModeSymlink {
		target, err := os.Readlink(f.abs)
		if err != nil {
			return Change{}, fmt.Errorf("added %s: %w", p, err)
		}
		ch.Link = target
	}
	return ch, nil
}

func deletedChange(p string, base fs.FileInfo) Change {
	return Change{Path: p, Kind: Deleted, OldMode: changeMode(base)}
}

// compareFiles returns the modification from base to next at p, or nil when git would
// see none: a copy-up by open-for-write, chmod or touch leaves content, exec bit and
// link target as they were.
func compareFiles(p string, base, next treeFile) (*Change, error) {
	oldMode, newMode := changeMode(base.info), changeMode(next.info)
	ch := &Change{Path: p, Kind: Modified, Mode: newMode, OldMode: oldMode, Source: next.abs}
	if newMode == fs.ModeSymlink {
		target, err := os.Readlink(next.abs)
		if err != nil {
			return nil, fmt.Errorf("modified %s: %w", p, err)
		}
		ch.Link = target
	}
	if oldMode != newMode {
		return ch, nil
	}
	if newMode == fs.ModeSymlink {
		old, err := os.Readlink(base.abs)
		if err != nil {
			return nil, fmt.Errorf("modified %s: %w", p, err)
		}
		if old == ch.Link {
			return nil, nil
		}
		return ch, nil
	}
	same, err := sameContent(base, next)
	if err != nil {
		return nil, fmt.Errorf("modified %s: %w", p, err)
	}
	if same {
		return nil, nil
	}
	return ch, nil
}

// compareBufs recycles the read buffers of sameContent: a full-tree diff compares
// thousands of files.
var compareBufs = sync.Pool{New: func() any { return &[2][]byte{make([]byte, 32<<10), make([]byte, 32<<10)} }}

// sameContent compares two regular files by size, then by streamed bytes.
func sameContent(a, b treeFile) (bool, error) {
	if a.info.Size() != b.info.Size() {
		return false, nil
	}
	if os.SameFile(a.info, b.info) {
		return true, nil
	}
	fa, err := os.Open(a.abs)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := os.Open(b.abs)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	bufs := compareBufs.Get().(*[2][]byte)
	defer compareBufs.Put(bufs)
	bufA, bufB := bufs[0], bufs[1]
	for {
		na, errA := io.ReadFull(fa, bufA)
		nb, errB := io.ReadFull(fb, bufB)
		if na != nb || !bytes.Equal(bufA[:na], bufB[:nb]) {
			return false, nil
		}
		doneA := errors.Is(errA, io.EOF) || errors.Is(errA, io.ErrUnexpectedEOF)
		doneB := errors.Is(errB, io.EOF) || errors.Is(errB, io.ErrUnexpectedEOF)
		if errA != nil && !doneA {
			return false, fmt.Errorf("read %s: %w", a.abs, errA)
		}
		if errB != nil && !doneB {
			return false, fmt.Errorf("read %s: %w", b.abs, errB)
		}
		if doneA || doneB {
			return doneA == doneB, nil
		}
	}
}
