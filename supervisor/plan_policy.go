package supervisor

import (
	"fmt"
	"os"
	"sync"
	"time"

	"corral/policies"
)

// planPolicyKeys are the keys of a [[policy]] table: `path` is a glob (intent glob
// syntax), `rule` one of merge, reject, escalate, union.
var planPolicyKeys = []string{"path", "rule"}

// decodePolicies reads the plan's [[policy]] tables in order (the first match wins,
// ahead of the defaults), each rule checked with its file and line.
func (d *planDecoder) decodePolicies() []policies.PathRule {
	v, ok := d.root["policy"]
	if !ok {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		d.problem("policy", "want [[policy]] tables, got %s", planDescribe(v))
		return nil
	}
	var rules []policies.PathRule
	for i, e := range list {
		field := fmt.Sprintf("policy[%d]", i)
		table, ok := e.(map[string]any)
		if !ok {
			d.problem(field, "want a table, got %s", planDescribe(e))
			continue
		}
		d.checkKeys(field, table, planPolicyKeys, map[string]string{"glob": "path", "action": "rule", "mode": "rule"})
		r := policies.PathRule{Source: fmt.Sprintf("%s:%d", d.file, d.line(field))}
		glob, okGlob := table["path"]
		if !okGlob {
			d.problem(field, "a [[policy]] needs path = \"GLOB\"")
		} else if s, ok := d.str(field+".path", glob); ok {
			if s == "" {
				d.problem(field+".path", "empty glob")
			}
			r.Glob = s
		}
		rule, okRule := table["rule"]
		if !okRule {
			d.problem(field, "a [[policy]] needs rule = merge, reject, escalate or union")
		} else if s, ok := d.str(field+".rule", rule); ok {
			a, err := policies.ParseAction(s)
			if err != nil {
				d.problem(field+".rule", "%v", err)
			}
			r.Action = a
		}
		if r.Glob != "" && r.Action != "" {
			rules = append(rules, r)
		}
	}
	return rules
}

// ParsePlanPolicies reads only the [[policy]] rules of a plan file, for the publisher
// of a running fleet and `corral policy explain`.
func ParsePlanPolicies(path string) ([]policies.PathRule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	d, syntax := newPlanDecoder(path, data)
	if syntax != nil {
		return nil, &PlanError{Problems: []Problem{*syntax}}
	}
	rules := d.decodePolicies()
	if err := d.err(); err != nil {
		return nil, err
	}
	return rules, nil
}

// planPolicyCache keeps each plan's rules until the file changes: a publish reads
// them, and re-parsing the plan per publish would cost more than the publish.
var planPolicyCache struct {
	sync.Mutex
	m map[string]cachedPolicy
}

type cachedPolicy struct {
	mod   time.Time
	rules []policies.PathRule
}

// planRules returns the path rules of the fleet's plan (none for a fleet without a
// plan, or whose plan is gone or broken: the defaults then apply).
func (s *Supervisor) planRules() []policies.PathRule {
	path := s.fleet.Plan
	if path == "" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	planPolicyCache.Lock()
	defer planPolicyCache.Unlock()
	if c, ok := planPolicyCache.m[path]; ok && c.mod.Equal(fi.ModTime()) {
		return c.rules
	}
	rules, err := ParsePlanPolicies(path)
	if err != nil {
		s.log.Warn("plan policies", "plan", path, "err", err)
		return nil
	}
	if planPolicyCache.m == nil {
		planPolicyCache.m = map[string]cachedPolicy{}
	}
	planPolicyCache.m[path] = cachedPolicy{mod: fi.ModTime(), rules: rules}
	return rules
}
