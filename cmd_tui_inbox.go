package main

import (
	"strings"

	"corral/supervisor"
	"corral/tui"
)

// withAgentInbox adds the open items of agents waiting on a human (noticed prompts,
// `ctl ask` questions, proposed handoffs) to the TUI's inbox. A handoff's item stands
// for its task's generic "waits in the inbox" row.
func withAgentInbox(inbox []tui.InboxItem, items []supervisor.InboxItem) []tui.InboxItem {
	handoff := map[string]bool{}
	var agent []tui.InboxItem
	for _, it := range items {
		if it.State != supervisor.InboxOpen {
			continue
		}
		if it.Kind == supervisor.InboxHandoff {
			handoff[it.Handoff] = true
		}
		ti := tui.InboxItem{Task: it.Task, What: it.Text, Item: it.ID, Kind: it.Kind}
		if it.Screen != "" {
			ti.Screen = strings.Split(it.Screen, "\n")
		}
		agent = append(agent, ti)
	}
	out := make([]tui.InboxItem, 0, len(inbox)+len(agent))
	for _, it := range inbox {
		if !handoff[it.Task] {
			out = append(out, it)
		}
	}
	return append(out, agent...)
}
