package tui

import (
	"fmt"
	"strings"
	"time"
)

// The render functions build a list pane's rows from the fleet picture, once per
// change; they are pure, so golden tests call them through the panes.

func renderPublishes(d *viewData, w int) []row {
	st := d.styles
	var rows []row
	pubs := d.snap.Publishes
	for i := len(pubs) - 1; i >= 0; i-- { // newest first
		p := pubs[i]
		head := short(p.Head)
		if p.NewHead != "" {
			head += "→" + short(p.NewHead)
		}
		line := fmt.Sprintf("#%-3d %-12s ", p.ID, clip(p.Task, 12))
		rest := fmt.Sprintf(" %s %s", head, p.Message)
		if p.Decided != "" {
			rest = " (" + p.Decided + "d)" + rest
		}
		lane, lw := laneMark(d, p)
		rows = append(rows, row{text: st.F.Text.Render(line) + st.FState(p.Outcome).Render(fmt.Sprintf("%-9s", p.Outcome)) + lane +
			st.F.Muted.Render(fit(rest, w-len(line)-9-lw)), task: p.Task, publish: p.ID})
		for _, c := range p.Conflicts {
			by := ""
			if c.MovedBy != 0 {
				by = fmt.Sprintf(", moved by #%d", c.MovedBy)
			}
			rows = append(rows, row{text: st.FState("rejected").Render(fit(fmt.Sprintf("     ✗ %s (%s%s)", c.Path, c.Class, by), w)), task: p.Task, publish: p.ID})
		}
	}
	return rows
}

// laneMark is a publish's lane verdict as a short mark and its width: "✓" green,
// "✗" red (with "culprit" when blamed), "~" flaky, "…" being tested.
func laneMark(d *viewData, p Publish) (string, int) {
	var mark, style string
	switch p.Lane {
	case "green":
		mark, style = " ✓", "accepted"
	case "red":
		mark, style = " ✗", "rejected"
	case "flaky":
		mark, style = " ~flaky", "escalated"
	case "running":
		mark, style = " …", "queued"
	case "skipped":
		mark, style = " ·", "empty" // covered by a later head's run
	default:
		return "", 0
	}
	if p.Culprit {
		mark, style = " ✗culprit", "rejected"
	}
	return d.styles.FState(style).Render(mark), len([]rune(mark))
}

func renderInbox(d *viewData, w int) []row {
	st := d.styles
	var rows []row
	for _, it := range d.snap.Inbox {
		mark := "•"
		if it.Publish != 0 {
			mark = "⚑"
		}
		if it.Item != 0 {
			rows = append(rows, agentItemRows(d, it, w)...)
			continue
		}
		rows = append(rows, row{text: st.FState("inbox").Render(mark+" ") + st.F.Text.Render(fit(fmt.Sprintf("%s: %s", it.Task, it.What), w-2)),
			task: it.Task, publish: it.Publish})
		for _, p := range it.Paths {
			rows = append(rows, row{text: st.F.Muted.Render(fit("    "+p, w)), task: it.Task, publish: it.Publish})
		}
		// The diff a human approves: what would land, as a reviewer reads it.
		for _, l := range it.Diff {
			text := st.F.Muted.Render(fit("    "+l, w))
			switch {
			case strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++"):
				text = st.FState("accepted").Render(fit("    "+l, w))
			case strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "---"):
				text = st.FState("rejected").Render(fit("    "+l, w))
			}
			rows = append(rows, row{text: text, task: it.Task, publish: it.Publish})
		}
	}
	return rows
}

func renderLeases(d *viewData, w int) []row {
	st := d.styles
	var rows []row
	for _, l := range d.snap.Leases {
		rows = append(rows, row{text: st.F.Text.Render(fit(fmt.Sprintf("%-5d → http://%-21s %-12s since %s",
			l.Port, l.Endpoint, clip(l.Task, 12), l.Since.Format("15:04:05")), w)), task: l.Task})
	}
	return rows
}

