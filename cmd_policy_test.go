package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPolicyExplain(t *testing.T) {
	code, out, errOut := runMain("policy", "explain", "go.sum", "src/main.go", "CHANGELOG.md", "dist/app.js", "--repo", t.TempDir())
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"go.sum: escalate", "src/main.go: merge (no rule matches", "CHANGELOG.md: union", "dist/app.js: reject"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	plan := filepath.Join(t.TempDir(), "plan.toml")
	os.WriteFile(plan, []byte("[[policy]]\npath = \"go.sum\"\nrule = \"merge\"\n"), 0o644)
	code, out, _ = runMain("policy", "explain", "--plan", plan, "go.sum")
	if code != exitOK || !strings.Contains(out, "go.sum: merge (rule path=\"go.sum\" from "+plan+":1)") {
		t.Errorf("plan rule not used: exit %d\n%s", code, out)
	}
	os.WriteFile(plan, []byte("[[policy]]\npath = \"go.sum\"\nrule = \"ours\"\n"), 0o644)
	code, _, errOut = runMain("policy", "explain", "--plan", plan, "go.sum")
	if code != exitBadInput || !strings.Contains(errOut, "plan.toml:3") {
		t.Errorf("bad rule: exit %d, stderr %q", code, errOut)
	}
	if code, _, _ := runMain("policy", "explain"); code != exitBadInput {
		t.Errorf("no path: exit %d", code)
	}
}

func TestApproveDenyBadInput(t *testing.T) {
	for _, args := range [][]string{{"approve"}, {"approve", "x"}, {"deny", "3"}, {"approve", "1", "--repo", t.TempDir()}} {
		if code, _, errOut := runMain(args...); code != exitBadInput {
			t.Errorf("%v: exit %d (%s), want %d", args, code, errOut, exitBadInput)
		}
	}
}
