package sandbox

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// captureBase is the snapshot layer of every capture test.
var captureBase = map[string]string{
	"README.md":           "hello\n",
	"keep.txt":            "keep\n",
	"run.sh":              "#!/bin/sh\n",
	"src/a.go":            "package src\n",
	"src/b.go":            "package src // b\n",
	"src/sub/c.go":        "package sub\n",
	"src/sub/deep/d.go":   "package deep\n",
	"docs/guide.md":       "guide\n",
	"docs/api.md":         "api\n",
	"link":                "link:README.md",
	"link2":               "link:keep.txt",
	"gone.txt":            "whited out by the second layer\n",
	"opq/old1.txt":        "hidden by the opaque dir of the second layer\n",
	"opq/old2.txt":        "hidden too\n",
	".gitignore":          "*.log\n!keep.log\nbuild/\nignored-tracked.txt\n",
	"ignored-tracked.txt": "tracked\n",
	"env/tool.cfg":        "env layer\n",
	".git/HEAD":           "ref: refs/heads/main\n",
	".git/info/exclude":   "*.secret\n",
}

// captureSecond is a derived snapshot layer above captureBase: an override, files of
// its own, and (made by newOverlayFixture) a whiteout of gone.txt and an opaque opq/.
var captureSecond = map[string]string{
	"src/a.go":     "package src // v2\n",
	"l2only.txt":   "only in the second layer\n",
	"l2dir/x.txt":  "x\n",
	"opq/new.txt":  "new in the opaque dir\n",
	"docs/api.md":  "api v2\n",
	"run.sh.notes": "notes\n",
}

// overlayFixture is a real overlay: two lower layers, an upper and a work dir.
type overlayFixture struct {
	t      testing.TB
	lowers []string // top first
	upper  string
	work   string
	merged string
}

func newOverlayFixture(t testing.TB, base, second map[string]string) *overlayFixture {
	t.Helper()
	requireRoot(t)
	// Short names: the mount option string must fit one page.
	root := t.TempDir()
	f := &overlayFixture{t: t, upper: filepath.Join(root, "u"), work: filepath.Join(root, "w"),
		merged: filepath.Join(root, "m"), lowers: []string{filepath.Join(root, "l2"), filepath.Join(root, "l1")}}
	for _, d := range []string{f.upper, f.work, f.merged, f.lowers[0], f.lowers[1]} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeTree(t, f.lowers[1], base)
	if err := os.Chmod(filepath.Join(f.lowers[1], "run.sh"), 0o755); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	writeTree(t, f.lowers[0], second)
	if err := unix.Mknod(filepath.Join(f.lowers[0], "gone.txt"), unix.S_IFCHR, 0); err != nil {
		t.Fatalf("whiteout in the second layer: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(f.lowers[0], "opq"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(f.lowers[0], "opq"), xattrOpaque, []byte("y"), 0); err != nil {
		t.Fatalf("opaque dir in the second layer: %v", err)
	}
	return f
}

// mount mounts path read-write or, with no upper, a read-only view of layers.
func mountTestOverlay(t testing.TB, target string, layers []string, upper, work string) {
	t.Helper()
	opts := "lowerdir=" + strings.Join(layers, ":") + ",redirect_dir=on"
	flags := uintptr(0)
	if upper != "" {
		opts += ",upperdir=" + upper + ",workdir=" + work
	} else {
		flags = unix.MS_RDONLY
	}
	if err := unix.Mount("overlay", target, "overlay", flags, opts); err != nil {
		t.Fatalf("mount overlay at %s (%s): %v", target, opts, err)
	}
	t.Cleanup(func() { unix.Unmount(target, unix.MNT_DETACH) })
}

// session mounts the merged view, runs a shell script in it, and unmounts it again:
// capture reads a session that no longer runs.
func (f *overlayFixture) session(script string) {
	t := f.t
	t.Helper()
	mountTestOverlay(t, f.merged, f.lowers, f.upper, f.work)
	cmd := exec.Command("sh", "-ec", script)
	cmd.Dir = f.merged
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("session script %q: %v\n%s", script, err, out)
	}
	if err := unix.Unmount(f.merged, 0); err != nil {
		t.Fatalf("unmount %s: %v", f.merged, err)
	}
}

// views mounts read-only views of the base (the lowers) and of the session (upper
// over the lowers) for DiffTrees.
func (f *overlayFixture) views() (base, next string) {
	t := f.t
	t.Helper()
	root := t.TempDir()
	base, next = filepath.Join(root, "b"), filepath.Join(root, "n")
	for _, d := range []string{base, next} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mountTestOverlay(t, base, f.lowers, "", "")
	mountTestOverlay(t, next, append([]string{f.upper}, f.lowers...), "", "")
	return base, next
}

// changeSummary renders a changeset compactly: "M path 644>755", "A link l:target".
func changeSummary(cs Changeset) []string {
	out := []string{}
	for _, c := range cs {
		s := fmt.Sprintf("%c %s %s", strings.ToUpper(string(c.Kind))[0], c.Path, modeString(c.OldMode, c.Mode))
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

func modeString(old, next fs.FileMode) string {
	one := func(m fs.FileMode) string {
		if m&fs.ModeSymlink != 0 {
			return "l"
		}
		return fmt.Sprintf("%o", m.Perm())
	}
	switch {
	case old == 0:
		return one(next)
	case next == 0 || old == next:
		return one(old)
	}
	return one(old) + ">" + one(next)
}

// checkSources verifies that each change's Source and Link show what the session view
// holds at its path.
func checkSources(t *testing.T, cs Changeset, next string) {
	t.Helper()
	for _, c := range cs {
		if c.Kind == Deleted {
			if c.Source != "" || c.Mode != 0 {
				t.Errorf("%s: deleted with source %q mode %v", c.Path, c.Source, c.Mode)
			}
			continue
		}
		view := filepath.Join(next, c.Path)
		if c.Mode == fs.ModeSymlink {
			want, err := os.Readlink(view)
			if err != nil || want != c.Link {
				t.Errorf("%s: link %q, the view has %q (%v)", c.Path, c.Link, want, err)
			}
			continue
		}
		got, err1 := os.ReadFile(c.Source)
		want, err2 := os.ReadFile(view)
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: source %s holds %q, the view %q (%v, %v)", c.Path, c.Source, got, want, err1, err2)
		}
	}
}
