package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// snapBaseFiles is a tree with something for every kind of change to act on.
func snapBaseFiles() map[string]string {
	return map[string]string{
		"a.txt": "a\n", "b.txt": "b\n", "keep/x.txt": "x\n",
		"gone/one.txt": "1\n", "gone/sub/two.txt": "2\n",
		"deep/keep.txt": "k\n", "deep/a/b/c.txt": "c\n",
		"f2d":       "a file that becomes a dir\n",
		"d2f/x.txt": "x\n", "d2f/y/z.txt": "z\n",
		"run.sh": "#!/bin/sh\necho hi\n",
		"link":   "link:a.txt", "link2": "link:a.txt", "file3": "plain\n",
		"mixed/x.txt": "x\n", "mixed/y.txt": "y\n",
		"dir with space/ü.txt": "unicode\n",
	}
}

func openSnapshots(t testing.TB, repo Repo) *Snapshots {
	t.Helper()
	s, err := OpenSnapshots(repo)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// freshOf builds commit from scratch in a state dir of its own, as the reference a
// derived snapshot must equal.
func freshOf(t testing.TB, repo Repo, commit string) *Snapshot {
	t.Helper()
	other := repo
	other.StateDir = t.TempDir()
	snap, err := openSnapshots(t, other).Ensure(commit)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Layers) != 1 {
		t.Fatalf("fresh snapshot has %d layers", len(snap.Layers))
	}
	return snap
}

func TestSnapshotFresh(t *testing.T) {
	requireRoot(t)
	repo := newTestRepo(t, snapBaseFiles())
	if err := os.Chmod(filepath.Join(repo.WorkTree, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	commit := commitFiles(t, repo, "exec", map[string]string{})
	s := openSnapshots(t, repo)
	snap, err := s.Ensure("main")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Commit != commit || snap.ID != commit[:12] || snap.Parent != "" || len(snap.Layers) != 1 {
		t.Fatalf("snapshot = %+v, want a one-layer snapshot of %s", snap, commit)
	}
	requireSnapshotMatches(t, repo, snap)

	alt, err := os.ReadFile(filepath.Join(snap.Layers[0], ".git/objects/info/alternates"))
	if err != nil || string(alt) != SnapshotObjectsDir+"\n" {
		t.Errorf("alternates = %q, %v; want %q", alt, err, SnapshotObjectsDir+"\n")
	}
	for dir, want := range map[string]os.FileMode{filepath.Dir(filepath.Dir(snap.Layers[0])): 0o700} {
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", dir, fi.Mode().Perm(), err, want)
		}
	}
	if fi, err := os.Stat(snap.Layers[0]); err != nil || fi.Mode().Perm()&0o022 != 0 {
		t.Errorf("layer %s writable by group or others: %v %v", snap.Layers[0], fi.Mode(), err)
	}
}

func TestSnapshotDerived(t *testing.T) {
	requireRoot(t)
	repo := newTestRepo(t, snapBaseFiles())
	s := openSnapshots(t, repo)
	base, err := s.Ensure("HEAD")
	if err != nil {
		t.Fatal(err)
	}

	// Every kind of change at once: modify, add under new dirs, delete a whole dir and
	// a dir chain, file to dir, dir to file, symlink retarget, symlink to file, file to
	// symlink, a mode change, delete one file of a dir that stays.
	c2 := applyCommit(t, repo, []string{"gone", "deep/a", "f2d", "d2f", "link2"}, []string{"run.sh"},
		map[string]string{
			"a.txt": "a2\n", "new/deeper/n.txt": "n\n", "f2d/inner.txt": "inner\n",
			"d2f": "now a file\n", "link": "link:b.txt", "link2": "regular now\n",
			"file3": "link:b.txt", "mixed/x.txt": "-", "mixed/z.txt": "z\n",
		})
	snap2, err := s.Ensure(c2)
	if err != nil {
		t.Fatal(err)
	}
	if snap2.Parent != base.Commit || len(snap2.Layers) != 2 || snap2.Layers[1] != base.Layers[0] {
		t.Fatalf("snapshot of c2 = %+v, want one layer over %v", snap2, base.Layers)
	}
	view2 := requireSnapshotMatches(t, repo, snap2)
	requireSameTree(t, "derived vs fresh c2", viewTree(t, view2), viewTree(t, mountView(t, freshOf(t, repo, c2).Layers)))
	// The layer holds the change, not the tree: whiteouts at the highest emptied dirs.
	for _, p := range []string{"gone", "deep/a", "mixed/x.txt"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(snap2.Layers[0], p), &st); err != nil ||
			st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
			t.Errorf("%s: want a whiteout in the new layer (%v)", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(snap2.Layers[0], "keep")); !os.IsNotExist(err) {
		t.Errorf("unchanged dir keep/ copied into the derived layer (%v)", err)
	}

	// Bring back what was whited out, and turn the type changes around again.
	c3 := applyCommit(t, repo, []string{"d2f", "f2d", "b.txt", "new"}, nil, map[string]string{
		"gone/one.txt": "back\n", "d2f/again.txt": "again\n", "f2d": "a file again\n",
		"deep/a/b/c.txt": "c is back\n", "link2": "link:keep/x.txt",
	})
	snap3, err := s.Ensure(c3)
	if err != nil {
		t.Fatal(err)
	}
	if snap3.Parent != c2 || len(snap3.Layers) != 3 {
		t.Fatalf("snapshot of c3 = %+v, want one layer over c2's", snap3)
	}
	view3 := requireSnapshotMatches(t, repo, snap3)
	fresh3 := mountView(t, freshOf(t, repo, c3).Layers)
	requireSameTree(t, "derived vs fresh c3", viewTree(t, view3), viewTree(t, fresh3))
	if got, want := viewGit(t, repo, view3, "ls-files", "-s"), viewGit(t, repo, fresh3, "ls-files", "-s"); got != want {
		t.Errorf("derived index differs from a checkout's:\n%s\nwant\n%s", got, want)
	}
}

func TestSnapshotMaxDepth(t *testing.T) {
	requireRoot(t)
	repo := newTestRepo(t, map[string]string{"f": "0\n"})
	s := openSnapshots(t, repo)
	s.maxDepth = 2
	var snaps []*Snapshot
	for i, c := range []string{"1\n", "2\n", "3\n"} {
		if i > 0 {
			commitFiles(t, repo, "step", map[string]string{"f": c})
		}
		snap, err := s.Ensure("HEAD")
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, snap)
		requireSnapshotMatches(t, repo, snap)
	}
	if got := []int{len(snaps[0].Layers), len(snaps[1].Layers)}; !slices.Equal(got, []int{1, 2}) {
		t.Errorf("layers = %v, want [1 2]", got)
	}
	if len(snaps[2].Layers) > 2 || snaps[2].Parent == snaps[1].Commit {
		t.Errorf("third snapshot extends a full-depth chain: %+v", snaps[2])
	}
}

