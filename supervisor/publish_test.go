package supervisor_test

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"corral/policies"
	"corral/supervisor"
)

const threeLines = "one\ntwo\nthree\nfour\nfive\nsix\n"

// TestPublishOutcomesAndConflictClasses runs every outcome and conflict class on a
// real repository: the head moved by theirs, then ours published from the base.
func TestPublishOutcomesAndConflictClasses(t *testing.T) {
	baseFiles := map[string]string{
		"text.txt": threeLines, "other.txt": "other\n", "bin.dat": "a\x00b", "link": "->text.txt",
		"CHANGELOG.md": "# changes\n- first\n", "go.sum": "a v1\n", "dir/file.txt": "in dir\n",
	}
	cases := []struct {
		name    string
		theirs  map[string]string // head moves first (nil: not at all)
		ours    map[string]string
		outcome string
		classes []string          // conflict classes, sorted
		want    map[string]string // head content afterwards
	}{
		{name: "accepted on untouched head", ours: map[string]string{"text.txt": "new\n", "added.txt": "added\n"},
			outcome: supervisor.OutcomeAccepted, want: map[string]string{"text.txt": "new\n", "added.txt": "added\n"}},
		{name: "accepted when head moved elsewhere", theirs: map[string]string{"other.txt": "moved\n"},
			ours: map[string]string{"text.txt": "new\n"}, outcome: supervisor.OutcomeAccepted,
			want: map[string]string{"text.txt": "new\n", "other.txt": "moved\n"}},
		{name: "accepted delete and mode change", ours: map[string]string{"other.txt": del, "dir/file.txt": "x:in dir\n"},
			outcome: supervisor.OutcomeAccepted, want: map[string]string{"other.txt": del, "dir/file.txt": "in dir\n"}},
		{name: "merged disjoint hunks", theirs: map[string]string{"text.txt": strings.Replace(threeLines, "one", "ONE", 1)},
			ours: map[string]string{"text.txt": strings.Replace(threeLines, "six", "SIX", 1)}, outcome: supervisor.OutcomeMerged,
			want: map[string]string{"text.txt": "ONE\ntwo\nthree\nfour\nfive\nSIX\n"}},
		{name: "empty changeset", ours: map[string]string{}, outcome: supervisor.OutcomeEmpty},
		{name: "empty when head has the same change", theirs: map[string]string{"text.txt": "same\n"},
			ours: map[string]string{"text.txt": "same\n"}, outcome: supervisor.OutcomeEmpty, want: map[string]string{"text.txt": "same\n"}},
		{name: "content", theirs: map[string]string{"text.txt": "theirs\n"}, ours: map[string]string{"text.txt": "ours\n", "clean.txt": "clean\n"},
			outcome: supervisor.OutcomeRejected, classes: []string{"content"}, want: map[string]string{"text.txt": "theirs\n", "clean.txt": del}},
		{name: "modify-delete", theirs: map[string]string{"text.txt": del}, ours: map[string]string{"text.txt": "ours\n"},
			outcome: supervisor.OutcomeRejected, classes: []string{"modify-delete"}, want: map[string]string{"text.txt": del}},
		{name: "delete-modify", theirs: map[string]string{"text.txt": "theirs\n"}, ours: map[string]string{"text.txt": del},
			outcome: supervisor.OutcomeRejected, classes: []string{"delete-modify"}, want: map[string]string{"text.txt": "theirs\n"}},
		{name: "add-add", theirs: map[string]string{"new.txt": "theirs\n"}, ours: map[string]string{"new.txt": "ours\n"},
			outcome: supervisor.OutcomeRejected, classes: []string{"add-add"}, want: map[string]string{"new.txt": "theirs\n"}},
		{name: "binary", theirs: map[string]string{"bin.dat": "t\x00t"}, ours: map[string]string{"bin.dat": "o\x00o"},
			outcome: supervisor.OutcomeRejected, classes: []string{"binary"}, want: map[string]string{"bin.dat": "t\x00t"}},
		{name: "type symlink vs file", theirs: map[string]string{"text.txt": "->other.txt"}, ours: map[string]string{"text.txt": "ours\n"},
			outcome: supervisor.OutcomeRejected, classes: []string{"type"}},
		{name: "type file vs dir", theirs: map[string]string{"new/inner.txt": "dir\n"}, ours: map[string]string{"new": "file\n"},
			outcome: supervisor.OutcomeRejected, classes: []string{"type"}, want: map[string]string{"new/inner.txt": "dir\n"}},
		{name: "type dir vs file", theirs: map[string]string{"new": "file\n"}, ours: map[string]string{"new/inner.txt": "dir\n"},
			outcome: supervisor.OutcomeRejected, classes: []string{"type"}, want: map[string]string{"new": "file\n"}},
		{name: "protected generated output", ours: map[string]string{"dist/app.js": "built\n", "text.txt": "x\n"},
			outcome: supervisor.OutcomeRejected, classes: []string{"protected"}, want: map[string]string{"dist/app.js": del, "text.txt": threeLines}},
		{name: "union changelog", theirs: map[string]string{"CHANGELOG.md": "# changes\n- first\n- theirs\n"},
			ours: map[string]string{"CHANGELOG.md": "# changes\n- first\n- ours\n", "src.go": "package x\n"}, outcome: supervisor.OutcomeMerged,
			want: map[string]string{"CHANGELOG.md": "# changes\n- first\n- ours\n- theirs\n", "src.go": "package x\n"}},
		{name: "escalated lockfile", theirs: map[string]string{"go.sum": "a v2\n"}, ours: map[string]string{"go.sum": "a v3\n", "src.go": "package x\n"},
			outcome: supervisor.OutcomeEscalated, want: map[string]string{"go.sum": "a v2\n", "src.go": del}},
		{name: "lockfile only ours changed", ours: map[string]string{"go.sum": "a v3\n"},
			outcome: supervisor.OutcomeAccepted, want: map[string]string{"go.sum": "a v3\n"}},
		{name: "refused .git", ours: map[string]string{".git/config": "evil\n"}, outcome: supervisor.OutcomeRejected, classes: []string{"protected"}},
		{name: "refused escaping symlink", ours: map[string]string{"esc": "->../../etc/passwd"}, outcome: supervisor.OutcomeRejected,
			classes: []string{"protected"}, want: map[string]string{"esc": del}},
		{name: "refused absolute symlink", ours: map[string]string{"esc": "->/etc/passwd"}, outcome: supervisor.OutcomeRejected, classes: []string{"protected"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newPubRepo(t, baseFiles)
			if tc.theirs != nil {
				r.moveHead(tc.theirs)
			}
			before := r.head()
			res, err := r.pub.Publish(r.request("ours", r.base, tc.ours))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.outcome {
				t.Fatalf("outcome %s (%s), want %s", res.Outcome, res.Message, tc.outcome)
			}
			var classes []string
			for _, c := range res.Conflicts {
				classes = append(classes, c.Class)
			}
			sort.Strings(classes)
			if !reflect.DeepEqual(classes, tc.classes) {
				t.Errorf("conflict classes %v, want %v (%s)", classes, tc.classes, res.Message)
			}
			moved := res.Outcome == supervisor.OutcomeAccepted || res.Outcome == supervisor.OutcomeMerged
			if after := r.head(); (after != before) != moved || (moved && after != res.NewHead) {
				t.Errorf("head %s→%s, new head %q, outcome %s", before, after, res.NewHead, res.Outcome)
			}
			for p, want := range tc.want {
				if strings.HasPrefix(want, "x:") {
					want = want[2:]
				}
				if got := r.show(p); got != want {
					t.Errorf("head %s = %q, want %q", p, got, want)
				}
			}
			if moved {
				trailers := run(t, r.dir, "git", "log", "-1", "--format=%(trailers:key=Corral-Outcome,valueonly)", "corral/head")
				if trailers != tc.outcome {
					t.Errorf("Corral-Outcome trailer %q, want %q", trailers, tc.outcome)
				}
			}
			// Objects corral wrote by hand must be what git would write.
			run(t, r.dir, "git", "fsck", "--strict", "--no-dangling", "--no-progress")
			for _, c := range res.Conflicts {
				if tc.theirs != nil && !strings.HasPrefix(tc.name, "refused") && tc.name != "protected generated output" && res.Moves[c.Path] == "" {
					t.Errorf("conflict on %s names no commit that moved it: %v", c.Path, res.Moves)
				}
			}
		})
	}
}

