package supervisor_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"corral/sandbox"
	"corral/supervisor"
)

// Change specs for publish tests: a value is the file's new content, with prefixes
// for other kinds — "<del>" deletes, "->target" is a symlink, "x:" an executable.
const del = "<del>"

// pubRepo is a real repository with a base commit, a head branch, and a publisher.
type pubRepo struct {
	t    *testing.T
	dir  string
	repo sandbox.Repo
	pub  *supervisor.GitPublisher
	base string
	n    int
}

func newPubRepo(t *testing.T, files map[string]string) *pubRepo {
	t.Helper()
	dir := t.TempDir()
	run(t, dir, "git", "init", "-q", "-b", "main")
	for p, c := range files {
		writeSpec(t, filepath.Join(dir, p), c)
	}
	run(t, dir, "git", "add", "-A")
	run(t, dir, "git", "commit", "-q", "--allow-empty", "-m", "base")
	repo, err := sandbox.OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(repo.StateDir, 0o700)
	base := run(t, dir, "git", "rev-parse", "HEAD")
	run(t, dir, "git", "update-ref", "refs/heads/corral/head", base)
	return &pubRepo{t: t, dir: dir, repo: repo, base: base, pub: &supervisor.GitPublisher{Repo: repo, HeadRef: "corral/head"}}
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeSpec(t *testing.T, p, spec string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	switch {
	case strings.HasPrefix(spec, "->"):
		if err := os.Symlink(spec[2:], p); err != nil {
			t.Fatal(err)
		}
	case strings.HasPrefix(spec, "x:"):
		os.WriteFile(p, []byte(spec[2:]), 0o755)
	default:
		os.WriteFile(p, []byte(spec), 0o644)
	}
}

// moveHead commits changes onto the head branch the way another publish would.
func (r *pubRepo) moveHead(changes map[string]string) string {
	r.t.Helper()
	res, err := r.pub.Publish(r.request("other", r.head(), changes))
	if err != nil || (res.Outcome != supervisor.OutcomeAccepted && res.Outcome != supervisor.OutcomeMerged) {
		r.t.Fatalf("move head: %v %+v", err, res)
	}
	return res.NewHead
}

func (r *pubRepo) head() string {
	return run(r.t, r.dir, "git", "rev-parse", "refs/heads/corral/head")
}

// request builds a publish request for a session started at base with changes, its
// sources in a fresh directory like a session's layer.
func (r *pubRepo) request(task, base string, changes map[string]string) supervisor.PublishRequest {
	r.t.Helper()
	r.n++
	layer := r.t.TempDir()
	paths := make([]string, 0, len(changes))
	for p := range changes {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var cs sandbox.Changeset
	for _, p := range paths {
		spec := changes[p]
		c := sandbox.Change{Path: p, Kind: sandbox.Modified}
		if spec == del {
			c.Kind = sandbox.Deleted
			cs = append(cs, c)
			continue
		}
		src := filepath.Join(layer, p)
		writeSpec(r.t, src, spec)
		c.Source, c.Mode = src, 0o644
		switch {
		case strings.HasPrefix(spec, "->"):
			c.Mode, c.Link = fs.ModeSymlink, spec[2:]
		case strings.HasPrefix(spec, "x:"):
			c.Mode = 0o755
		}
		cs = append(cs, c)
	}
	sid := task + "-" + string(rune('0'+r.n%10))
	return supervisor.PublishRequest{
		Task:    supervisor.Task{ID: task, Prompt: "change things"},
		Session: supervisor.Session{ID: sid, Task: task, Base: base},
		Changes: cs,
	}
}

// show returns path's content on the head, or del when absent.
func (r *pubRepo) show(path string) string {
	cmd := exec.Command("git", "cat-file", "-p", "refs/heads/corral/head:"+path)
	cmd.Dir = r.dir
	out, err := cmd.Output()
	if err != nil {
		return del
	}
	return string(out)
}
