package store

import (
	"testing"
	"time"

	"corral/supervisor"
)

// Metered calls and task budgets go in and come back unchanged, each session's calls
// apart; a call of an unknown session is refused.
func TestModelCallsRoundTrip(t *testing.T) {
	db := openTest(t)
	task := supervisor.Task{ID: "checkout", Intent: []string{}, BudgetTokens: 5000, BudgetCost: 1.25, Created: t0}
	calls := []supervisor.ModelCall{
		{ID: 1, Session: "checkout-1", Task: "checkout", Time: t0, Upstream: "anthropic", Model: "claude-sonnet-4-5", Status: 200,
			Streamed: true, Input: 25, Output: 31, CacheRead: 200, CacheWrite: 50, Cost: 0.0012, Latency: 40 * time.Millisecond,
			Remaining: 4000, Reset: t0.Add(time.Hour), Utilization: 0.6,
			Limits: map[string]string{"anthropic-ratelimit-tokens-remaining": "4000"}},
		{ID: 2, Session: "checkout-2", Task: "checkout", Time: t0.Add(time.Second), Upstream: "openai", Model: "gpt-5",
			Status: 429, Remaining: -1, Utilization: -1},
	}
	update(t, db, func(tx supervisor.Tx) error {
		if err := tx.PutTask(task); err != nil {
			return err
		}
		for _, id := range []string{"checkout-1", "checkout-2"} {
			if err := tx.PutSession(supervisor.Session{ID: id, Task: "checkout", State: supervisor.SessionRunning, Started: t0}); err != nil {
				return err
			}
		}
		return tx.AddModelCalls(calls...)
	})
	view(t, db, func(r supervisor.Reader) error {
		check(t, "task with budget", task)(r.Task("checkout"))
		check(t, "all calls", calls)(r.ModelCalls(""))
		check(t, "one session's calls", calls[1:])(r.ModelCalls("checkout-2"))
		return nil
	})
	_, err := db.Update(func(tx supervisor.Tx) error {
		return tx.AddModelCalls(supervisor.ModelCall{Session: "ghost-1", Task: "ghost", Time: t0})
	})
	if err == nil {
		t.Error("a call of an unknown session was stored")
	}
}