func TestSnapshotEnsureOnce(t *testing.T) {
	requireRoot(t)
	repo := newTestRepo(t, map[string]string{"f": "1\n", "d/g": "2\n"})
	s := openSnapshots(t, repo)
	first, err := s.Ensure("main")
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Ensure(first.Commit)
	if err != nil || again != first || s.builds.Load() != 1 {
		t.Fatalf("second Ensure = %p, %v after %d builds; want %p after 1", again, err, s.builds.Load(), first)
	}

	c2 := commitFiles(t, repo, "two", map[string]string{"f": "changed\n"})
	var wg sync.WaitGroup
	got := make([]*Snapshot, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = s.Ensure(c2) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != got[0] {
			t.Fatalf("concurrent Ensure %d = %p, %v; want %p", i, got[i], errs[i], got[0])
		}
	}
	if n := s.builds.Load(); n != 2 {
		t.Errorf("%d builds, want 2", n)
	}

	// A later process finds both on disk and builds nothing.
	reopened := openSnapshots(t, repo)
	list, err := reopened.List()
	if err != nil || len(list) != 2 {
		t.Fatalf("List after reopen = %d snapshots, %v; want 2", len(list), err)
	}
	snap, err := reopened.Ensure(c2)
	if err != nil || !slices.Equal(snap.Layers, got[0].Layers) || snap.Parent != first.Commit || reopened.builds.Load() != 0 {
		t.Errorf("Ensure after reopen = %+v, %v, %d builds; want %+v, no build", snap, err, reopened.builds.Load(), got[0])
	}
	if g, ok := reopened.Get(first.Commit); !ok || g.ID != first.ID {
		t.Errorf("Get(%s) = %v, %v", first.Commit, g, ok)
	}
}

func TestSnapshotCollect(t *testing.T) {
	requireRoot(t)
	repo := newTestRepo(t, map[string]string{"f": "1\n"})
	s := openSnapshots(t, repo)
	var commits []string
	for i, c := range []string{"", "2\n", "3\n", "4\n"} {
		if i > 0 {
			commitFiles(t, repo, "step", map[string]string{"f": c})
		}
		if i == 3 {
			s.maxDepth = 1 // the fourth is a fresh one: a chain of its own
		}
		snap, err := s.Ensure("HEAD")
		if err != nil {
			t.Fatal(err)
		}
		commits = append(commits, snap.Commit)
	}
	c1, c2, c3, c4 := commits[0], commits[1], commits[2], commits[3]

	// c2 is in use, so c1 (below it) stays; c4 is the newest. Only c3 can go.
	removed, err := s.Collect(func(c string) bool { return c == c2 }, 1)
	if err != nil || !slices.Equal(removed, []string{c3}) {
		t.Fatalf("Collect = %v, %v; want [%s]", removed, err, c3)
	}
	if _, ok := s.Get(c3); ok {
		t.Error("c3 still known after Collect")
	}
	if snap, ok := s.Get(c2); !ok {
		t.Error("c2 removed while in use")
	} else {
		requireSnapshotMatches(t, repo, snap)
	}

	removed, err = s.Collect(func(string) bool { return false }, 1)
	slices.Sort(removed)
	want := []string{c1, c2}
	slices.Sort(want)
	if err != nil || !slices.Equal(removed, want) {
		t.Fatalf("Collect = %v, %v; want %v", removed, err, want)
	}
	names, _ := os.ReadDir(filepath.Join(repo.StateDir, "s"))
	if len(names) != 1 || names[0].Name() != c4[:12] {
		t.Errorf("left in %s: %v, want only %s", repo.StateDir, names, c4[:12])
	}
}

