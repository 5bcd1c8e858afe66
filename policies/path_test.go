package policies

import (
	"strings"
	"testing"
)

// TestDefaultPathRules: every default rule, and that a plan rule placed first wins.
func TestDefaultPathRules(t *testing.T) {
	def := NewPathPolicy(nil)
	cases := []struct {
		path string
		want PathAction
	}{
		{"go.sum", ActionEscalate}, {"sub/go.sum", ActionEscalate}, {"web/package-lock.json", ActionEscalate},
		{"Cargo.lock", ActionEscalate}, {"yarn.lock", ActionEscalate}, {"go.mod", ActionEscalate},
		{"CHANGELOG.md", ActionUnion}, {"docs/CHANGES", ActionUnion},
		{"dist/app.js", ActionReject}, {"web/dist/app.js", ActionReject}, {"api/v1/api.pb.go", ActionReject}, {"ui/app.min.js", ActionReject},
		{"main.go", ActionMerge}, {"README.md", ActionMerge}, {"distribution/x.go", ActionMerge},
	}
	for _, tc := range cases {
		if got := def.Action(tc.path); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.path, got, tc.want)
		}
	}
	over := NewPathPolicy([]PathRule{{Glob: "go.sum", Action: ActionMerge, Source: "plan.toml:3"}, {Glob: "secrets/**", Action: ActionReject, Source: "plan.toml:6"}})
	if got := over.Action("go.sum"); got != ActionMerge {
		t.Errorf("plan rule did not override the default: %s", got)
	}
	if got := over.Action("secrets/key.pem"); got != ActionReject {
		t.Errorf("secrets/key.pem: %s", got)
	}
}

func TestExplainNamesTheRule(t *testing.T) {
	p := NewPathPolicy([]PathRule{{Glob: "docs/**", Action: ActionUnion, Source: "plan.toml:9"}})
	for path, want := range map[string]string{
		"docs/a.md":    `union (rule path="docs/**" from plan.toml:9)`,
		"go.sum":       `escalate (rule path="go.sum" from default)`,
		"src/main.go":  "merge (no rule matches; the fallback)",
		"CHANGELOG.md": `union (rule path="CHANGELOG*" from default)`,
	} {
		if got := p.Explain(path); !strings.Contains(got, want) {
			t.Errorf("Explain(%s) = %q, want it to contain %q", path, got, want)
		}
	}
}

func TestParseAction(t *testing.T) {
	for _, ok := range []string{"merge", "reject", "escalate", "union"} {
		if _, err := ParseAction(ok); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParseAction("ours"); err == nil || !strings.Contains(err.Error(), "want merge, reject, escalate or union") {
		t.Errorf("ParseAction(ours): %v", err)
	}
}
