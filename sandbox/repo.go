package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNoRepo and ErrUnknownRevision classify bad input about the repository.
var (
	ErrNoRepo          = errors.New("not a git repository")
	ErrUnknownRevision = errors.New("unknown revision")
)

// Repo is a git repository corral works on, with the place its state lives.
type Repo struct {
	WorkTree string // absolute path of the work tree (where sessions appear)
	GitDir   string // absolute path of the common git dir (objects, refs)
	StateDir string // GitDir/corral: snapshots, session layers, recordings, database
}

// OpenRepo finds the repository at dir. It writes nothing.
func OpenRepo(dir string) (Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Repo{}, fmt.Errorf("repo %s: %w", dir, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return Repo{}, fmt.Errorf("repo %s: %w", abs, err)
	}
	out, err := gitOutput(abs, "rev-parse", "--show-toplevel", "--git-common-dir")
	if err != nil {
		return Repo{}, fmt.Errorf("repo %s: %w", abs, ErrNoRepo)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		return Repo{}, fmt.Errorf("repo %s: %w (no work tree)", abs, ErrNoRepo)
	}
	top, gitDir := lines[0], lines[1]
	if !filepath.IsAbs(gitDir) {
		gitDir = filepath.Join(abs, gitDir)
	}
	// Resolve symlinks so the paths we bind and compare are the kernel's paths.
	if top, err = filepath.EvalSymlinks(top); err != nil {
		return Repo{}, fmt.Errorf("repo %s: %w", abs, err)
	}
	if gitDir, err = filepath.EvalSymlinks(gitDir); err != nil {
		return Repo{}, fmt.Errorf("repo %s: %w", abs, err)
	}
	return Repo{WorkTree: top, GitDir: gitDir, StateDir: filepath.Join(gitDir, "corral")}, nil
}

// ResolveRev turns a revision name into a full commit id.
func (r Repo) ResolveRev(rev string) (string, error) {
	if rev == "" {
		rev = "HEAD"
	}
	out, err := r.Git("rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("repo %s: revision %q: %w", r.WorkTree, rev, ErrUnknownRevision)
	}
	return strings.TrimSpace(out), nil
}

// Git runs git against the repository's git dir and returns its standard output.
func (r Repo) Git(args ...string) (string, error) {
	return gitOutput(r.WorkTree, append([]string{"--git-dir", r.GitDir}, args...)...)
}

// gitOutput runs git in dir; the error carries git's own message.
func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return string(out), fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return string(out), fmt.Errorf("git %s: %s", strings.Join(args, " "), msg)
	}
	return string(out), nil
}
