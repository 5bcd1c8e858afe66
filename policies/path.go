package policies

import (
	"fmt"
	"strings"
)

// PathAction says how a changed path integrates onto the shared head when both the
// session and the head changed it since the session's base.
type PathAction string

// Path actions. Merge is the default for text.
const (
	// ActionMerge three-way merges a text file both sides changed; a clash is a conflict.
	ActionMerge PathAction = "merge"
	// ActionReject refuses any change to the path: the publish is rejected whole.
	ActionReject PathAction = "reject"
	// ActionEscalate holds the whole publish for a human when both sides changed the path.
	ActionEscalate PathAction = "escalate"
	// ActionUnion keeps both sides' lines (changelogs), so a collision there does not
	// drop clean changes elsewhere.
	ActionUnion PathAction = "union"
)

// ParseAction checks a rule name from a plan.
func ParseAction(s string) (PathAction, error) {
	switch a := PathAction(s); a {
	case ActionMerge, ActionReject, ActionEscalate, ActionUnion:
		return a, nil
	}
	return "", fmt.Errorf("unknown path rule %q (want merge, reject, escalate or union)", s)
}

// PathRule maps a glob (MatchGlob syntax) to an action.
type PathRule struct {
	Glob   string     `json:"path"`
	Action PathAction `json:"rule"`
	Source string     `json:"source,omitempty"` // where it was declared: "plan.toml:12" or "default"
}

// DefaultPathRules are the rules every fleet starts with; a plan's rules go before
// them, so the first match wins and users can override any default.
//
// Lockfiles are generated from manifests by a tool: a line merge can produce a file no
// tool would write, so a human looks. Generated output must come from its generator,
// not from an agent's hand edit racing another. Changelogs are append-mostly, so a
// line union is what a person would do.
func DefaultPathRules() []PathRule {
	var rules []PathRule
	add := func(a PathAction, globs ...string) {
		for _, g := range globs {
			rules = append(rules, PathRule{Glob: g, Action: a, Source: "default"})
		}
	}
	add(ActionEscalate, "go.sum", "go.mod", "package-lock.json", "yarn.lock", "pnpm-lock.yaml",
		"Cargo.lock", "Gemfile.lock", "poetry.lock", "composer.lock", "Pipfile.lock", "uv.lock")
	add(ActionUnion, "CHANGELOG*", "CHANGES*")
	add(ActionReject, "dist/**", "**/dist/**", "*.pb.go", "*_pb2.py", "*.min.js", "*.min.css")
	return rules
}

// PathPolicy is an ordered rule list: the first match wins, and a path no rule matches
// merges.
type PathPolicy struct {
	Rules []PathRule
}

// NewPathPolicy puts the plan's rules ahead of the defaults.
func NewPathPolicy(plan []PathRule) PathPolicy {
	return PathPolicy{Rules: append(append([]PathRule(nil), plan...), DefaultPathRules()...)}
}

// Lookup returns the rule that governs path; ok is false when none matched and the
// default (merge) applies.
func (p PathPolicy) Lookup(path string) (PathRule, bool) {
	for _, r := range p.Rules {
		if MatchGlob(r.Glob, path) {
			return r, true
		}
	}
	return PathRule{Glob: "*", Action: ActionMerge, Source: "fallback"}, false
}

// Action returns how path integrates.
func (p PathPolicy) Action(path string) PathAction {
	r, _ := p.Lookup(path)
	return r.Action
}

// Explain says in one line which rule applies to path and what it does.
func (p PathPolicy) Explain(path string) string {
	r, ok := p.Lookup(path)
	what := map[PathAction]string{
		ActionMerge:    "three-way merge when both sides changed it; binary or clashing edits reject the publish",
		ActionReject:   "any change to it rejects the whole publish (protected)",
		ActionEscalate: "when both sides changed it, the publish waits for a human (corral approve/deny)",
		ActionUnion:    "when both sides changed it, keep both sides' lines (line union)",
	}[r.Action]
	if !ok {
		return fmt.Sprintf("%s: merge (no rule matches; the fallback) — %s", path, what)
	}
	return fmt.Sprintf("%s: %s (rule path=%q from %s) — %s", path, r.Action, r.Glob, r.Source, what)
}

// String lists the rules, one a line, in the order they are tried.
func (p PathPolicy) String() string {
	var b strings.Builder
	for _, r := range p.Rules {
		fmt.Fprintf(&b, "%-9s %-22s %s\n", r.Action, r.Glob, r.Source)
	}
	return b.String()
}
