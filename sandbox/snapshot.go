package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// MaxDepth is the most layers a snapshot stack may have. A snapshot derived from one
// already this deep is built fresh instead: every layer costs a lookup on each miss in
// the overlay, and the lowerdir option string must fit in a page.
const MaxDepth = 24

// SnapshotObjectsDir is where a sandbox must bind the host's object dir (read-only):
// every snapshot's .git/objects/info/alternates names it, because inside the sandbox
// the repository's own .git/objects path is covered by the workspace overlay.
const SnapshotObjectsDir = "/.corral/objects"

const (
	snapDirName   = "s"         // under Repo.StateDir
	snapLayerName = "l"         // one letter: 24 layer paths share the 4 KiB option string
	snapMetaName  = "meta.json" // beside the layer, in the snapshot's dir
	snapTmpPrefix = ".tmp-"     // builds and deletions in progress: .tmp-<pid>-<random>
)

// Snapshot is an immutable, read-only tree of one commit, shared by every session on it.
// Values handed out by Snapshots are shared: treat them as read-only.
type Snapshot struct {
	Commit  string    // full commit id
	ID      string    // directory name under StateDir/s, usually the first 12 hex digits
	Layers  []string  // absolute layer dirs, top first, ready to join with ":" for lowerdir
	Parent  string    // commit of the snapshot this one was derived from, "" for a full one
	Created time.Time // when the build finished
}

// snapMeta is the snapshot's meta.json: what a later process needs to reload it.
type snapMeta struct {
	Commit  string    `json:"commit"`
	Parent  string    `json:"parent,omitempty"`
	Layers  []string  `json:"layers"` // relative to StateDir/s, top first
	Created time.Time `json:"created"`
	// Files counts index entries, to judge when a diff is too big to be worth deriving.
	Files int `json:"files"`
	// Converts is set when .gitattributes rewrite content at checkout (eol=crlf, ident,
	// working-tree-encoding): a derived layer writes blobs as stored, so it would not
	// match a checkout. Sticky until the next fresh build.
	Converts bool `json:"converts,omitempty"`
}

// snapEntry is a loaded snapshot and what the builder needs to know about it.
type snapEntry struct {
	snap *Snapshot
	meta snapMeta
	used time.Time // last Ensure that returned it, to pick the parent of the next build
}

// snapCall is one build in flight; later callers for the same commit wait on done.
type snapCall struct {
	done chan struct{}
	snap *Snapshot
	err  error
}

// Snapshots builds, finds and collects the snapshots of one repository.
type Snapshots struct {
	repo     Repo
	dir      string // StateDir/s
	maxDepth int
	uid, gid int  // owner of the work tree: the user the agent runs as
	chown    bool // the owner is not who we are, so built files must be handed over
	umask    int

	// gcMu keeps Collect from deleting a layer a build is stacking on: builds hold it
	// shared, Collect exclusively.
	gcMu sync.RWMutex

	mu       sync.Mutex
	byCommit map[string]*snapEntry
	building map[string]*snapCall
	builds   atomic.Int64 // builds run (fresh or derived), for tests and stats
}

// OpenSnapshots loads the snapshots of repo, creating StateDir/s (0700) if needed and
// removing temp dirs left by a build or deletion that crashed.
func OpenSnapshots(repo Repo) (*Snapshots, error) {
	dir := filepath.Join(repo.StateDir, snapDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapshots %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapshots %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(repo.WorkTree, &st); err != nil {
		return nil, fmt.Errorf("snapshots %s: owner of work tree: %w", repo.WorkTree, err)
	}
	s := &Snapshots{
		repo: repo, dir: dir, maxDepth: MaxDepth,
		uid: int(st.Uid), gid: int(st.Gid),
		chown:    int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid(),
		umask:    snapUmask(),
		byCommit: map[string]*snapEntry{},
		building: map[string]*snapCall{},
	}
	if err := s.scan(true); err != nil {
		return nil, err
	}
	return s, nil
}

// Ensure resolves rev and returns its snapshot, building it (once, however many callers
// ask at the same time) if it does not exist yet. An unknown rev wraps ErrUnknownRevision.
func (s *Snapshots) Ensure(rev string) (*Snapshot, error) {
	// A full commit id we already have needs no git process: sessions start by id.
	s.mu.Lock()
	if e, ok := s.byCommit[rev]; ok {
		e.used = time.Now()
		s.mu.Unlock()
		return e.snap, nil
	}
	s.mu.Unlock()
	commit, err := s.repo.ResolveRev(rev)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", rev, err)
	}
	s.mu.Lock()
	if e, ok := s.byCommit[commit]; ok {
		e.used = time.Now()
		s.mu.Unlock()
		return e.snap, nil
	}
	if c, ok := s.building[commit]; ok {
		s.mu.Unlock()
		<-c.done
		return c.snap, c.err
	}
	c := &snapCall{done: make(chan struct{})}
	s.building[commit] = c
	s.mu.Unlock()

	c.snap, c.err = s.build(commit)

	s.mu.Lock()
	delete(s.building, commit)
	s.mu.Unlock()
	close(c.done)
	return c.snap, c.err
}

