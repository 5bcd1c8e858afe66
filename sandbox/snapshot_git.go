package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// snapGitCmd prepares git for a snapshot build. Global and system config are off: the
// sandbox has neither, and a user's core.autocrlf or lfs smudge filter applied at build
// time would leave files that git status inside the sandbox sees as modified (or make
// the build fetch from the network). Inherited GIT_* variables (corral run from a git
// hook) would point git at the wrong repository. safe.directory=* because under sudo
// the repository belongs to the user, not to us.
func snapGitCmd(dir string, env []string, args ...string) *exec.Cmd {
	base := []string{"-c", "safe.directory=*", "-c", "core.splitIndex=false",
		"-c", "core.untrackedCache=false", "-c", "core.fsmonitor=false"}
	cmd := exec.Command("git", append(base, args...)...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// snapGit runs git (see snapGitCmd) with stdin and returns its output; the error
// carries git's own message.
func snapGit(dir string, env []string, stdin []byte, args ...string) ([]byte, error) {
	cmd := snapGitCmd(dir, env, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return out, fmt.Errorf("git %s: %s", args[0], msg)
		}
		return out, fmt.Errorf("git %s: %w", args[0], err)
	}
	return out, nil
}

// snapChange is one line of git diff-tree --raw.
type snapChange struct {
	newMode string // "000000" when deleted
	newSHA  string
	status  byte // A, D, M, T
	path    string
}

func (c snapChange) deleted() bool { return c.status == 'D' }

// diffTree lists the blob-level changes from one commit to another.
func (s *Snapshots) diffTree(from, to string) ([]snapChange, error) {
	out, err := snapGit(s.repo.GitDir, nil, nil, "--git-dir", s.repo.GitDir,
		"diff-tree", "-r", "-z", "--raw", "--no-renames", "--no-ext-diff", from, to)
	if err != nil {
		return nil, err
	}
	// -z output: ":oldmode newmode oldsha newsha status\0path\0" per change.
	fields := strings.Split(string(out), "\x00")
	var changes []snapChange
	for i := 0; i+1 < len(fields); i += 2 {
		head := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(head) != 5 || head[4] == "" {
			return nil, fmt.Errorf("git diff-tree: unexpected line %q", fields[i])
		}
		changes = append(changes, snapChange{newMode: head[1], newSHA: head[3],
			status: head[4][0], path: fields[i+1]})
	}
	return changes, nil
}

// treeTypes tells, for each path, what it is in commit: "tree", "blob", ... or "" when
// missing. Paths must not contain a newline (cat-file --batch-check reads lines).
func (s *Snapshots) treeTypes(commit string, paths []string) (map[string]string, error) {
	types := make(map[string]string, len(paths))
	if len(paths) == 0 {
		return types, nil
	}
	var in bytes.Buffer
	for _, p := range paths {
		fmt.Fprintf(&in, "%s:%s\n", commit, p)
	}
	out, err := snapGit(s.repo.GitDir, nil, in.Bytes(), "--git-dir", s.repo.GitDir,
		"cat-file", "--batch-check=%(objecttype)")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(paths) {
		return nil, fmt.Errorf("git cat-file: %d answers for %d paths", len(lines), len(paths))
	}
	for i, p := range paths {
		switch lines[i] {
		case "tree", "blob", "commit", "tag":
			types[p] = lines[i]
		default: // "<name> missing"
			types[p] = ""
		}
	}
	return types, nil
}

// snapBlobWriter streams blobs out of one git cat-file --batch process.
type snapBlobWriter struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	stderr bytes.Buffer
}

// startBlobs starts cat-file --batch, feeding it the object ids from a goroutine so
// neither side blocks on a full pipe; answers come back in the same order.
func (s *Snapshots) startBlobs(shas []string) (*snapBlobWriter, error) {
	w := &snapBlobWriter{cmd: snapGitCmd(s.repo.GitDir, nil, "--git-dir", s.repo.GitDir,
		"cat-file", "--batch")}
	w.cmd.Stdin = strings.NewReader(strings.Join(shas, "\n") + "\n")
	w.cmd.Stderr = &w.stderr
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	if err := w.cmd.Start(); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	w.out = bufio.NewReaderSize(stdout, 64<<10)
	return w, nil
}

// next reads the next blob's header and returns its size; the content follows in w.out.
func (w *snapBlobWriter) next(sha string) (int64, error) {
	head, err := w.out.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("git cat-file: read %s: %w (%s)", sha, err, strings.TrimSpace(w.stderr.String()))
	}
	f := strings.Fields(head)
	if len(f) != 3 || f[0] != sha || f[1] != "blob" {
		return 0, fmt.Errorf("git cat-file: want blob %s, got %q", sha, strings.TrimSpace(head))
	}
	return strconv.ParseInt(f[2], 10, 64)
}

// endObject consumes the newline cat-file prints after each object's content.
func (w *snapBlobWriter) endObject() error {
	b, err := w.out.ReadByte()
	if err == nil && b != '\n' {
		err = errors.New("no newline after object")
	}
	if err != nil {
		return fmt.Errorf("git cat-file: %w", err)
	}
	return nil
}

// writeFile copies the next blob (size bytes) into a new file with mode.
func (w *snapBlobWriter) writeFile(path string, size int64, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, w.out, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return w.endObject()
}

// close waits for cat-file; kill first when abandoning the stream halfway.
func (w *snapBlobWriter) close(kill bool) error {
	if kill {
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
		return nil
	}
	if err := w.cmd.Wait(); err != nil {
		return fmt.Errorf("git cat-file: %w (%s)", err, strings.TrimSpace(w.stderr.String()))
	}
	return nil
}

// fixOwner hands a built tree to the work tree's owner (under sudo the agent runs as
// that user and must be able to copy files up and replace them) and drops group and
// other write bits the umask let through. It walks only when there is work to do.
func (s *Snapshots) fixOwner(root string) error {
	loose := s.umask&0o022 != 0o022
	if !s.chown && !loose {
		return nil
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if s.chown {
			if err := os.Lchown(p, s.uid, s.gid); err != nil {
				return err
			}
		}
		if loose && d.Type()&(fs.ModeSymlink|fs.ModeCharDevice) == 0 {
			info, err := d.Info()
			if err != nil {
				return err
			}
			if m := info.Mode().Perm(); m&0o022 != 0 {
				return os.Chmod(p, m&^0o022)
			}
		}
		return nil
	})
}
