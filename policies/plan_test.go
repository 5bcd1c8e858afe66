package policies

import (
	"reflect"
	"strings"
	"testing"
)

func TestPlanValidTaskID(t *testing.T) {
	for _, id := range []string{"pricing", "checkout-tax", "v1.2_fix", "9lives"} {
		if err := ValidTaskID(id); err != nil {
			t.Errorf("ValidTaskID(%q) = %v, want nil", id, err)
		}
	}
	for _, id := range []string{"", "Pricing", "-x", ".x", "a b", "a/b", strings.Repeat("a", MaxTaskID+1)} {
		if err := ValidTaskID(id); err == nil {
			t.Errorf("ValidTaskID(%q) = nil, want an error", id)
		}
	}
}

func TestPlanSuggest(t *testing.T) {
	known := []string{"id", "prompt", "agent", "max_running", "main", "memory", "ports"}
	for word, want := range map[string]string{
		"promt":      "prompt",
		"max_runing": "max_running",
		"mian":       "main", // a swap is one edit
		"port":       "ports",
		"Agent":      "agent",
		"ab":         "", // too short for two edits to be a typo
		"dependency": "",
	} {
		if got := Suggest(word, known); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", word, got, want)
		}
	}
}

func TestPlanFindCycles(t *testing.T) {
	nodes := []string{"a", "b", "c", "d", "e"}
	after := map[string][]string{
		"b": {"a", "c"},
		"c": {"b"},       // b -> c -> b
		"d": {"d"},       // d -> d
		"a": {"missing"}, // edges to unknown nodes are someone else's problem
		"e": {"b", "c"},  // depends on a cycle but is not in one
	}
	got := FindCycles(nodes, after)
	want := [][]string{{"b", "c", "b"}, {"d", "d"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FindCycles = %v, want %v", got, want)
	}
	if got := FindCycles([]string{"x", "y"}, map[string][]string{"y": {"x"}}); len(got) != 0 {
		t.Errorf("acyclic: FindCycles = %v", got)
	}
}

func TestPlanValidIntent(t *testing.T) {
	for _, g := range []string{"pricing/**", "**/*.go", "docs/[a-z]*.md", "CHANGELOG.md", "/web/**"} {
		if err := ValidIntent(g); err != nil {
			t.Errorf("ValidIntent(%q) = %v", g, err)
		}
	}
	for _, g := range []string{"", "  ", "../x/**", "a/../../b", "web/[a-", "x\\"} {
		if err := ValidIntent(g); err == nil {
			t.Errorf("ValidIntent(%q) = nil, want an error", g)
		}
	}
}
