package tui

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// sortBy orders the tasks table; `s` cycles it.
var sortBy = []string{"plan", "state", "cpu", "age"}

// tasksPane is the table of tasks: one row per task, sortable and filtered by `/`.
type tasksPane struct {
	data    *viewData
	visible []TaskRow // after filter and sort
	rows    []string  // cached, fitted to w
	header  string
	cursor  int
	selID   string // the selection follows the task, not the row, when rows move
	filter  string
	sortAt  int
	w, h    int
	keys    KeyMap
	now     func() time.Time
}

func newTasksPane() *tasksPane { return &tasksPane{keys: DefaultKeyMap(), now: time.Now} }

func (p *tasksPane) Title() string {
	t := "Tasks"
	if p.filter != "" {
		t += fmt.Sprintf(" /%s", p.filter)
	}
	if sortBy[p.sortAt] != "plan" {
		t += " by " + sortBy[p.sortAt]
	}
	if p.data != nil {
		t += fmt.Sprintf(" (%d of %d)", len(p.visible), len(p.data.snap.Tasks))
	}
	return t
}

func (p *tasksPane) SetData(d *viewData) { p.data = d; p.rebuild() }

func (p *tasksPane) SetSize(w, h int) {
	p.h = h
	if w != p.w {
		p.w = w
		p.rebuild()
	}
}

func (p *tasksPane) setFilter(f string) { p.filter = f; p.rebuild() }

func (p *tasksPane) selected() *TaskRow {
	if p.cursor < len(p.visible) {
		return &p.visible[p.cursor]
	}
	return nil
}

func (p *tasksPane) Update(msg tea.Msg) tea.Cmd {
	k, ok := msg.(tea.KeyPressMsg)
	if !ok {
		return nil
	}
	switch {
	case key.Matches(k, p.keys.Up):
		p.move(-1)
	case key.Matches(k, p.keys.Down):
		p.move(1)
	case key.Matches(k, p.keys.Sort):
		p.sortAt = (p.sortAt + 1) % len(sortBy)
		p.rebuild()
	case k.String() == "esc":
		p.setFilter("")
	}
	return nil
}

func (p *tasksPane) move(d int) {
	if len(p.visible) == 0 {
		return
	}
	p.cursor = max(0, min(len(p.visible)-1, p.cursor+d))
	p.selID = p.visible[p.cursor].ID
}

// column is one table column; narrow screens drop the low-priority ones.
type column struct {
	name  string
	width int
	prio  int // lower stays longer
	cell  func(t *TaskRow, now time.Time) string
}

var taskColumns = []column{
	{"TASK", 14, 0, func(t *TaskRow, _ time.Time) string { return t.ID }},
	{"STATE", 11, 0, func(t *TaskRow, _ time.Time) string { return t.State }},
	{"ATT", 3, 2, func(t *TaskRow, _ time.Time) string { return fmt.Sprint(t.Attempt) }},
	{"BASE", 11, 3, func(t *TaskRow, _ time.Time) string {
		if t.Base == "" {
			return "-"
		}
		if t.Behind > 0 {
			return fmt.Sprintf("%s ↓%d", short(t.Base), t.Behind) // its base is behind the head
		}
		return short(t.Base)
	}},
	{"CPU%", 5, 1, func(t *TaskRow, _ time.Time) string {
		if t.Session == "" {
			return "-"
		}
		return fmt.Sprintf("%.0f", t.CPUPercent)
	}},
	{"MEM", 6, 1, func(t *TaskRow, _ time.Time) string { return bytesH(int64(t.Memory)) }},
	{"PORTS", 24, 4, func(t *TaskRow, _ time.Time) string { return strings.Join(t.Ports, " ") }},
	{"PUBLISH", 9, 1, func(t *TaskRow, _ time.Time) string { return t.LastPublish }},
	{"AGE", 4, 2, func(t *TaskRow, now time.Time) string { return age(t.Since, now) }},
	{"WHY", 30, 5, func(t *TaskRow, _ time.Time) string { return t.Reason }},
}

// columnsFor keeps the columns that fit w, by priority, in their order.
func columnsFor(w int) []column {
	for drop := 6; drop >= 0; drop-- {
		var cols []column
		total := 0
		for _, c := range taskColumns {
			if c.prio < drop {
				cols = append(cols, c)
				total += c.width + 1
			}
		}
		if total <= w || drop == 1 {
			if last := len(cols) - 1; last >= 0 && total < w && cols[last].name == "WHY" {
				cols[last].width += w - total // the reason takes what is left
			}
			return cols
		}
	}
	return taskColumns[:2]
}

func (p *tasksPane) rebuild() {
	if p.data == nil || p.w <= 0 {
		return
	}
	st := p.data.styles
	p.visible = p.visible[:0]
	f := strings.ToLower(p.filter)
	for _, t := range p.data.snap.Tasks {
		if f == "" || strings.Contains(strings.ToLower(t.ID+" "+t.State), f) {
			p.visible = append(p.visible, t)
		}
	}
	switch sortBy[p.sortAt] {
	case "state":
		sort.SliceStable(p.visible, func(i, j int) bool { return p.visible[i].State < p.visible[j].State })
	case "cpu":
		sort.SliceStable(p.visible, func(i, j int) bool { return p.visible[i].CPUPercent > p.visible[j].CPUPercent })
	case "age":
		sort.SliceStable(p.visible, func(i, j int) bool { return p.visible[i].Since.Before(p.visible[j].Since) })
	}
	p.cursor = 0
	for i, t := range p.visible {
		if t.ID == p.selID {
			p.cursor = i
		}
	}
	if len(p.visible) > 0 {
		p.selID = p.visible[p.cursor].ID
	}
	cols := columnsFor(p.w)
	var hb strings.Builder
	for _, c := range cols {
		hb.WriteString(fit(c.name, c.width) + " ")
	}
	p.header = st.F.Title.Render(fit(hb.String(), p.w))
	now := p.now()
	p.rows = p.rows[:0]
	for i := range p.visible {
		t := &p.visible[i]
		var b strings.Builder
		used := 0
		for _, c := range cols {
			cell := fit(c.cell(t, now), c.width) + " "
			used += c.width + 1
			switch c.name {
			case "STATE":
				b.WriteString(st.FState(t.State).Render(cell))
			case "PUBLISH":
				b.WriteString(st.FState(t.LastPublish).Render(cell))
			default:
				b.WriteString(st.F.Text.Render(cell))
			}
		}
		if used < p.w {
			b.WriteString(strings.Repeat(" ", p.w-used))
		}
		p.rows = append(p.rows, b.String())
	}
}

func (p *tasksPane) View(focused bool) string {
	if p.data == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(p.header)
	body := p.h - 1
	start := 0
	if p.cursor >= body {
		start = p.cursor - body + 1
	}
	for i := start; i < len(p.rows) && i < start+body; i++ {
		b.WriteByte('\n')
		if i == p.cursor {
			b.WriteString(p.data.styles.Selected.Render(stripANSI(p.rows[i])))
		} else {
			b.WriteString(p.rows[i])
		}
	}
	if len(p.rows) == 0 {
		b.WriteString("\n" + p.data.styles.Muted.Render(fit("no tasks match", p.w)))
	}
	return b.String()
}
