package tui

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
)

type dialogKind int

const (
	dlgConfirm dialogKind = iota
	dlgFilter
	dlgAdd
	dlgDeny
	dlgQuit
	dlgAnswer
)

// dialog is the one thing on top of the panes that takes the keys: a confirmation, a
// line of input, or the quit question.
type dialog struct {
	kind   dialogKind
	prompt string
	input  textinput.Model
	action Action // what a confirmation or a deny reason completes
}

func newInput(kind dialogKind, prompt, value string) *dialog {
	in := textinput.New()
	in.Prompt = prompt
	in.SetValue(value)
	in.Focus()
	return &dialog{kind: kind, prompt: prompt, input: in}
}

// onActionKey runs the fleet actions; a key that does not apply says why at once when
// the TUI already knows, else the supervisor's ErrNotApplicable reason comes back.
func (m *Model) onActionKey(msg tea.KeyPressMsg) (tea.Cmd, bool) {
	k := m.keys
	sel := m.tasks.selected()
	needTask := func() bool {
		if sel == nil {
			m.setStatus("no task selected", false)
			return false
		}
		return true
	}
	switch {
	case key.Matches(msg, k.Pause):
		if !needTask() {
			return nil, true
		}
		verb := VerbPause
		if sel.State == "paused" || sel.State == "interrupted" {
			verb = VerbResume
		}
		return actCmd(m.backend, Action{Verb: verb, Task: sel.ID}), true
	case key.Matches(msg, k.Retry):
		if !needTask() {
			return nil, true
		}
		return actCmd(m.backend, Action{Verb: VerbRetry, Task: sel.ID}), true
	case key.Matches(msg, k.Publish):
		if !needTask() {
			return nil, true
		}
		return actCmd(m.backend, Action{Verb: VerbPublish, Task: sel.ID}), true
	case key.Matches(msg, k.Rebase):
		if !needTask() {
			return nil, true
		}
		switch {
		case sel.Session == "":
			m.setStatus(fmt.Sprintf("rebase %s: no live session to rebase", sel.ID), false)
			return nil, true
		case sel.Behind == 0:
			m.setStatus(fmt.Sprintf("rebase %s: already on the head", sel.ID), false)
			return nil, true
		case sel.Lifetime != "persistent" && sel.State != "paused":
			m.setStatus(fmt.Sprintf("rebase %s: a running one-shot session publishes at its end; pause it to rebase now", sel.ID), false)
			return nil, true
		}
		m.dialog = &dialog{kind: dlgConfirm, action: Action{Verb: VerbRebase, Task: sel.ID},
			prompt: fmt.Sprintf("rebase %s onto the head (%d commit(s) ahead)? Its agent restarts over its files; clashes get conflict markers. [y/N]", sel.ID, sel.Behind)}
		return nil, true
	case key.Matches(msg, k.Fallback):
		if !m.snap.FallbackReady {
			m.setStatus("fallback: the plan's [gateway] names no fallback_url, or the fleet is on it already", false)
			return nil, true
		}
		m.dialog = &dialog{kind: dlgConfirm, action: Action{Verb: VerbFallback},
			prompt: "move every model call to the fallback upstream and resume the sessions the quota paused? [y/N]"}
		return nil, true
	case key.Matches(msg, k.Discard), key.Matches(msg, k.Kill):
		if !needTask() {
			return nil, true
		}
		a := Action{Verb: VerbDiscard, Task: sel.ID}
		what := "kill its processes and drop its layer"
		if key.Matches(msg, k.Kill) {
			a.Verb, what = VerbKill, "end its agent now (the layer is kept; r retries)"
		}
		m.dialog = &dialog{kind: dlgConfirm, action: a,
			prompt: fmt.Sprintf("%s task %s? This will %s. [y/N]", a.Verb, sel.ID, what)}
		return nil, true
	case key.Matches(msg, k.Approve), key.Matches(msg, k.Deny):
		item := m.inboxTarget()
		if item == nil {
			m.setStatus("nothing to approve: no escalated publish is selected or waiting", false)
			return nil, true
		}
		if key.Matches(msg, k.Approve) {
			return actCmd(m.backend, Action{Verb: VerbApprove, Task: item.Task, Publish: item.Publish}), true
		}
		d := newInput(dlgDeny, fmt.Sprintf("deny publish %d of %s, reason: ", item.Publish, item.Task), "")
		d.action = Action{Verb: VerbDeny, Task: item.Task, Publish: item.Publish}
		m.dialog = d
		return nil, true
	case key.Matches(msg, k.Answer):
		return m.startAnswer(), true
	case key.Matches(msg, k.Attach):
		if m.focus != 0 && m.focus != 1 {
			return nil, false // enter expands rows in the side panes
		}
		if sel == nil || sel.Session == "" {
			m.setStatus("attach: the selected task has no live session", false)
			return nil, true
		}
		m.attached = sel.Session
		m.layout()
		return nil, true
	}
	return nil, false
}

