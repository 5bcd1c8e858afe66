package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// snapRepoGit runs git in the work tree of repo.
func snapRepoGit(t testing.TB, repo Repo, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = repo.WorkTree
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// A submodule is an empty dir in a checkout: a derived layer must hide whatever tree
// stood there, and bring a tree back when the submodule goes.
func TestSnapshotGitlink(t *testing.T) {
	requireRoot(t)
	repo := newTestRepo(t, map[string]string{"f": "1\n", "d/x.txt": "x\n", "d/e/y.txt": "y\n"})
	s := openSnapshots(t, repo)
	base, err := s.Ensure("HEAD")
	if err != nil {
		t.Fatal(err)
	}
	snapRepoGit(t, repo, "rm", "-r", "-q", "d")
	snapRepoGit(t, repo, "update-index", "--add", "--cacheinfo", "160000,"+base.Commit+",d")
	snapRepoGit(t, repo, "commit", "-q", "-m", "submodule")
	snapRepoGit(t, repo, "rm", "-q", "--cached", "d") // the gitlink goes, a tree comes back
	writeTree(t, repo.WorkTree, map[string]string{"d/again.txt": "again\n"})
	snapRepoGit(t, repo, "add", "d/again.txt")
	snapRepoGit(t, repo, "commit", "-q", "-m", "tree again")
	c3 := snapRepoGit(t, repo, "rev-parse", "HEAD")
	for _, rev := range []string{"HEAD~1", c3} {
		snap, err := s.Ensure(rev)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Parent == "" {
			t.Fatalf("%s: want a derived snapshot, got %+v", rev, snap)
		}
		view := requireSnapshotMatches(t, repo, snap)
		requireSameTree(t, "derived vs fresh "+rev, viewTree(t, view),
			viewTree(t, mountView(t, freshOf(t, repo, snap.Commit).Layers)))
	}
}

// benchRepo makes a repository of about n files in n/100 directories, or a copy of
// $CORRAL_BENCH_TREE (e.g. $(go env GOROOT)/src) when set.
func benchRepo(b *testing.B, n int) Repo {
	b.Helper()
	requireRoot(b)
	repo := newTestRepo(b, map[string]string{"README": "bench\n"})
	if src := os.Getenv("CORRAL_BENCH_TREE"); src != "" {
		if out, err := exec.Command("cp", "-a", src, filepath.Join(repo.WorkTree, "tree")).CombinedOutput(); err != nil {
			b.Fatalf("copy %s: %v\n%s", src, err, out)
		}
	} else {
		body := strings.Repeat("some source line of a benchmark file\n", 50)
		files := map[string]string{}
		for i := range n {
			files[fmt.Sprintf("pkg%03d/file%05d.go", i/100, i)] = fmt.Sprintf("// %d\n%s", i, body)
		}
		writeTree(b, repo.WorkTree, files)
	}
	snapRepoGit(b, repo, "add", "-A")
	snapRepoGit(b, repo, "commit", "-q", "-m", "bench tree")
	return repo
}

// BenchmarkSnapshotFresh builds the full snapshot of a 10k-file commit.
func BenchmarkSnapshotFresh(b *testing.B) {
	repo := benchRepo(b, 10000)
	commit, _ := repo.ResolveRev("HEAD")
	for i := 0; b.Loop(); i++ {
		other := repo
		other.StateDir = filepath.Join(b.TempDir(), fmt.Sprint(i))
		s, err := OpenSnapshots(other)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Ensure(commit); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshotDerived10 builds the snapshot of a commit that changes 10 files of
// a 10k-file tree, on top of its parent's.
func BenchmarkSnapshotDerived10(b *testing.B) {
	repo := benchRepo(b, 10000)
	s, err := OpenSnapshots(repo)
	if err != nil {
		b.Fatal(err)
	}
	s.maxDepth = 1 << 30
	if _, err := s.Ensure("HEAD"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		files := map[string]string{}
		for j := range 10 {
			files[fmt.Sprintf("changed/%02d.txt", j)] = fmt.Sprintf("round %d\n", i)
		}
		commit := commitFiles(b, repo, "ten", files)
		b.StartTimer()
		snap, err := s.Ensure(commit)
		if err != nil {
			b.Fatal(err)
		}
		if snap.Parent == "" {
			b.Fatal("built fresh, want derived")
		}
	}
}

// BenchmarkSnapshotWorktreeAdd is what a snapshot replaces: a full checkout per session.
func BenchmarkSnapshotWorktreeAdd(b *testing.B) {
	repo := benchRepo(b, 10000)
	for i := 0; b.Loop(); i++ {
		snapRepoGit(b, repo, "worktree", "add", "-q", "--detach", filepath.Join(b.TempDir(), fmt.Sprint(i)), "HEAD")
	}
}
