package tui

import (
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// pane is the contract every pane meets (STYLE.md point 2): it takes its data and its
// size from the root, keys when focused, and renders from rows it cached when the
// data last changed — View does no work a frame does not need.
type pane interface {
	Title() string
	SetData(*viewData)
	SetSize(w, h int)
	Update(tea.Msg) tea.Cmd
	View(focused bool) string
}

// viewData is what the panes render from; the root owns it.
type viewData struct {
	snap   *Snapshot
	events []Event
	styles *Styles
}

// row is one cached line of a list pane, with what it points at.
type row struct {
	text    string // styled, fitted to the width
	task    string
	publish int64
}

// listPane is a scrollable list of rows built by a render function: publishes, inbox,
// leases, budgets and the timeline are all one.
type listPane struct {
	title  string
	render func(d *viewData, width int) []row
	data   *viewData
	rows   []row
	cursor int
	w, h   int
	keys   KeyMap
}

func newListPane(title string, render func(*viewData, int) []row) *listPane {
	return &listPane{title: title, render: render, keys: DefaultKeyMap()}
}

func (p *listPane) Title() string { return p.title }

func (p *listPane) SetData(d *viewData) { p.data = d; p.rebuild() }

func (p *listPane) SetSize(w, h int) {
	if w != p.w {
		p.w, p.h = w, h
		p.rebuild()
	}
	p.h = h
}

func (p *listPane) rebuild() {
	if p.data == nil || p.w <= 0 {
		return
	}
	p.rows = p.render(p.data, p.w)
	if p.cursor >= len(p.rows) {
		p.cursor = max(0, len(p.rows)-1)
	}
}

func (p *listPane) selectedRow() *row {
	if p.cursor < len(p.rows) {
		return &p.rows[p.cursor]
	}
	return nil
}

func (p *listPane) Update(msg tea.Msg) tea.Cmd {
	if k, ok := msg.(tea.KeyPressMsg); ok {
		switch {
		case key.Matches(k, p.keys.Up):
			p.cursor = max(0, p.cursor-1)
		case key.Matches(k, p.keys.Down):
			p.cursor = min(len(p.rows)-1, p.cursor+1)
		}
	}
	return nil
}

func (p *listPane) View(focused bool) string {
	if p.data == nil {
		return ""
	}
	if len(p.rows) == 0 {
		return p.data.styles.Muted.Render(fit("nothing yet", p.w))
	}
	start := 0
	if p.cursor >= p.h {
		start = p.cursor - p.h + 1
	}
	var b strings.Builder
	for i := start; i < len(p.rows) && i < start+p.h; i++ {
		if i > start {
			b.WriteByte('\n')
		}
		if focused && i == p.cursor {
			b.WriteString(p.data.styles.Selected.Render(stripANSI(p.rows[i].text)))
		} else {
			b.WriteString(p.rows[i].text)
		}
	}
	return b.String()
}
