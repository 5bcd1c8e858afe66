package main

import (
	"fmt"
	"io"

	"corral/policies"
	"corral/supervisor"
)

// runPolicy is `corral policy explain PATH…`: which path rule integrates each path and
// what it does. Rules come from --plan, else from the most recent fleet's plan in
// --repo, else the defaults alone.
func runPolicy(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "explain" && args[0] != "list") {
		return badInput("want: policy explain PATH… [--plan PLAN] | policy list [--plan PLAN]")
	}
	fs := newFlags("policy "+args[0], stderr)
	planPath := fs.String("plan", "", "plan file whose [[policy]] rules go before the defaults")
	repoDir := fs.String("repo", ".", "the git repository (to find its fleet's plan)")
	fleet := fs.String("fleet", "", "fleet name (default: the most recent)")
	if err := parseFlags(fs, reorderValueFlags(args[1:], "plan", "repo", "fleet")); err != nil {
		return err
	}
	if args[0] == "explain" && fs.NArg() == 0 {
		return badInput("policy explain: want one or more repository paths")
	}
	rules, from, err := policyRules(*planPath, *repoDir, *fleet)
	if err != nil {
		return err
	}
	pol := policies.NewPathPolicy(rules)
	if args[0] == "list" {
		fmt.Fprintf(stdout, "# rules from %s, first match wins; unmatched paths merge\n%s", from, pol)
		return nil
	}
	for _, p := range fs.Args() {
		fmt.Fprintln(stdout, pol.Explain(p))
	}
	return nil
}

// policyRules finds the plan rules that apply, and says where they came from.
func policyRules(planPath, repoDir, fleet string) ([]policies.PathRule, string, error) {
	if planPath != "" {
		rules, err := supervisor.ParsePlanPolicies(planPath)
		if err != nil {
			return nil, "", badInput("%v", err)
		}
		return rules, planPath + " and the defaults", nil
	}
	_, db, err := openFleetDB(repoDir, fleet)
	if err != nil {
		return nil, "the defaults", nil // no fleet yet: the defaults are what would apply
	}
	defer db.Close()
	var f supervisor.Fleet
	if err := db.View(func(r supervisor.Reader) error {
		f, err = r.Fleet()
		return err
	}); err != nil || f.Plan == "" {
		return nil, "the defaults", nil
	}
	rules, err := supervisor.ParsePlanPolicies(f.Plan)
	if err != nil {
		return nil, "", fmt.Errorf("fleet %s: %w", f.Name, err)
	}
	return rules, f.Plan + " and the defaults", nil
}
