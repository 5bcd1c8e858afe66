package tui

import (
	"fmt"

	tea "charm.land/bubbletea/v2"
)

// Agents waiting on a human: an inbox item with an Item id is a prompt noticed on an
// agent's quiet terminal or a question it asked through `corral ctl ask`. `i` answers
// it: the answer is typed into the agent's terminal (or returned to its question).

// agentScreenLines is how much of an agent's last screen the inbox shows.
const agentScreenLines = 6

// agentItemRows renders an agent's item: its kind and text, then its last screen.
func agentItemRows(d *viewData, it InboxItem, w int) []row {
	st := d.styles
	rows := []row{{text: st.FState("inbox").Render("? ") + st.F.Text.Render(fit(fmt.Sprintf("%s [%s]: %s (i answers)", it.Task, it.Kind, it.What), w-2)),
		task: it.Task}}
	screen := it.Screen
	if len(screen) > agentScreenLines {
		screen = screen[len(screen)-agentScreenLines:]
	}
	for _, l := range screen {
		rows = append(rows, row{text: st.F.Muted.Render(fit("    │ "+l, w)), task: it.Task})
	}
	return rows
}

// answerTarget is the agent item `i` answers: the inbox's selected one when the inbox
// has focus, else the selected task's.
func (m *Model) answerTarget() *InboxItem {
	task := ""
	if lp, ok := m.panes[m.focus].(*listPane); ok && lp.title == "Inbox" {
		if r := lp.selectedRow(); r != nil {
			task = r.task
		}
	} else if sel := m.tasks.selected(); sel != nil {
		task = sel.ID
	}
	for i := range m.snap.Inbox {
		if it := &m.snap.Inbox[i]; it.Item != 0 && (task == "" || it.Task == task) {
			return it
		}
	}
	return nil
}

// startAnswer opens the answer line for the target item.
func (m *Model) startAnswer() tea.Cmd {
	it := m.answerTarget()
	if it == nil {
		m.setStatus("answer: no agent is waiting on a human here", false)
		return nil
	}
	d := newInput(dlgAnswer, fmt.Sprintf("answer %s (%s): ", it.Task, it.Kind), "")
	d.action = Action{Verb: VerbAnswer, Task: it.Task, Item: it.Item}
	m.dialog = d
	return nil
}