// TestPublishRefusesEnvFiles: a session's env-layer files are never published, even
// when a capture let one through.
func TestPublishRefusesEnvFiles(t *testing.T) {
	r := newPubRepo(t, map[string]string{"a.txt": "a\n"})
	req := r.request("env", r.base, map[string]string{".env": "SECRET=1\n", "a.txt": "b\n"})
	req.Task.EnvFiles = []string{".env"}
	res, err := r.pub.Publish(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != supervisor.OutcomeRejected || len(res.Refused) != 1 || !strings.Contains(res.Message, "env-layer") {
		t.Fatalf("got %+v", res)
	}
	if r.head() != r.base {
		t.Error("head moved")
	}
}

// TestPublishPlanRulesOverrideDefaults: a plan's rules go before the defaults, so a
// fleet can let go.sum merge and protect a path of its own.
func TestPublishPlanRulesOverrideDefaults(t *testing.T) {
	r := newPubRepo(t, map[string]string{"go.sum": goSum, "secrets/key": "k\n"})
	r.moveHead(map[string]string{"go.sum": strings.Replace(goSum, "a v1.0.0", "a v1.1.0", 1)})
	req := r.request("ours", r.base, map[string]string{"go.sum": strings.Replace(goSum, "z v1.0.0", "z v2.0.0", 1)})
	req.Rules = []policies.PathRule{{Glob: "go.sum", Action: policies.ActionMerge}, {Glob: "secrets/**", Action: policies.ActionReject}}
	res, err := r.pub.Publish(req)
	if err != nil || res.Outcome != supervisor.OutcomeMerged {
		t.Fatalf("go.sum under a merge rule: %v %s %s", err, res.Outcome, res.Message)
	}
	req = r.request("ours", r.head(), map[string]string{"secrets/key": "leak\n"})
	req.Rules = []policies.PathRule{{Glob: "secrets/**", Action: policies.ActionReject}}
	if res, _ := r.pub.Publish(req); res.Outcome != supervisor.OutcomeRejected || res.Conflicts[0].Class != "protected" {
		t.Fatalf("secrets under a reject rule: %s %+v", res.Outcome, res.Conflicts)
	}
}

// TestPublishApprovalRechecksAtCurrentHead: an escalated publish keeps its work as a
// pending commit; approved later it is published against the head as it is then —
// landing when that is clean, rejected when the head meanwhile clashed with it.
func TestPublishApprovalRechecksAtCurrentHead(t *testing.T) {
	for _, tc := range []struct {
		name      string
		meanwhile map[string]string
		outcome   string
	}{
		{"clean at the new head", map[string]string{"other.txt": "moved on\n"}, supervisor.OutcomeMerged},
		{"clash at the new head", map[string]string{"go.sum": strings.Replace(goSum, "example.com/z v1.0.0", "example.com/z v9.0.0", 1)}, supervisor.OutcomeRejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPubRepo(t, map[string]string{"go.sum": goSum, "other.txt": "other\n"})
			r.moveHead(map[string]string{"go.sum": strings.Replace(goSum, "example.com/a v1.0.0", "example.com/a v1.1.0", 1)})
			req := r.request("ours", r.base, map[string]string{"go.sum": strings.Replace(goSum, "example.com/z v1.0.0", "example.com/z v2.0.0", 1)})
			res, err := r.pub.Publish(req)
			if err != nil || res.Outcome != supervisor.OutcomeEscalated || res.Pending == "" {
				t.Fatalf("first publish: %v %s %q", err, res.Outcome, res.Pending)
			}
			// The head moves on while the publish waits (a human-set rule lets it).
			r.pub.Policy = policies.NewPathPolicy([]policies.PathRule{{Glob: "go.sum", Action: policies.ActionMerge}})
			r.moveHead(tc.meanwhile)
			r.pub.Policy = policies.PathPolicy{}
			before := r.head()
			res, err = r.pub.Publish(supervisor.PublishRequest{Task: req.Task, Session: req.Session, Pending: res.Pending, Approved: true})
			if err != nil || res.Outcome != tc.outcome {
				t.Fatalf("approved publish: %v %s %s", err, res.Outcome, res.Message)
			}
			if tc.outcome == supervisor.OutcomeMerged && !strings.Contains(r.show("go.sum"), "example.com/z v2.0.0") {
				t.Errorf("approved change missing:\n%s", r.show("go.sum"))
			}
			if tc.outcome == supervisor.OutcomeRejected && r.head() != before {
				t.Error("rejected approval moved the head")
			}
		})
	}
}
