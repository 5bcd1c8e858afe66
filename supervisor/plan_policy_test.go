package supervisor_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"corral/policies"
	"corral/supervisor"
)

// TestPlanPolicies: [[policy]] tables become path rules in order, and a bad rule is
// reported with its file, line and field like every other plan problem.
func TestPlanPolicies(t *testing.T) {
	repo := newPlanRepo(t, planShopFiles)
	good := `[fleet]
repo = "."

[[task]]
id = "a"
prompt = "p"
agent = "true"

[[policy]]
path = "go.sum"
rule = "merge"

[[policy]]
path = "secrets/**"
rule = "reject"
`
	plan, err := supervisor.ParsePlanBytes(filepath.Join(repo, "plan.toml"), []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Policies) != 2 || plan.Policies[0].Action != policies.ActionMerge || plan.Policies[1].Glob != "secrets/**" {
		t.Fatalf("policies %+v", plan.Policies)
	}
	if !strings.HasSuffix(plan.Policies[1].Source, "plan.toml:13") {
		t.Errorf("source %q, want plan.toml:13", plan.Policies[1].Source)
	}
	bad := strings.Replace(good, `rule = "reject"`, `rule = "theirs"`, 1) + "\n[[policy]]\nrule = \"union\"\n"
	_, err = supervisor.ParsePlanBytes(filepath.Join(repo, "plan.toml"), []byte(bad))
	var pe *supervisor.PlanError
	if !errors.As(err, &pe) || len(pe.Problems) != 2 {
		t.Fatalf("want two problems, got %v", err)
	}
	if p := pe.Problems[0]; p.Line != 15 || p.Field != "policy[1].rule" || !strings.Contains(p.Msg, `unknown path rule "theirs"`) {
		t.Errorf("problem %s", p)
	}
	if p := pe.Problems[1]; p.Field != "policy[2]" || !strings.Contains(p.Msg, "needs path") {
		t.Errorf("problem %s", p)
	}
	os.WriteFile(filepath.Join(repo, "plan.toml"), []byte(good), 0o644)
	rules, err := supervisor.ParsePlanPolicies(filepath.Join(repo, "plan.toml"))
	if err != nil || len(rules) != 2 {
		t.Fatalf("ParsePlanPolicies: %v %+v", err, rules)
	}
}
