package sandbox

import (
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLayersStackResolution checks the lower stack against overlayfs's rules without a
// mount: whiteouts and opaque dirs of an upper lower layer hide what is below them, and
// the top-most entry decides a name's type. (Mknod and trusted xattrs need root.)
func TestLayersStackResolution(t *testing.T) {
	requireRoot(t)
	root := t.TempDir()
	top, bottom := filepath.Join(root, "top"), filepath.Join(root, "bottom")
	writeTree(t, bottom, map[string]string{
		"wo.txt": "x", "wodir/f": "x", "opq/hidden": "x", "opq/also": "x", "merge/low": "x",
		"merge/both": "low", "f2d": "file below", "d2f/inner": "x", "keep": "x",
	})
	writeTree(t, top, map[string]string{
		"opq/seen": "x", "merge/high": "x", "merge/both": "high", "f2d/inner": "x", "d2f": "file above",
	})
	for _, wo := range []string{"wo.txt", "wodir"} {
		if err := unix.Mknod(filepath.Join(top, wo), unix.S_IFCHR, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Setxattr(filepath.Join(top, "opq"), xattrOpaque, []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	stack := rootLowerDir([]string{top, bottom})

	files := map[string]treeFile{}
	if err := walkLower(stack, "", files); err != nil {
		t.Fatal(err)
	}
	var got []string
	for p := range files {
		got = append(got, p)
	}
	slices.Sort(got)
	want := []string{"d2f", "f2d/inner", "keep", "merge/both", "merge/high", "merge/low", "opq/seen"}
	if !slices.Equal(got, want) {
		t.Errorf("merged lower files:\n got %q\nwant %q", got, want)
	}
	if f := files["merge/both"]; f.abs != filepath.Join(top, "merge", "both") {
		t.Errorf("merge/both comes from %s, want the top layer", f.abs)
	}
	for p, kind := range map[string]entryKind{
		"wodir/f": kindNone, "wo.txt": kindNone, "opq/hidden": kindNone, "d2f/inner": kindNone,
		"f2d": kindDir, "d2f": kindFile, "merge": kindDir, "keep": kindFile, "keep/x": kindNone,
	} {
		n, err := stack.resolve(p)
		if err != nil {
			t.Fatal(err)
		}
		if n.kind != kind {
			t.Errorf("resolve %s: kind %d, want %d", p, n.kind, kind)
		}
	}
	if n, _ := stack.resolve("f2d"); len(n.dir.dirs) != 1 {
		t.Errorf("a dir over a file merges %d layers, want 1", len(n.dir.dirs))
	}
	if b, err := stack.readFile("merge/both"); err != nil || string(b) != "high" {
		t.Errorf("readFile merge/both = %q, %v", b, err)
	}
}

// TestLayersOverlayXattrMissing checks that a dir without overlay xattrs reads as
// neither opaque nor redirected.
func TestLayersOverlayXattrMissing(t *testing.T) {
	dir := t.TempDir()
	if op, err := isOpaqueDir(dir); op || err != nil {
		t.Errorf("isOpaqueDir = %v, %v", op, err)
	}
	if r, err := redirectOf(dir); r != "" || err != nil {
		t.Errorf("redirectOf = %q, %v", r, err)
	}
	if _, err := redirectOf(filepath.Join(dir, "missing")); err == nil {
		t.Errorf("redirectOf a missing dir: no error")
	}
}