func renderBudgets(d *viewData, w int) []row {
	st := d.styles
	var rows []row
	for _, t := range d.snap.Tasks {
		if t.Session == "" {
			continue
		}
		hist := d.snap.Usage[t.Session]
		cpu := make([]float64, len(hist))
		mem := make([]float64, len(hist))
		for i, u := range hist {
			cpu[i], mem[i] = u.CPUPercent, float64(u.Memory)
		}
		cpuStyle := st.F.Gauge
		if t.CPULimit > 0 && t.CPUPercent > 90*t.CPULimit {
			cpuStyle = st.F.GaugeOver // at its quota: the cgroup is throttling it
		}
		extra := ""
		if t.OOMKills > 0 {
			extra += fmt.Sprintf(" OOM×%d", t.OOMKills)
		}
		if t.Throttled > 0 {
			extra += " throttled " + t.Throttled.Round(100*time.Millisecond).String()
		}
		if t.ModelTokens > 0 || t.BudgetTokens > 0 || t.BudgetCost > 0 {
			extra += modelSpend(t)
		}
		text := fmt.Sprintf("%-12s cpu %4.0f%%/%-4s ", clip(t.ID, 12), t.CPUPercent, cores(t.CPULimit))
		memText := fmt.Sprintf(" mem %6s/%-5s ", bytesH(int64(t.Memory)), bytesH(t.MemLimit))
		rows = append(rows, row{task: t.ID, text: st.F.Text.Render(text) + cpuStyle.Render(sparkline(cpu, 8)) +
			st.F.Text.Render(memText) + st.F.Gauge.Render(sparkline(mem, 8)) + st.F.Warn.Render(fit(extra, max(0, w-len(text)-len(memText)-16)))})
	}
	return rows
}

func renderTimeline(d *viewData, w int) []row {
	st := d.styles
	var rows []row
	for i := len(d.events) - 1; i >= 0 && len(rows) < 300; i-- {
		e := d.events[i]
		who := e.Task
		if e.Session != "" {
			who = e.Session
		}
		kind := e.Kind
		_, verb, _ := strings.Cut(kind, ".")
		line := fmt.Sprintf("%s %-18s ", e.Time.Format("15:04:05"), kind)
		rows = append(rows, row{task: e.Task, text: st.F.Muted.Render(line[:9]) + st.FState(verbRole(verb)).Render(line[9:]) +
			st.F.Text.Render(fit(who+" "+e.Data, w-len(line)))})
	}
	return rows
}

// verbRole colours an event by what it means.
func verbRole(verb string) string {
	switch verb {
	case "started", "resumed", "granted":
		return "running"
	case "paused":
		return "paused"
	case "failed", "oom", "killed":
		return "failed"
	case "done":
		return "done"
	}
	return verb // accepted, merged, rejected, escalated, empty, queued…
}

// modelSpend is a task's model tokens and cost against its budgets.
func modelSpend(t TaskRow) string {
	s := " model " + count(t.ModelTokens)
	if t.BudgetTokens > 0 {
		s += "/" + count(t.BudgetTokens)
	}
	s += fmt.Sprintf(" tok $%.2f", t.ModelCost)
	if t.BudgetCost > 0 {
		s += fmt.Sprintf("/$%.2f", t.BudgetCost)
	}
	return s
}

// sparkline draws the last n values scaled to their maximum.
func sparkline(vals []float64, n int) string {
	const bars = "▁▂▃▄▅▆▇█"
	if len(vals) > n {
		vals = vals[len(vals)-n:]
	}
	top := 0.0
	for _, v := range vals {
		top = max(top, v)
	}
	var b strings.Builder
	for range n - len(vals) {
		b.WriteRune(' ')
	}
	r := []rune(bars)
	for _, v := range vals {
		i := 0
		if top > 0 {
			i = int(v / top * float64(len(r)-1))
		}
		b.WriteRune(r[i])
	}
	return b.String()
}

// gauge draws used/limit as a bar of width w.
func gauge(used, limit float64, w int) string {
	if limit <= 0 {
		return strings.Repeat("·", w)
	}
	n := min(w, int(used/limit*float64(w)+0.5))
	return strings.Repeat("█", n) + strings.Repeat("░", w-n)
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

func cores(c float64) string {
	if c <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2g", c)
}

func bytesH(n int64) string {
	switch {
	case n <= 0:
		return "-"
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

func age(since, now time.Time) string {
	if since.IsZero() {
		return "-"
	}
	d := now.Sub(since)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%dh", int(d.Hours()))
}

// clip cuts s to n cells with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if n <= 0 {
		return ""
	}
	if len(r) <= n {
		return s
	}
	if n == 1 {
		return "…"
	}
	return string(r[:n-1]) + "…"
}

// fit clips s to n cells and pads it to exactly n.
func fit(s string, n int) string {
	s = clip(s, n)
	if pad := n - len([]rune(s)); pad > 0 {
		s += strings.Repeat(" ", pad)
	}
	return s
}

// count writes a token count short: 950, 12k, 3.4M.
func count(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	case n >= 1_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprintf("%d", n)
}
