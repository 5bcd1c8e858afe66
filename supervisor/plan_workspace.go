package supervisor

import "time"

// PlanWorkspace is how a fleet's agents share the workspace: what a proposed handoff
// does (fleet.handoffs = "inbox" | "admit") and how long a terminal must stay quiet on
// a prompt before it becomes an inbox item (fleet.needs_input_after, e.g. "10s"; "0s"
// turns detection off). Zero values mean the defaults.
type PlanWorkspace struct {
	Handoffs        string        `json:"handoffs,omitempty"`
	NeedsInputAfter time.Duration `json:"needs_input_after,omitempty"`
	NeedsInputOff   bool          `json:"needs_input_off,omitempty"`
}

// decodeWorkspace reads the workspace keys of [fleet].
func (d *planDecoder) decodeWorkspace() PlanWorkspace {
	var w PlanWorkspace
	table, ok := d.root["fleet"].(map[string]any)
	if !ok {
		return w
	}
	if v, ok := table["handoffs"]; ok {
		w.Handoffs, _ = d.oneOf("fleet.handoffs", v, HandoffInbox, HandoffAdmit)
	}
	if v, ok := table["needs_input_after"]; ok {
		if t, ok := d.duration("fleet.needs_input_after", v); ok && t < 0 {
			d.problem("fleet.needs_input_after", "%v: want 0 (off) or more", t)
		} else if ok {
			w.NeedsInputAfter, w.NeedsInputOff = t, t == 0
		}
	}
	return w
}

// Apply sets the workspace settings on a supervisor's configuration.
func (w PlanWorkspace) Apply(cfg *Config) {
	cfg.Handoffs = w.Handoffs
	switch {
	case w.NeedsInputOff:
		cfg.NeedsInputAfter = -1
	case w.NeedsInputAfter > 0:
		cfg.NeedsInputAfter = w.NeedsInputAfter
	}
}
