package supervisor_test

import (
	"testing"
	"time"

	"corral/policies"
)

func TestPlanGateway(t *testing.T) {
	t.Setenv("CORRAL_TEST_ANTHROPIC_KEY", "sk-test")
	repo := newPlanRepo(t, planShopFiles)
	p, err := parseExample(t, "gateway.toml", repo)
	if err != nil {
		t.Fatal(err)
	}
	g := p.Gateway
	if g == nil || len(g.Upstreams) != 2 || g.Upstreams[0].Kind != "anthropic" || g.Upstreams[0].KeyEnv != "CORRAL_TEST_ANTHROPIC_KEY" ||
		g.Upstreams[1].URL != "https://api.openai.com" {
		t.Fatalf("gateway %+v", g)
	}
	if len(g.Allow) != 2 || g.Prices["claude-sonnet-4-5"] != (policies.Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}) {
		t.Errorf("allow %v prices %v", g.Allow, g.Prices)
	}
	want := policies.Quota{Metric: "tokens", Limit: 2e6, Window: 5 * time.Hour, Soft: 0.8, Hard: 0.95}
	if g.Quota == nil || *g.Quota != want {
		t.Errorf("quota %+v, want %+v", g.Quota, want)
	}
	task := planTask(t, p, "pricing")
	if task.BudgetTokens != 400_000 || task.BudgetCost != 2.5 {
		t.Errorf("budgets %d %v", task.BudgetTokens, task.BudgetCost)
	}
}

// Every problem in a [gateway] is reported at its own line and field.
func TestPlanGatewayBroken(t *testing.T) {
	repo := newPlanRepo(t, planShopFiles)
	_, err := parseExample(t, "broken-gateway.toml", repo)
	checkPlanWants(t, "plans/broken-gateway.toml", readPlanFile(t, "broken-gateway.toml"), err)
}
