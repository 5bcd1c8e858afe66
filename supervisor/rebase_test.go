package supervisor_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"corral/sandbox"
	"corral/supervisor"
)

// TestRebaseEngine moves one changeset of every kind onto a head that moved: clean
// paths carry over, text both sides changed merges (or gets conflict markers), other
// clashes keep the session's side, and all clashes are listed — while the head stays.
func TestRebaseEngine(t *testing.T) {
	r := newPubRepo(t, map[string]string{
		"a.txt":        "1\n2\n3\n4\n5\n",
		"b.txt":        "x\n",
		"c.txt":        "keep\n",
		"d.txt":        "modified by the session, deleted by the head\n",
		"e.txt":        "e\n",
		"f.txt":        "deleted by the session, modified by the head\n",
		"img.bin":      "\x00base",
		"CHANGELOG.md": "- one\n",
		"untouched.md": "u\n",
	})
	base := r.base
	head := r.moveHead(map[string]string{
		"a.txt":        "1\n2\n3\n4\n5 head\n",
		"b.txt":        "x head\n",
		"d.txt":        del,
		"e.txt":        "e2\n",
		"f.txt":        "f head\n",
		"img.bin":      "\x00head",
		"new.txt":      "added by the head\n",
		"CHANGELOG.md": "- one\n- head\n",
		"untouched.md": "u head\n",
	})
	req := r.request("live", base, map[string]string{
		"a.txt":        "1 ours\n2\n3\n4\n5\n",
		"b.txt":        "x ours\n",
		"c.txt":        "keep mine\n",
		"d.txt":        "modified\n",
		"e.txt":        "e2\n",
		"f.txt":        del,
		"img.bin":      "\x00ours",
		"new.txt":      "added by the session\n",
		"CHANGELOG.md": "- one\n- ours\n",
	})
	res, err := r.pub.Rebase(supervisor.RebaseRequest{Session: req.Session, Changes: req.Changes})
	if err != nil {
		t.Fatal(err)
	}
	if res.Head != head || r.head() != head {
		t.Fatalf("rebase head %.12s, branch %.12s, want both %.12s", res.Head, r.head(), head)
	}
	if got := strings.Join(res.Moved, " "); got != "c.txt" {
		t.Errorf("moved %q, want c.txt", got)
	}
	sort.Strings(res.Merged)
	if got := strings.Join(res.Merged, " "); got != "CHANGELOG.md a.txt" {
		t.Errorf("merged %q, want CHANGELOG.md a.txt", got)
	}
	classes := map[string]string{}
	for _, c := range res.Conflicts {
		classes[c.Path] = c.Class
		if res.Moves[c.Path] != head {
			t.Errorf("conflict %s: moved by %.12s, want the head commit", c.Path, res.Moves[c.Path])
		}
	}
	want := map[string]string{
		"b.txt": supervisor.ConflictContent, "d.txt": supervisor.ConflictModifyDelete,
		"f.txt": supervisor.ConflictDeleteModify, "img.bin": supervisor.ConflictBinary,
		"new.txt": supervisor.ConflictAddAdd,
	}
	if len(classes) != len(want) {
		t.Errorf("conflicts %v, want %v", classes, want)
	}
	for p, c := range want {
		if classes[p] != c {
			t.Errorf("conflict on %s: %q, want %q", p, classes[p], c)
		}
	}
	layer := map[string]sandbox.LayerEntry{}
	for _, e := range res.Layer {
		layer[e.Path] = e
	}
	// e.txt: both made the same change; untouched.md: only the head changed it.
	for _, p := range []string{"e.txt", "untouched.md"} {
		if _, ok := layer[p]; ok {
			t.Errorf("layer carries %s, which the head already has", p)
		}
	}
	checks := map[string]func(sandbox.LayerEntry) bool{
		"a.txt":        func(e sandbox.LayerEntry) bool { return string(e.Data) == "1 ours\n2\n3\n4\n5 head\n" },
		"c.txt":        func(e sandbox.LayerEntry) bool { return string(e.Data) == "keep mine\n" },
		"CHANGELOG.md": func(e sandbox.LayerEntry) bool { return string(e.Data) == "- one\n- ours\n- head\n" },
		"b.txt": func(e sandbox.LayerEntry) bool {
			s := string(e.Data)
			return strings.Contains(s, "<<<<<<< session "+req.Session.ID) && strings.Contains(s, "x ours") &&
				strings.Contains(s, "x head") && strings.Contains(s, ">>>>>>> head "+head[:12])
		},
		"new.txt": func(e sandbox.LayerEntry) bool {
			return strings.Contains(string(e.Data), "<<<<<<<") && strings.Contains(string(e.Data), "added by the head")
		},
		"d.txt":   func(e sandbox.LayerEntry) bool { return string(e.Data) == "modified\n" },
		"f.txt":   func(e sandbox.LayerEntry) bool { return e.Deleted },
		"img.bin": func(e sandbox.LayerEntry) bool { return string(e.Data) == "\x00ours" },
	}
	for p, ok := range checks {
		e, found := layer[p]
		if !found || !ok(e) {
			t.Errorf("layer %s = %+v (found %v)", p, e, found)
		}
	}
}

