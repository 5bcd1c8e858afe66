package supervisor

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// objects reads and writes git objects for one publish without a process per
// object: reads go through one `git cat-file --batch` (which sees packs and loose
// objects alike), writes are loose objects hashed and deflated here. A publish is a
// few object reads and writes on the paths it changes, so its cost does not grow with
// the repository — an index of the whole tree (read-tree, write-tree) would.
type objects struct {
	gitDir string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	trees  map[string][]treeEntry
}

// treeEntry is one entry of a tree object.
type treeEntry struct {
	mode, name, sha string
}

func openObjects(gitDir string) (*objects, error) {
	cmd := exec.Command("git", "--git-dir", gitDir, "cat-file", "--batch")
	cmd.Dir = gitDir
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git cat-file --batch: %w", err)
	}
	return &objects{gitDir: gitDir, cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10), trees: map[string][]treeEntry{}}, nil
}

// close ends the cat-file process.
func (o *objects) close() {
	o.in.Close()
	o.cmd.Wait()
}

// read returns an object's type and content.
func (o *objects) read(name string) (string, []byte, error) {
	_, typ, data, err := o.readNamed(name)
	return typ, data, err
}

// readNamed resolves name (an id or a ref) and returns the object's id, type and
// content.
func (o *objects) readNamed(name string) (string, string, []byte, error) {
	sha, typ, data, err := o.readRaw(name)
	if err != nil {
		return "", "", nil, fmt.Errorf("cat-file %s: %w", name, err)
	}
	return sha, typ, data, nil
}

func (o *objects) readRaw(name string) (string, string, []byte, error) {
	if strings.ContainsAny(name, "\n") {
		return "", "", nil, fmt.Errorf("bad object name")
	}
	if _, err := io.WriteString(o.in, name+"\n"); err != nil {
		return "", "", nil, err
	}
	hdr, err := o.out.ReadString('\n')
	if err != nil {
		return "", "", nil, err
	}
	f := strings.Fields(hdr)
	if len(f) != 3 {
		return "", "", nil, fmt.Errorf("%s", strings.TrimSpace(hdr)) // "<name> missing"
	}
	n, err := strconv.Atoi(f[2])
	if err != nil {
		return "", "", nil, fmt.Errorf("bad size %q", f[2])
	}
	data := make([]byte, n+1) // content and its newline
	if _, err := io.ReadFull(o.out, data); err != nil {
		return "", "", nil, err
	}
	return f[0], f[1], data[:n], nil
}

// tree reads a tree object's entries (cached: trees are immutable).
func (o *objects) tree(sha string) ([]treeEntry, error) {
	if t, ok := o.trees[sha]; ok {
		return t, nil
	}
	typ, data, err := o.read(sha)
	if err != nil {
		return nil, err
	}
	if typ != "tree" {
		return nil, fmt.Errorf("object %.12s is a %s, not a tree", sha, typ)
	}
	var out []treeEntry
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp < 0 || nul < sp || len(data) < nul+21 {
			return nil, fmt.Errorf("tree %.12s: malformed", sha)
		}
		mode := string(data[:sp])
		if len(mode) == 5 {
			mode = "0" + mode // git writes trees as "40000"; ls-tree shows "040000"
		}
		out = append(out, treeEntry{mode: mode, name: string(data[sp+1 : nul]), sha: hex.EncodeToString(data[nul+1 : nul+21])})
		data = data[nul+21:]
	}
	o.trees[sha] = out
	return out, nil
}

// commitTree returns a commit's tree.
func (o *objects) commitTree(commit string) (string, error) {
	typ, data, err := o.read(commit)
	if err != nil {
		return "", err
	}
	if typ != "commit" || !bytes.HasPrefix(data, []byte("tree ")) || len(data) < 45 {
		return "", fmt.Errorf("object %.12s is not a commit", commit)
	}
	return string(data[5:45]), nil
}

// lookup returns the entry at p under the tree root, or the zero entry.
func (o *objects) lookup(root, p string) (entry, error) {
	cur := entry{mode: "040000", sha: root}
	for _, name := range strings.Split(p, "/") {
		if !cur.isTree() {
			return entry{}, nil
		}
		ents, err := o.tree(cur.sha)
		if err != nil {
			return entry{}, err
		}
		cur = entry{}
		for _, e := range ents {
			if e.name == name {
				cur = entry{mode: e.mode, sha: e.sha}
				break
			}
		}
		if !cur.exists() {
			return entry{}, nil
		}
	}
	return cur, nil
}

// write stores a loose object and returns its id. Like git, it writes a temporary file
// and renames it into place, so a crash never leaves a torn object under its name.
func (o *objects) write(typ string, data []byte) (string, error) {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", typ, len(data))
	h.Write(data)
	sha := hex.EncodeToString(h.Sum(nil))
	dir := filepath.Join(o.gitDir, "objects", sha[:2])
	path := filepath.Join(dir, sha[2:])
	if _, err := os.Stat(path); err == nil {
		return sha, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("write object: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return "", fmt.Errorf("write object: %w", err)
	}
	zw, _ := zlib.NewWriterLevel(tmp, zlib.BestSpeed)
	fmt.Fprintf(zw, "%s %d\x00", typ, len(data))
	zw.Write(data)
	err = zw.Close()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		os.Chmod(tmp.Name(), 0o444)
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("write object %s: %w", sha, err)
	}
	return sha, nil
}

// applyTree writes the tree that is root with changes applied (a zero entry deletes)
// and returns its id; only the trees on the changed paths are read and rewritten.
// A directory left empty disappears, as in git.
func (o *objects) applyTree(root string, changes map[string]entry) (string, error) {
	var ents []treeEntry
	if root != "" {
		var err error
		if ents, err = o.tree(root); err != nil {
			return "", err
		}
	}
	byName := map[string]treeEntry{}
	for _, e := range ents {
		byName[e.name] = e
	}
	sub := map[string]map[string]entry{}
	for p, e := range changes {
		name, rest, nested := strings.Cut(p, "/")
		if !nested {
			if e.exists() {
				byName[name] = treeEntry{mode: e.mode, name: name, sha: e.sha}
			} else {
				delete(byName, name)
			}
			continue
		}
		if sub[name] == nil {
			sub[name] = map[string]entry{}
		}
		sub[name][rest] = e
	}
	for name, ch := range sub {
		base := ""
		if e, ok := byName[name]; ok && e.mode == "040000" {
			base = e.sha
		}
		sha, err := o.applyTree(base, ch)
		if err != nil {
			return "", err
		}
		if sha == "" {
			delete(byName, name)
		} else {
			byName[name] = treeEntry{mode: "040000", name: name, sha: sha}
		}
	}
	if len(byName) == 0 {
		return "", nil
	}
	out := make([]treeEntry, 0, len(byName))
	for _, e := range byName {
		out = append(out, e)
	}
	// git orders a tree's entries by name, a directory's name as if it ended in "/".
	key := func(e treeEntry) string {
		if e.mode == "040000" {
			return e.name + "/"
		}
		return e.name
	}
	sort.Slice(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	var buf bytes.Buffer
	for _, e := range out {
		raw, err := hex.DecodeString(e.sha)
		if err != nil || len(raw) != 20 {
			return "", fmt.Errorf("tree entry %s: bad id %q", e.name, e.sha)
		}
		fmt.Fprintf(&buf, "%s %s\x00", strings.TrimPrefix(e.mode, "0"), e.name)
		buf.Write(raw)
	}
	return o.write("tree", buf.Bytes())
}
