package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"corral/supervisor"
)

// planCmdRepo makes a git repository on main holding the files shop.toml's intents
// name, with a gitignored .env, and copies the named example plan to its root.
func planCmdRepo(t *testing.T, plan string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"pricing/shipping.go": "package pricing\n", "checkout/summary.go": "package checkout\n",
		"web/templates/checkout.html": "<p>total</p>\n", "docs/pricing.md": "# Pricing\n",
		"load/README.md": "load\n", "CHANGELOG.md": "# Changes\n", ".gitignore": ".env\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"}, {"add", "-A"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "shop"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	data, err := os.ReadFile(filepath.Join("testdata", "plans", plan))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("K=v\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, plan)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPlanCheckOK(t *testing.T) {
	path := planCmdRepo(t, "shop.toml")
	var stdout, stderr bytes.Buffer
	if err := runPlan([]string{"check", path}, &stdout, &stderr); err != nil {
		t.Fatalf("plan check: %v\n%s", err, stderr.String())
	}
	want := regexp.MustCompile("^" + regexp.QuoteMeta(path+": ok — 5 tasks (fleet shop, base main ") +
		"[0-9a-f]{7}" + regexp.QuoteMeta(", head corral/head)") + "\n$")
	if !want.MatchString(stdout.String()) {
		t.Errorf("stdout = %q, want %v", stdout.String(), want)
	}
}

func TestPlanCheckProblems(t *testing.T) {
	path := planCmdRepo(t, "broken-values.toml")
	var stdout, stderr bytes.Buffer
	err := runPlan([]string{"check", path}, &stdout, &stderr)
	var ue usageError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v (%T), want bad input (exit 2)", err, err)
	}
	if !strings.Contains(err.Error(), "17 problems") {
		t.Errorf("err = %q, want the count", err)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 17 || lines[1] != path+":7: fleet.max_running: 0: want at least 1 session at once" {
		t.Errorf("stderr = %d lines:\n%s", len(lines), stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
}

func TestPlanShow(t *testing.T) {
	path := planCmdRepo(t, "shop.toml")
	var stdout, stderr bytes.Buffer
	if err := runPlan([]string{"show", path}, &stdout, &stderr); err != nil {
		t.Fatalf("plan show: %v\n%s", err, stderr.String())
	}
	var p supervisor.Plan
	if err := json.Unmarshal(stdout.Bytes(), &p); err != nil {
		t.Fatalf("plan show is not JSON: %v\n%s", err, stdout.String())
	}
	if p.Fleet.Name != "shop" || len(p.Tasks) != 5 || p.Tasks[0].Memory != 2<<30 {
		t.Errorf("plan show = %+v, want the shop fleet with defaults applied", p)
	}
}

func TestPlanUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"lint", "x.toml"}, {"check"}, {"check", "a", "b"}, {"check", "no-such-plan.toml"}} {
		var stdout, stderr bytes.Buffer
		err := runPlan(args, &stdout, &stderr)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("plan %v: err = %v, want bad input", args, err)
		}
	}
}