// Get returns the snapshot of a full commit id, looking on disk if another process
// built it.
func (s *Snapshots) Get(commit string) (*Snapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byCommit[commit]; ok {
		return e.snap, true
	}
	if e := s.loadCommit(commit); e != nil {
		return e.snap, true
	}
	return nil, false
}

// List rescans StateDir/s (other processes may build too) and returns every snapshot,
// oldest first.
func (s *Snapshots) List() ([]*Snapshot, error) {
	if err := s.scan(false); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Snapshot, 0, len(s.byCommit))
	for _, e := range s.byCommit {
		out = append(out, e.snap)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Collect removes every snapshot that is not in use, not among the keep most recently
// created, and whose layer is not part of the stack of one that stays (derived
// snapshots stand on their parents' layers). It returns the removed commit ids.
// inUse is called without locks held; a session should count as in use before it
// mounts, since an Ensure racing with Collect may return a snapshot being removed.
func (s *Snapshots) Collect(inUse func(commit string) bool, keep int) ([]string, error) {
	s.gcMu.Lock() // no build is stacking on a layer while we choose
	defer s.gcMu.Unlock()
	all, err := s.List()
	if err != nil {
		return nil, err
	}
	slices.Reverse(all)         // newest first
	needed := map[string]bool{} // layer dirs some kept snapshot stands on
	for i, snap := range all {
		if i < keep || (inUse != nil && inUse(snap.Commit)) {
			for _, l := range snap.Layers {
				needed[l] = true
			}
		}
	}
	var removed []string
	for _, snap := range all {
		if needed[snap.Layers[0]] {
			continue
		}
		if err := s.remove(snap); err != nil {
			return removed, err
		}
		removed = append(removed, snap.Commit)
	}
	return removed, nil
}

// remove forgets a snapshot and deletes its dir. The dir is renamed to a temp name
// first, so a crash halfway through the delete leaves a temp dir (cleaned on open),
// never a half snapshot, and the slow delete runs without s.mu held.
func (s *Snapshots) remove(snap *Snapshot) error {
	tmp, err := s.tempDir()
	if err != nil {
		return fmt.Errorf("snapshot %s: remove: %w", snap.ID, err)
	}
	s.mu.Lock()
	// unix.Rename: os.Rename refuses to replace a directory, even an empty one.
	err = unix.Rename(filepath.Join(s.dir, snap.ID), tmp)
	if err == nil && snap.Commit != "" {
		delete(s.byCommit, snap.Commit)
	}
	s.mu.Unlock()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("snapshot %s: remove: %w", snap.ID, err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("snapshot %s: remove: %w", snap.ID, err)
	}
	return nil
}

// build makes the snapshot of commit: found on disk (another process built it),
// derived from a recent snapshot, or fresh.
func (s *Snapshots) build(commit string) (*Snapshot, error) {
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	s.mu.Lock()
	e := s.loadCommit(commit)
	s.mu.Unlock()
	if e != nil {
		return e.snap, nil
	}
	id := s.idFor(commit)
	s.builds.Add(1)
	var meta *snapMeta
	var err error
	if parent := s.pickParent(commit); parent != nil {
		meta, err = s.buildDerived(parent, commit, id)
		if errors.Is(err, errSnapNotDerivable) {
			meta = nil
		} else if err != nil {
			return nil, err
		}
	}
	if meta == nil {
		if meta, err = s.buildFresh(commit, id); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err = s.entry(id, *meta)
	if err != nil {
		return nil, err
	}
	e.used = time.Now()
	s.byCommit[commit] = e
	return e.snap, nil
}

// pickParent chooses the snapshot to derive commit from: one of the commit's parents
// if it has a snapshot (the usual case: the head moved by a commit), else the most
// recently used one. Too-deep stacks are skipped; a too-big diff is judged later.
func (s *Snapshots) pickParent(commit string) *snapEntry {
	s.mu.Lock()
	var only *snapEntry
	n := 0
	for _, e := range s.byCommit {
		if len(e.snap.Layers) < s.maxDepth {
			only, n = e, n+1
		}
	}
	s.mu.Unlock()
	if n <= 1 {
		return only // no choice to make: spare a git process
	}
	out, err := s.repo.Git("rev-parse", commit+"^@")
	if err != nil {
		out = "" // a parent we cannot name just means no preferred parent
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range strings.Fields(out) {
		if e, ok := s.byCommit[p]; ok && len(e.snap.Layers) < s.maxDepth {
			return e
		}
	}
	var best *snapEntry
	for _, e := range s.byCommit {
		if len(e.snap.Layers) >= s.maxDepth {
			continue
		}
		if best == nil || e.used.After(best.used) {
			best = e
		}
	}
	return best
}

// idFor names the snapshot dir of commit: 12 hex digits, or the full id in the rare
// case another commit already has those 12.
func (s *Snapshots) idFor(commit string) string {
	id := commit[:12]
	meta, err := s.readMeta(id)
	if err == nil && meta.Commit != commit {
		return commit
	}
	return id
}

// scan loads every snapshot dir not loaded yet; at open it also removes temp dirs of
// dead processes (a live one may be building in its own).
func (s *Snapshots) scan(clean bool) error {
	names, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("snapshots %s: %w", s.dir, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	known := map[string]bool{}
	for _, e := range s.byCommit {
		known[e.snap.ID] = true
	}
	for _, n := range names {
		name := n.Name()
		if strings.HasPrefix(name, snapTmpPrefix) {
			if clean && !snapTempOwnerAlive(name) {
				if err := os.RemoveAll(filepath.Join(s.dir, name)); err != nil {
					return fmt.Errorf("snapshots %s: remove stale %s: %w", s.dir, name, err)
				}
			}
			continue
		}
		if known[name] || !n.IsDir() {
			continue
		}
		meta, err := s.readMeta(name)
		if err != nil {
			continue // not a snapshot of ours, or its parent's layers are gone
		}
		if e, err := s.entry(name, meta); err == nil {
			s.byCommit[meta.Commit] = e
		}
	}
	return nil
}

// loadCommit loads commit's snapshot from disk if present; s.mu must be held.
func (s *Snapshots) loadCommit(commit string) *snapEntry {
	if len(commit) < 12 {
		return nil
	}
	for _, id := range []string{commit[:12], commit} {
		meta, err := s.readMeta(id)
		if err != nil || meta.Commit != commit {
			continue
		}
		if e, err := s.entry(id, meta); err == nil {
			s.byCommit[commit] = e
			return e
		}
	}
	return nil
}

// readMeta reads StateDir/s/<id>/meta.json.
func (s *Snapshots) readMeta(id string) (snapMeta, error) {
	var meta snapMeta
	data, err := os.ReadFile(filepath.Join(s.dir, id, snapMetaName))
	if err != nil {
		return meta, err
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return meta, fmt.Errorf("snapshot %s: %s: %w", id, snapMetaName, err)
	}
	return meta, nil
}

// entry turns a snapshot's metadata into a Snapshot, checking every layer is there.
func (s *Snapshots) entry(id string, meta snapMeta) (*snapEntry, error) {
	if len(meta.Layers) == 0 || len(meta.Commit) < 12 {
		return nil, fmt.Errorf("snapshot %s: %s: no commit or layers", id, snapMetaName)
	}
	layers := make([]string, len(meta.Layers))
	for i, rel := range meta.Layers {
		if !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("snapshot %s: layer %q outside %s", id, rel, s.dir)
		}
		layers[i] = filepath.Join(s.dir, rel)
		if fi, err := os.Stat(layers[i]); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("snapshot %s: layer %s missing", id, rel)
		}
	}
	snap := &Snapshot{Commit: meta.Commit, ID: id, Layers: layers, Parent: meta.Parent,
		Created: meta.Created}
	return &snapEntry{snap: snap, meta: meta, used: meta.Created}, nil
}

// tempDir makes an empty temp dir in StateDir/s whose name carries our pid, so
// OpenSnapshots in another process can tell a crashed build from a running one.
// (rename(2) may replace an empty dir, so deletions rename the victim onto it.)
func (s *Snapshots) tempDir() (string, error) {
	return os.MkdirTemp(s.dir, snapTmpPrefix+strconv.Itoa(os.Getpid())+"-")
}

// snapTempOwnerAlive reports whether the process named in a temp dir may still use it.
func snapTempOwnerAlive(name string) bool {
	pid, _, _ := strings.Cut(strings.TrimPrefix(name, snapTmpPrefix), "-")
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	if n == os.Getpid() {
		return true // another Snapshots of this process may be building in it
	}
	return unix.Kill(n, 0) != unix.ESRCH
}

// snapUmask reads the process umask without changing it (unix.Umask would race with
// other goroutines creating files).
func snapUmask() int {
	data, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if m, err := strconv.ParseInt(strings.TrimSpace(v), 8, 32); err == nil {
					return int(m)
				}
			}
		}
	}
	return 0o022
}

// BuildFresh builds rev's snapshot in full, even where it could be derived, as a
// separate, unregistered snapshot the caller removes with RemoveFresh. It exists to
// measure derived builds against fresh ones side by side.
func (s *Snapshots) BuildFresh(rev string) (*Snapshot, error) {
	commit, err := s.repo.ResolveRev(rev)
	if err != nil {
		return nil, err
	}
	id := fmt.Sprintf("fresh-%d-%d", os.Getpid(), time.Now().UnixNano())
	meta, err := s.buildFresh(commit, id)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Commit: commit, ID: id, Layers: []string{filepath.Join(s.dir, meta.Layers[0])}, Created: meta.Created}, nil
}

// RemoveFresh removes a snapshot made by BuildFresh.
func (s *Snapshots) RemoveFresh(snap *Snapshot) error {
	if !strings.HasPrefix(snap.ID, "fresh-") {
		return fmt.Errorf("snapshot %s: not a BuildFresh snapshot", snap.ID)
	}
	return os.RemoveAll(filepath.Join(s.dir, snap.ID))
}
