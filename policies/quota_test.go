package policies

import (
	"strings"
	"testing"
	"time"
)

func TestQuotaLevelsAndValidation(t *testing.T) {
	q := Quota{Metric: QuotaTokens, Limit: 1000, Window: 5 * time.Hour, Soft: 0.8, Hard: 0.95}
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[float64]QuotaLevel{0: QuotaOK, 0.79: QuotaOK, 0.8: QuotaSoft, 0.949: QuotaSoft, 0.95: QuotaHard, 1.2: QuotaHard} {
		if got := q.Level(f); got != want {
			t.Errorf("Level(%v) = %s, want %s", f, got, want)
		}
	}
	bad := map[string]Quota{
		"metric":              {Metric: "money", Limit: 1, Window: time.Hour, Soft: .5, Hard: .9},
		"limit":               {Metric: QuotaCost, Window: time.Hour, Soft: .5, Hard: .9},
		"window":              {Metric: QuotaUtilization, Soft: .5, Hard: .9},
		"soft: 0.95 is above": {Metric: QuotaUtilization, Window: time.Hour, Soft: .95, Hard: .9},
		"hard: 1.5":           {Metric: QuotaUtilization, Window: time.Hour, Soft: .5, Hard: 1.5},
	}
	for want, q := range bad {
		if err := q.Validate(); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Validate(%+v) = %v, want %q…", q, err, want)
		}
	}
}

func TestQuotaReason(t *testing.T) {
	reset := time.Date(2026, 11, 29, 15, 57, 0, 0, time.Local)
	if got := QuotaReason(0.96, 5*time.Hour, reset); got != "fleet at 96% of 5h window, resets 15:57" {
		t.Errorf("reason %q", got)
	}
	if got := FormatWindow(90 * time.Minute); got != "1h30m" {
		t.Errorf("FormatWindow(90m) = %q", got)
	}
}

func TestPauseLowestPriorityFirstResumeHighestFirst(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cs := []QuotaCandidate{
		{Session: "high-1", Priority: 5, Started: t0},
		{Session: "low-old", Priority: 0, Started: t0},
		{Session: "low-new", Priority: 0, Started: t0.Add(time.Minute)},
		{Session: "mid-1", Priority: 2, Started: t0},
	}
	if got := strings.Join(PauseOrder(cs), " "); got != "low-new low-old mid-1 high-1" {
		t.Errorf("pause order %s", got)
	}
	if got := strings.Join(ResumeOrder(cs), " "); got != "high-1 mid-1 low-old low-new" {
		t.Errorf("resume order %s", got)
	}
}

func TestPricesAndBudgets(t *testing.T) {
	table := map[string]Price{"claude-sonnet-4": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}, "claude": {Input: 1}}
	p, ok := PriceFor(table, "claude-sonnet-4-5-20250929")
	if !ok || p.Output != 15 {
		t.Fatalf("PriceFor = %+v, %v", p, ok)
	}
	if _, ok := PriceFor(table, "gpt-5"); ok {
		t.Error("gpt-5 priced by a claude entry")
	}
	// 1M input at 3, 1M output at 15, 1M cache reads at 0.3, 1M cache writes at 3.75.
	if c := p.Cost(1e6, 1e6, 1e6, 1e6); c < 22.0499 || c > 22.0501 {
		t.Errorf("cost %v, want 22.05", c)
	}
	b := Budget{Tokens: 100}
	if over, _ := b.Exceeded(100, 0); over {
		t.Error("exactly the budget counts as over")
	}
	if over, why := b.Exceeded(101, 0); !over || why != "used 101 tokens of its budget of 100" {
		t.Errorf("Exceeded = %v %q", over, why)
	}
	if over, _ := (Budget{Cost: 0.5}).Exceeded(1e9, 0.6); !over {
		t.Error("cost budget not enforced")
	}
}
