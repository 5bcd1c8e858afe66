package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// LayerEntry is one path of a private layer written from scratch: a file with its
// content and mode (0644 or 0755), a symlink (Mode has fs.ModeSymlink), or a deletion
// (an overlay whiteout over whatever the lower layers hold there).
type LayerEntry struct {
	Path    string // slash-separated, relative to the workspace root
	Deleted bool
	Mode    fs.FileMode
	Data    []byte
	Link    string
}

// RebaseLayer writes the private layer this session continues from on a new base:
// entries — its changeset moved onto that base — plus the files of its current layer
// that git ignores (build output, dependency caches), hard-linked so they cost nothing
// and survive the move. Copy-ups of unchanged files and the old layer's opaque and
// redirected directories are left behind: they describe the old base, and over the
// new one they would hide the head's changes. The session must be frozen or stopped;
// its own layer is not touched. The result lives inside the session's directory, on
// the same filesystem as any new session's, ready for SessionConfig.AdoptLayer.
func (s *Session) RebaseLayer(entries []LayerEntry) (string, error) {
	if s.Running() && !s.Frozen() {
		return "", fmt.Errorf("session %s: rebase layer: freeze the session first", s.cfg.ID)
	}
	_, ignored, err := capture(CaptureOptions{Upper: s.upper, Lowers: s.lowers, Exclude: s.cfg.EnvFiles})
	if err != nil {
		return "", fmt.Errorf("session %s: rebase layer: %w", s.cfg.ID, err)
	}
	dst := filepath.Join(s.dir, "r")
	if err := os.RemoveAll(dst); err != nil {
		return "", fmt.Errorf("session %s: rebase layer: %w", s.cfg.ID, err)
	}
	if err := writeLayer(dst, s.upper, ignored, entries); err != nil {
		os.RemoveAll(dst)
		return "", fmt.Errorf("session %s: rebase layer: %w", s.cfg.ID, err)
	}
	return dst, nil
}

// writeLayer builds a layer at dst, owned like the old upper's root: the ignored
// files linked (or copied) from where they are, then entries on top.
func writeLayer(dst, oldUpper string, ignored Changeset, entries []LayerEntry) error {
	root, err := os.Stat(oldUpper)
	if err != nil {
		return err
	}
	st := root.Sys().(*syscall.Stat_t)
	owner := func(p string) error { return os.Lchown(p, int(st.Uid), int(st.Gid)) }
	if err := os.Mkdir(dst, root.Mode().Perm()); err != nil {
		return err
	}
	if err := owner(dst); err != nil {
		return err
	}
	mkParents := func(rel string) (string, error) {
		abs := filepath.Join(dst, filepath.FromSlash(rel))
		dir := dst
		for _, part := range splitDirs(path.Dir(rel)) {
			dir = filepath.Join(dir, part)
			fi, err := os.Lstat(dir)
			switch {
			case err == nil && fi.IsDir():
				continue
			case err == nil:
				// An entry needs a directory where a file was: the entry wins.
				if err := os.Remove(dir); err != nil {
					return "", err
				}
			case !errors.Is(err, fs.ErrNotExist):
				return "", err
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				return "", err
			}
			if err := owner(dir); err != nil {
				return "", err
			}
		}
		return abs, nil
	}
	for _, ch := range ignored {
		abs, err := mkParents(ch.Path)
		if err != nil {
			return err
		}
		if ch.Mode&fs.ModeSymlink != 0 {
			err = os.Symlink(ch.Link, abs)
		} else if err = os.Link(ch.Source, abs); err != nil {
			err = copyFile(ch.Source, abs, ch.Mode.Perm())
		}
		if err != nil {
			return fmt.Errorf("carry %s: %w", ch.Path, err)
		}
	}
	for _, e := range entries {
		abs, err := mkParents(e.Path)
		if err != nil {
			return err
		}
		if err := os.RemoveAll(abs); err != nil {
			return err
		}
		switch {
		case e.Deleted:
			err = unix.Mknod(abs, unix.S_IFCHR, 0) // a whiteout: 0/0 character device
		case e.Mode&fs.ModeSymlink != 0:
			err = os.Symlink(e.Link, abs)
		default:
			err = os.WriteFile(abs, e.Data, e.Mode.Perm())
			if err == nil {
				err = os.Chmod(abs, e.Mode.Perm()) // the umask must not drop the exec bit
			}
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", e.Path, err)
		}
		if err := owner(abs); err != nil {
			return err
		}
	}
	return nil
}

// splitDirs splits a slash path into its components ("." → none).
func splitDirs(dir string) []string {
	if dir == "." || dir == "" {
		return nil
	}
	var out []string
	for dir != "." && dir != "/" {
		out = append([]string{path.Base(dir)}, out...)
		dir = path.Dir(dir)
	}
	return out
}
