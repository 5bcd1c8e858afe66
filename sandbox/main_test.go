package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets the test binary serve as the sandbox init when it re-executes itself.
func TestMain(m *testing.M) {
	if IsInit() {
		InitMain()
		return
	}
	os.Exit(m.Run())
}

// requireRoot skips a test that needs real mounts, namespaces or cgroups.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: real overlay mounts, namespaces and cgroups (CI runs as root)")
	}
}

// newTestRepo makes a real git repository with one commit holding files (path → content;
// a content starting with "link:" makes a symlink) and returns it.
func newTestRepo(t testing.TB, files map[string]string) Repo {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("init", "-q", "-b", "main")
	writeTree(t, dir, files)
	run("add", "-A")
	run("commit", "-q", "-m", "initial")
	repo, err := OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// commitFiles writes (or, for an empty content "-", deletes) files and commits them;
// it returns the new commit id.
func commitFiles(t testing.TB, repo Repo, msg string, files map[string]string) string {
	t.Helper()
	for p, c := range files {
		if c == "-" {
			if err := os.RemoveAll(filepath.Join(repo.WorkTree, p)); err != nil {
				t.Fatal(err)
			}
			delete(files, p)
		}
	}
	writeTree(t, repo.WorkTree, files)
	cmd := exec.Command("sh", "-c", `git add -A && git commit -q -m "$0"`, msg)
	cmd.Dir = repo.WorkTree
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("commit: %v\n%s", err, out)
	}
	sha, err := repo.ResolveRev("HEAD")
	if err != nil {
		t.Fatal(err)
	}
	return sha
}

func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(c, "link:"); ok {
			os.Remove(full)
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
