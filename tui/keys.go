package tui

import "charm.land/bubbles/v2/key"

// KeyMap is every key the TUI answers to; panes show the ones that apply to them.
type KeyMap struct {
	Up, Down, Tab, ShiftTab        key.Binding
	Pause, Discard, Kill, Retry    key.Binding
	Rebase, Fallback               key.Binding
	Publish, Approve, Deny, Attach key.Binding
	Add, Filter, Sort, Theme       key.Binding
	Answer                         key.Binding
	Help, Quit, Detach             key.Binding
}

// DefaultKeyMap returns the keys README documents. Dangerous ones (discard, kill)
// ask for confirmation before they act.
func DefaultKeyMap() KeyMap {
	b := func(help, desc string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	return KeyMap{
		Up:       b("↑/k", "up", "up", "k"),
		Down:     b("↓/j", "down", "down", "j"),
		Tab:      b("tab", "next pane", "tab"),
		ShiftTab: b("shift+tab", "previous pane", "shift+tab"),
		Pause:    b("p", "pause/resume", "p", "space"),
		Discard:  b("D", "discard…", "D"),
		Kill:     b("X", "kill…", "X"),
		Retry:    b("r", "retry", "r"),
		Publish:  b("P", "publish now", "P"),
		Rebase:   b("R", "rebase…", "R"),
		Fallback: b("F", "fallback…", "F"),
		Approve:  b("a", "approve", "a"),
		Deny:     b("d", "deny…", "d"),
		Attach:   b("enter", "attach", "enter"),
		Add:      b("n", "add task…", "n"),
		Answer:   b("i", "answer…", "i"),
		Filter:   b("/", "filter", "/"),
		Sort:     b("s", "sort", "s"),
		Theme:    b("t", "theme", "t"),
		Help:     b("?", "help", "?"),
		Quit:     b("q", "quit…", "q", "ctrl+c"),
		Detach:   b("ctrl+]", "detach", "ctrl+]"),
	}
}

// ShortHelp is the help bar.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Help, k.Quit, k.Pause, k.Attach, k.Approve, k.Deny, k.Tab, k.Filter}
}

// FullHelp is `?`.
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.Tab, k.ShiftTab, k.Filter, k.Sort},
		{k.Pause, k.Retry, k.Publish, k.Rebase, k.Discard, k.Kill},
		{k.Approve, k.Deny, k.Answer, k.Attach, k.Detach, k.Add},
		{k.Theme, k.Fallback, k.Help, k.Quit},
	}
}
