package tui

import (
	"strings"
	"testing"
	"time"
)

// The header shows model spend and the quota meter once the fleet has them, and
// nothing of either before.
func TestHeaderQuotaMeter(t *testing.T) {
	m, f := newTestModel(t, 160, 30)
	if h := stripANSI(m.header()); strings.Contains(h, "QUOTA") || strings.Contains(h, "model ") {
		t.Fatalf("header without a gateway shows quota or spend:\n%s", h)
	}
	snap := f.snap
	snap.ModelCalls, snap.ModelTokens, snap.ModelCost = 12, 48_200, 1.234
	snap.Quota = &Quota{Fraction: 0.96, Soft: 0.8, Hard: 0.95, Level: "hard", Window: 5 * time.Hour,
		Reset: time.Date(2026, 11, 29, 15, 57, 0, 0, time.Local)}
	m.Update(snapshotMsg{tag: 2, snap: snap})
	h := stripANSI(m.header())
	for _, want := range []string{"model 12 calls 48k tok $1.23", "QUOTA", "96%", "↺15:57"} {
		if !strings.Contains(h, want) {
			t.Errorf("header lacks %q:\n%s", want, h)
		}
	}
}

// The budgets pane shows a live task's model spend against its budgets.
func TestBudgetsPaneShowsModelSpend(t *testing.T) {
	m, f := newTestModel(t, 160, 30)
	snap := f.snap
	snap.Tasks = append([]TaskRow(nil), snap.Tasks...)
	var id string
	for i := range snap.Tasks {
		if snap.Tasks[i].Session != "" {
			snap.Tasks[i].ModelTokens, snap.Tasks[i].ModelCost = 12_500, 0.42
			snap.Tasks[i].BudgetTokens, snap.Tasks[i].BudgetCost = 400_000, 2.5
			id = snap.Tasks[i].ID
			break
		}
	}
	d := &viewData{snap: &snap, styles: m.styles}
	var line string
	for _, r := range renderBudgets(d, 160) {
		if r.task == id {
			line = stripANSI(r.text)
		}
	}
	if !strings.Contains(line, "model 12k/400k tok $0.42/$2.50") {
		t.Errorf("budgets row of %s: %q", id, line)
	}
}