// inboxTarget is the escalated publish approve/deny act on: the inbox's selected item
// when the inbox has focus, else the selected task's waiting publish.
func (m *Model) inboxTarget() *InboxItem {
	if lp, ok := m.panes[m.focus].(*listPane); ok && lp.title == "Inbox" {
		if r := lp.selectedRow(); r != nil && r.publish != 0 {
			for i := range m.snap.Inbox {
				if m.snap.Inbox[i].Publish == r.publish {
					return &m.snap.Inbox[i]
				}
			}
		}
	}
	if sel := m.tasks.selected(); sel != nil {
		for i := range m.snap.Inbox {
			if it := &m.snap.Inbox[i]; it.Task == sel.ID && it.Publish != 0 {
				return it
			}
		}
	}
	return nil
}

func (m *Model) onDialogKey(msg tea.KeyPressMsg) tea.Cmd {
	d := m.dialog
	switch d.kind {
	case dlgConfirm:
		m.dialog = nil
		if msg.String() == "y" || msg.String() == "Y" {
			return actCmd(m.backend, d.action)
		}
		m.setStatus(string(d.action.Verb)+" cancelled", false)
		return nil
	case dlgQuit:
		switch msg.String() {
		case "k", "y", "enter":
			m.dialog = nil
			m.setStatus("stopping: running agents keep their layers and resume next time", false)
			return func() tea.Msg { return quitReadyMsg{} }
		case "d":
			m.dialog = nil
			m.setStatus("discarding every running agent…", false)
			return discardAllCmd(m.backend, m.liveTasks())
		case "esc", "n", "q":
			m.dialog = nil
		}
		return nil
	}
	switch msg.String() {
	case "esc":
		if d.kind == dlgFilter {
			m.tasks.setFilter("")
		}
		m.dialog = nil
		return nil
	case "enter":
		m.dialog = nil
		val := strings.TrimSpace(d.input.Value())
		switch d.kind {
		case dlgFilter:
			m.tasks.setFilter(val)
			m.followSelection()
		case dlgAdd:
			id, prompt, _ := strings.Cut(val, " ")
			if id == "" {
				m.setStatus("add task: want an id, then the prompt", false)
				return nil
			}
			return actCmd(m.backend, Action{Verb: VerbAdd, Task: id, Reason: strings.TrimSpace(prompt)})
		case dlgDeny, dlgAnswer:
			a := d.action
			a.Reason = val
			return actCmd(m.backend, a)
		}
		return nil
	}
	var cmd tea.Cmd
	d.input, cmd = d.input.Update(msg)
	if d.kind == dlgFilter {
		m.tasks.setFilter(d.input.Value()) // filter as you type
		m.followSelection()
	}
	return cmd
}

func (m *Model) liveTasks() []string {
	var ids []string
	for _, t := range m.snap.Tasks {
		if t.Session != "" {
			ids = append(ids, t.ID)
		}
	}
	return ids
}

// askQuit quits at once when nothing runs, else asks what to do with the agents.
func (m *Model) askQuit() tea.Cmd {
	live := m.liveTasks()
	if len(live) == 0 {
		return func() tea.Msg { return quitReadyMsg{} }
	}
	m.dialog = &dialog{kind: dlgQuit, prompt: fmt.Sprintf(
		"quit with %s running? k: stop, keep work · d: discard all · esc: stay", plural(len(live), "agent", "agents"))}
	return nil
}

func discardAllCmd(b Backend, tasks []string) tea.Cmd {
	return func() tea.Msg {
		for _, t := range tasks {
			b.Act(Action{Verb: VerbDiscard, Task: t})
		}
		return quitReadyMsg{}
	}
}

// onAttachedKey sends what the user types to the agent's terminal; ctrl+] detaches.
func (m *Model) onAttachedKey(msg tea.KeyPressMsg) tea.Cmd {
	if key.Matches(msg, m.keys.Detach) {
		m.setStatus("detached from "+m.attached, false)
		m.attached = ""
		m.layout()
		return nil
	}
	if b := keyBytes(msg); len(b) > 0 {
		return writeCmd(m.backend, m.attached, b)
	}
	return nil
}

// keyBytes is what a terminal would send for a key.
func keyBytes(msg tea.KeyPressMsg) []byte {
	switch msg.String() {
	case "enter":
		return []byte("\r")
	case "backspace":
		return []byte{0x7f}
	case "tab":
		return []byte("\t")
	case "esc":
		return []byte{0x1b}
	case "up":
		return []byte("\x1b[A")
	case "down":
		return []byte("\x1b[B")
	case "right":
		return []byte("\x1b[C")
	case "left":
		return []byte("\x1b[D")
	case "space":
		return []byte(" ")
	}
	if s := msg.String(); strings.HasPrefix(s, "ctrl+") && len(s) == 6 && s[5] >= 'a' && s[5] <= 'z' {
		return []byte{s[5] - 'a' + 1}
	}
	return []byte(msg.Key().Text)
}