func TestSnapshotUnknownRevision(t *testing.T) {
	requireRoot(t)
	repo := newTestRepo(t, map[string]string{"f": "1\n"})
	s := openSnapshots(t, repo)
	if _, err := s.Ensure("no-such-branch"); !errors.Is(err, ErrUnknownRevision) {
		t.Fatalf("Ensure(no-such-branch) = %v, want ErrUnknownRevision", err)
	}
	if names, _ := os.ReadDir(filepath.Join(repo.StateDir, "s")); len(names) != 0 {
		t.Errorf("left behind: %v", names)
	}
}

func TestSnapshotStaleTemp(t *testing.T) {
	requireRoot(t)
	repo := newTestRepo(t, map[string]string{"f": "1\n"})
	stale := filepath.Join(repo.StateDir, "s", snapTmpPrefix+"999999999-x")
	if err := os.MkdirAll(filepath.Join(stale, "l"), 0o755); err != nil {
		t.Fatal(err)
	}
	openSnapshots(t, repo)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale build dir %s survived OpenSnapshots (%v)", stale, err)
	}
}

// Under sudo the agent runs as the owner of the work tree: the snapshot must be theirs,
// and handing it over must not make git status re-hash (or report) anything.
func TestSnapshotOwner(t *testing.T) {
	requireRoot(t)
	repo := newTestRepo(t, map[string]string{"f": "1\n", "d/g": "2\n"})
	c2 := commitFiles(t, repo, "two", map[string]string{"d/h": "3\n"})
	const uid, gid = 65534, 65534
	if err := os.Chown(repo.WorkTree, uid, gid); err != nil {
		t.Fatal(err)
	}
	s := openSnapshots(t, repo)
	if _, err := s.Ensure(c2 + "~1"); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Ensure(c2)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Layers) != 2 {
		t.Fatalf("want a derived snapshot, got %+v", snap)
	}
	for _, layer := range snap.Layers {
		filepath.WalkDir(layer, func(p string, d os.DirEntry, err error) error {
			var st unix.Stat_t
			if err == nil {
				err = unix.Lstat(p, &st)
			}
			if err != nil || st.Uid != uid || st.Gid != gid {
				t.Errorf("%s: owner %d:%d (%v), want %d:%d", p, st.Uid, st.Gid, err, uid, gid)
			}
			return nil
		})
	}
	requireSnapshotMatches(t, repo, snap)
}

// A derived layer writes blobs as stored: a tree whose attributes rewrite content at
// checkout must be built fresh, and one whose attributes do not must still derive.
func TestSnapshotAttributes(t *testing.T) {
	requireRoot(t)
	repo := newTestRepo(t, map[string]string{".gitattributes": "*.png binary\n*.go text=auto eol=lf\n", "a.txt": "a\n"})
	s := openSnapshots(t, repo)
	if _, err := s.Ensure("HEAD"); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Ensure(commitFiles(t, repo, "plain", map[string]string{"b.txt": "b\n"}))
	if err != nil || snap.Parent == "" {
		t.Fatalf("harmless attributes: snapshot %+v, %v; want derived", snap, err)
	}
	requireSnapshotMatches(t, repo, snap)

	c3 := commitFiles(t, repo, "crlf", map[string]string{"sub/.gitattributes": "*.txt eol=crlf\n", "sub/c.txt": "c\n"})
	if snap, err = s.Ensure(c3); err != nil || snap.Parent != "" {
		t.Fatalf("eol=crlf: snapshot %+v, %v; want fresh", snap, err)
	}
	view := mountView(t, snap.Layers)
	if data, _ := os.ReadFile(filepath.Join(view, "sub/c.txt")); string(data) != "c\r\n" {
		t.Errorf("sub/c.txt = %q, want a checkout's CRLF", data)
	}
	requireCleanStatus(t, repo, view)
	c4 := commitFiles(t, repo, "more", map[string]string{"d.txt": "d\n"})
	if snap, err = s.Ensure(c4); err != nil || snap.Parent != "" {
		t.Errorf("child of a converting tree: snapshot %+v, %v; want fresh", snap, err)
	}
}

func TestSnapshotAttrsConvert(t *testing.T) {
	for attrs, want := range map[string]bool{
		"*.png binary\n":                       false,
		"geolocation/** -diff\n":               false,
		"*.go text=auto eol=lf\n":              false,
		"# *.txt eol=crlf\n":                   false,
		"*.bat text eol=crlf\n":                true,
		"*.c ident\n":                          true,
		"*.c -ident\n":                         false,
		"*.txt working-tree-encoding=UTF-16\n": true,
		"[attr]win eol=crlf\n":                 true,
	} {
		if got := snapAttrsConvert([]byte(attrs)); got != want {
			t.Errorf("snapAttrsConvert(%q) = %v, want %v", attrs, got, want)
		}
	}
}