// TestRebaseLiveSessions rebases a persistent session and a paused one-shot session
// onto a head another task moved: each continues as a new session at the head, with
// its clean edits, a merged file, conflict markers where it clashed (listed in the
// event and at $CORRAL_CONFLICT), its gitignored files, and the head's own changes.
func TestRebaseLiveSessions(t *testing.T) {
	f := newFixture(t)
	f.addFiles(map[string]string{
		"pricing/shipping.go": shippingGo, "docs/notes.md": "notes\n", ".gitignore": "build/\n",
		"lib/a.txt": "1\n2\n3\n4\n5\n",
	})
	sv := f.supervisor(supervisor.Admission{MaxRunning: 3})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sv.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// First run: edit and build; a rerun (after a rebase) only records what it was
	// told about conflicts and that it ran (last: the test waits for that line).
	agent := `mkdir -p build; if [ ! -f build/runs ]; then
	sed -i 's/^1$/1 live/' lib/a.txt; sed -i 's/= 50/= 70/' pricing/shipping.go; echo mine > new-$CORRAL_TASK.txt
	echo obj > build/cache.o; fi
	[ -n "$CORRAL_CONFLICT" ] && cp "$CORRAL_CONFLICT" build/conflict.json
	echo "run base=$CORRAL_BASE conflict=$CORRAL_CONFLICT" >> build/runs; sleep 60`
	live := supervisor.Task{ID: "live", Prompt: "serve", Lifetime: supervisor.Persistent, Agent: agent}
	slow := supervisor.Task{ID: "slow", Prompt: "slow", Lifetime: supervisor.OneShot,
		Agent: "echo slow > slow.txt; mkdir -p build; echo run >> build/runs; sleep 60"}
	if err := sv.AddTasks(live, slow); err != nil {
		t.Fatal(err)
	}
	layerOf := func(task string) string {
		for _, s := range sv.State().Sessions {
			if s.Task == task {
				return s.Layer
			}
		}
		return ""
	}
	for _, task := range []string{"live", "slow"} {
		waitFor(t, task+"'s first run", func() bool { return fileExists(filepath.Join(layerOf(task), "build", "runs")) })
	}
	base := sv.State().Fleet.Head

	if _, err := sv.Rebase("live"); !errors.Is(err, supervisor.ErrNotApplicable) {
		t.Errorf("rebase onto the head it is on: %v, want not applicable", err)
	}
	other := supervisor.Task{ID: "other", Prompt: "other", Lifetime: supervisor.OneShot,
		Agent: `sed -i 's/^5$/5 other/' lib/a.txt; sed -i 's/= 50/= 60/' pricing/shipping.go; echo "by other" >> docs/notes.md`}
	if err := sv.AddTasks(other); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "other to land", func() bool {
		for _, tk := range sv.State().Tasks {
			if tk.ID == "other" {
				return tk.State == supervisor.TaskDone
			}
		}
		return false
	})
	head := sv.State().Fleet.Head
	if head == base {
		t.Fatal("the head did not move")
	}

	res, err := sv.Rebase("live")
	if err != nil {
		t.Fatal(err)
	}
	if res.Head != head || len(res.Conflicts) != 1 || res.Conflicts[0].Path != "pricing/shipping.go" {
		t.Fatalf("rebase result head %.12s conflicts %+v, want one on pricing/shipping.go at %.12s", res.Head, res.Conflicts, head)
	}
	st := sv.State()
	var ns supervisor.Session
	for _, s := range st.Sessions {
		if s.Task == "live" {
			ns = s
		}
	}
	if ns.ID != "live-1r1" || ns.Base != head || ns.Resumes != "live-1" || ns.State != supervisor.SessionRunning {
		t.Fatalf("live continues as %+v, want live-1r1 running at %.12s after live-1", ns, head)
	}
	waitFor(t, "the rerun", func() bool {
		b, _ := os.ReadFile(filepath.Join(ns.Layer, "build", "runs"))
		return strings.Count(string(b), "run ") == 2
	})
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(ns.Layer, p))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	if got := read("lib/a.txt"); got != "1 live\n2\n3\n4\n5 other\n" {
		t.Errorf("lib/a.txt after rebase = %q, want both edits merged", got)
	}
	if got := read("pricing/shipping.go"); !strings.Contains(got, "<<<<<<< session live-1") || !strings.Contains(got, "= 70") || !strings.Contains(got, "= 60") {
		t.Errorf("shipping.go lacks conflict markers with both sides:\n%s", got)
	}
	if got := read("new-live.txt"); got != "mine\n" {
		t.Errorf("new-live.txt = %q", got)
	}
	if got := read("build/cache.o"); got != "obj\n" {
		t.Errorf("gitignored build/cache.o did not come along: %q", got)
	}
	if fileExists(filepath.Join(ns.Layer, "docs", "notes.md")) {
		t.Errorf("the new layer shadows docs/notes.md, which only the head changed")
	}
	if runs := read("build/runs"); !strings.Contains(runs, "base="+head) || !strings.Contains(runs, "conflict=/") {
		t.Errorf("rerun did not see the new base and $CORRAL_CONFLICT:\n%s", runs)
	}
	if got := read("build/conflict.json"); !strings.Contains(got, `"path": "pricing/shipping.go"`) || !strings.Contains(got, "rebased onto") {
		t.Errorf("conflict report for the agent:\n%s", got)
	}
	var old supervisor.Session
	var rebased *supervisor.Event
	f.store.View(func(r supervisor.Reader) error {
		old, _ = r.Session("live-1")
		return nil
	})
	for _, e := range f.events() {
		if e.Kind == supervisor.EvSessionRebased && e.Session == "live-1r1" {
			rebased = &e
		}
	}
	if old.State != supervisor.SessionRebased {
		t.Errorf("old session state %q, want rebased", old.State)
	}
	if fileExists(old.Layer) {
		t.Errorf("old layer %s left behind", old.Layer)
	}
	if rebased == nil || !strings.Contains(string(rebased.Data), `"class":"content"`) || !strings.Contains(string(rebased.Data), `"previous":"live-1"`) {
		t.Errorf("session.rebased event: %+v", rebased)
	}

	// A running one-shot session reaches the head by publishing; paused, it rebases
	// and stays paused.
	if _, err := sv.Rebase("slow"); !errors.Is(err, supervisor.ErrNotApplicable) {
		t.Errorf("rebase of a running one-shot session: %v, want not applicable", err)
	}
	if err := sv.Pause("slow"); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Rebase("slow"); err != nil {
		t.Fatal(err)
	}
	for _, s := range sv.State().Sessions {
		if s.Task == "slow" && (s.ID != "slow-1r1" || s.State != supervisor.SessionPaused || s.Base != head) {
			t.Errorf("slow after rebase: %+v, want slow-1r1 paused at the head", s)
		}
		if s.Task == "slow" && read2(s.Layer, "slow.txt") != "slow\n" {
			t.Errorf("slow.txt lost in the rebase")
		}
	}
	for _, task := range []string{"live", "slow"} {
		if err := sv.Discard(task); err != nil {
			t.Error(err)
		}
	}
}

func read2(dir, p string) string {
	b, _ := os.ReadFile(filepath.Join(dir, p))
	return string(b)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return p != "" && err == nil
}
