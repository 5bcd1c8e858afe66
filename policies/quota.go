package policies

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Quota metrics: what a fleet quota counts over its window.
const (
	QuotaTokens      = "tokens"      // tokens of every category metered by the gateway
	QuotaCost        = "cost"        // their cost from the plan's price table
	QuotaUtilization = "utilization" // the provider's own figure (headers or a probe), 0..1
)

// Quota is a fleet's share of a provider's usage window, with a soft threshold (stop
// admitting sessions) and a hard one (pause running sessions). Thresholds are
// fractions of Limit (of 1 for utilization).
type Quota struct {
	Metric string        `json:"metric"`
	Limit  float64       `json:"limit"`  // tokens or cost per window; unused for utilization
	Window time.Duration `json:"window"` // fixed window from its first use, unless the provider reports resets
	Soft   float64       `json:"soft"`
	Hard   float64       `json:"hard"`
}

// DefaultQuota has the thresholds a plan gets when it names only a metric and limit.
func DefaultQuota() Quota {
	return Quota{Metric: QuotaTokens, Window: 5 * time.Hour, Soft: 0.8, Hard: 0.95}
}

// Validate reports the first thing wrong with q, naming the field as a plan writes it.
func (q Quota) Validate() error {
	switch q.Metric {
	case QuotaTokens, QuotaCost:
		if q.Limit <= 0 {
			return fmt.Errorf("limit: want more than 0 %s per window", q.Metric)
		}
	case QuotaUtilization:
	default:
		return fmt.Errorf("metric: %q: want %q, %q or %q", q.Metric, QuotaTokens, QuotaCost, QuotaUtilization)
	}
	if q.Window <= 0 {
		return fmt.Errorf("window: want a duration such as \"5h\"")
	}
	if q.Soft <= 0 || q.Soft > 1 {
		return fmt.Errorf("soft: %v: want a fraction in (0, 1]", q.Soft)
	}
	if q.Hard <= 0 || q.Hard > 1 {
		return fmt.Errorf("hard: %v: want a fraction in (0, 1]", q.Hard)
	}
	if q.Soft > q.Hard {
		return fmt.Errorf("soft: %v is above hard %v: admission must stop before sessions pause", q.Soft, q.Hard)
	}
	return nil
}

// QuotaLevel is where a fleet stands against its quota.
type QuotaLevel string

const (
	QuotaOK   QuotaLevel = "ok"
	QuotaSoft QuotaLevel = "soft" // no new sessions
	QuotaHard QuotaLevel = "hard" // running sessions pause
)

// Level says which threshold fraction has reached.
func (q Quota) Level(fraction float64) QuotaLevel {
	switch {
	case fraction >= q.Hard:
		return QuotaHard
	case fraction >= q.Soft:
		return QuotaSoft
	}
	return QuotaOK
}

// QuotaReason is the sentence events and the TUI give for a quota decision:
// "fleet at 96% of 5h window, resets 15:57".
func QuotaReason(fraction float64, window time.Duration, reset time.Time) string {
	s := fmt.Sprintf("fleet at %.0f%% of %s window", 100*fraction, FormatWindow(window))
	if !reset.IsZero() {
		s += ", resets " + reset.Local().Format("15:04")
	}
	return s
}

// FormatWindow writes a window the way people say it: 5h, 90m, 1h30m.
func FormatWindow(d time.Duration) string {
	s := d.Round(time.Second).String() // "5h0m0s", "1h30m0s", "45s"
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// QuotaCandidate is a running session as the pause and resume order sees it.
type QuotaCandidate struct {
	Session  string
	Priority int
	Started  time.Time
}

// PauseOrder lists sessions lowest priority first, and among equals the newest first
// (it has the least work to lose).
func PauseOrder(cs []QuotaCandidate) []string {
	s := append([]QuotaCandidate(nil), cs...)
	sort.SliceStable(s, func(i, j int) bool {
		if s[i].Priority != s[j].Priority {
			return s[i].Priority < s[j].Priority
		}
		return s[i].Started.After(s[j].Started)
	})
	return sessionIDs(s)
}

// ResumeOrder lists sessions highest priority first, and among equals the oldest
// first: the reverse of PauseOrder.
func ResumeOrder(cs []QuotaCandidate) []string {
	ids := PauseOrder(cs)
	for i, j := 0, len(ids)-1; i < j; i, j = i+1, j-1 {
		ids[i], ids[j] = ids[j], ids[i]
	}
	return ids
}

func sessionIDs(cs []QuotaCandidate) []string {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.Session
	}
	return ids
}

// Price is what a model's tokens cost, per million, by category.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

// Cost prices one call's tokens.
func (p Price) Cost(input, output, cacheRead, cacheWrite int64) float64 {
	return (float64(input)*p.Input + float64(output)*p.Output +
		float64(cacheRead)*p.CacheRead + float64(cacheWrite)*p.CacheWrite) / 1e6
}

// PriceFor finds a model's price: an exact entry, else the longest entry that is a
// prefix of the model ("claude-sonnet-4" prices "claude-sonnet-4-5-20250929").
func PriceFor(table map[string]Price, model string) (Price, bool) {
	if p, ok := table[model]; ok {
		return p, true
	}
	best, found := "", false
	for name := range table {
		if strings.HasPrefix(model, name) && len(name) > len(best) {
			best, found = name, true
		}
	}
	return table[best], found
}

// Budget is a task's allowance of tokens and cost; zero means none.
type Budget struct {
	Tokens int64   `json:"tokens,omitempty"`
	Cost   float64 `json:"cost,omitempty"`
}

// Exceeded reports whether spent tokens or cost went over the budget, and says how.
func (b Budget) Exceeded(tokens int64, cost float64) (bool, string) {
	switch {
	case b.Tokens > 0 && tokens > b.Tokens:
		return true, fmt.Sprintf("used %d tokens of its budget of %d", tokens, b.Tokens)
	case b.Cost > 0 && cost > b.Cost:
		return true, fmt.Sprintf("spent %.4f of its budget of %.4f", cost, b.Cost)
	}
	return false, ""
}
