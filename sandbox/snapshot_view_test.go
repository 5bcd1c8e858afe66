package sandbox

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// mountView mounts a read-only overlay of lowers (top first) on a temp dir and
// unmounts it when the test ends.
func mountView(t testing.TB, lowers []string) string {
	t.Helper()
	dir := t.TempDir()
	// Without an upper dir, older kernels want two lower dirs: an empty bottom layer
	// makes any stack mountable and changes nothing.
	stack := append(append([]string{}, lowers...), t.TempDir())
	opts := "lowerdir=" + strings.Join(stack, ":")
	if err := unix.Mount("overlay", dir, "overlay", unix.MS_RDONLY, opts); err != nil {
		t.Fatalf("mount overlay %s on %s: %v", opts, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// viewGit runs git inside a view the way an agent would in the sandbox, except that
// the objects come from the host path (the view's alternates name /.corral/objects,
// which does not exist here; git's complaint about it goes to stderr).
func viewGit(t testing.TB, repo Repo, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_ALTERNATE_OBJECT_DIRECTORIES="+filepath.Join(repo.GitDir, "objects"),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return string(out)
}

// requireCleanStatus fails when git status in the view reports anything at all.
func requireCleanStatus(t testing.TB, repo Repo, view string) {
	t.Helper()
	if out := viewGit(t, repo, view, "status", "--porcelain", "--untracked-files=all"); out != "" {
		t.Errorf("git status in %s is not clean:\n%s", view, out)
	}
}

// viewTree describes every entry of a tree, .git excepted: "dir", "link -> target",
// or "file <perm> <sha256>".
func viewTree(t testing.TB, root string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if rel == ".git" {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			tree[rel] = "dir"
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			tree[rel] = "link -> " + target
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tree[rel] = fmt.Sprintf("file %o %x", info.Mode().Perm(), sha256.Sum256(data))
		default:
			tree[rel] = "other " + info.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// commitTree describes a commit the way viewTree describes a checkout of it.
func commitTree(t testing.TB, repo Repo, commit string) map[string]string {
	t.Helper()
	out, err := repo.Git("ls-tree", "-r", "-t", "-z", commit)
	if err != nil {
		t.Fatal(err)
	}
	umask := os.FileMode(snapUmask())
	tree := map[string]string{}
	for _, rec := range strings.Split(out, "\x00") {
		if rec == "" {
			continue
		}
		head, p, _ := strings.Cut(rec, "\t")
		f := strings.Fields(head) // mode type sha
		switch f[0] {
		case "040000", "160000":
			tree[p] = "dir"
			continue
		}
		data, err := repo.Git("cat-file", "blob", f[2])
		if err != nil {
			t.Fatal(err)
		}
		switch f[0] {
		case "120000":
			tree[p] = "link -> " + data
		case "100755":
			tree[p] = fmt.Sprintf("file %o %x", 0o755&^umask, sha256.Sum256([]byte(data)))
		default:
			tree[p] = fmt.Sprintf("file %o %x", 0o644&^umask, sha256.Sum256([]byte(data)))
		}
	}
	return tree
}

// requireSameTree fails with the differing paths of two tree descriptions.
func requireSameTree(t testing.TB, what string, got, want map[string]string) {
	t.Helper()
	var diffs []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("  missing %s (%s)", p, w))
		} else if g != w {
			diffs = append(diffs, fmt.Sprintf("  %s: got %s, want %s", p, g, w))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("  extra %s (%s)", p, g))
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		t.Errorf("%s differs:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// requireSnapshotMatches mounts snap and checks it against the commit: the tree, HEAD,
// the index, and a clean git status.
func requireSnapshotMatches(t testing.TB, repo Repo, snap *Snapshot) string {
	t.Helper()
	view := mountView(t, snap.Layers)
	requireSameTree(t, "snapshot "+snap.ID, viewTree(t, view), commitTree(t, repo, snap.Commit))
	if head := strings.TrimSpace(viewGit(t, repo, view, "rev-parse", "HEAD")); head != snap.Commit {
		t.Errorf("snapshot %s: HEAD is %s, want %s", snap.ID, head, snap.Commit)
	}
	requireCleanStatus(t, repo, view)
	return view
}

// applyCommit removes paths, marks paths executable, writes files (see commitFiles) and
// commits; it returns the commit id.
func applyCommit(t testing.TB, repo Repo, remove, executable []string, files map[string]string) string {
	t.Helper()
	for _, p := range remove {
		if err := os.RemoveAll(filepath.Join(repo.WorkTree, p)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range executable {
		if err := os.Chmod(filepath.Join(repo.WorkTree, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if files == nil {
		files = map[string]string{}
	}
	return commitFiles(t, repo, "change", files)
}
