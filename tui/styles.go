package tui

import (
	"strings"

	"charm.land/lipgloss/v2"

	"corral/themes"
)

// Styles are every style the panes use, built once per theme: View only applies them.
type Styles struct {
	Theme       themes.Theme
	Text        lipgloss.Style
	Muted       lipgloss.Style
	Title       lipgloss.Style
	TitleFocus  lipgloss.Style
	Box         lipgloss.Style
	BoxFocus    lipgloss.Style
	Selected    lipgloss.Style
	Key         lipgloss.Style
	Warn        lipgloss.Style
	Error       lipgloss.Style
	Gauge       lipgloss.Style
	GaugeOver   lipgloss.Style
	Header      lipgloss.Style
	Dialog      lipgloss.Style
	state       map[string]lipgloss.Style
	defaultRole lipgloss.Style
	// frame and frameFocus are the border's escape sequences around its runes, so a
	// box is drawn by concatenation instead of a lipgloss layout pass per frame.
	frame, frameFocus painter
	// F holds the same styles as plain escape-sequence wrappers, for rows built per
	// snapshot: a lipgloss Render per cell costs more than the whole frame budget.
	F         fastStyles
	stateFast map[string]painter
}

// painter wraps text in a style's escape sequences.
type painter [2]string

// Render wraps s; it handles one line of text without width or padding rules.
func (p painter) Render(s string) string { return p[0] + s + p[1] }

type fastStyles struct {
	Text, Muted, Title, Warn, Gauge, GaugeOver painter
}

// FState is State as a painter.
func (s *Styles) FState(name string) painter {
	if p, ok := s.stateFast[name]; ok {
		return p
	}
	return s.F.Text
}

// wrapOf splits what a style puts around text into its prefix and suffix.
func wrapOf(st lipgloss.Style) painter {
	pre, post, _ := strings.Cut(st.Render("\x00"), "\x00")
	return painter{pre, post}
}

// NewStyles compiles a theme into styles.
func NewStyles(th themes.Theme) *Styles {
	fg := func(role string) lipgloss.Style {
		s := lipgloss.NewStyle()
		if c := th.Color(role); c != "" {
			s = s.Foreground(lipgloss.Color(c))
		}
		return s
	}
	box := func(role string) lipgloss.Style {
		s := lipgloss.NewStyle().Border(lipgloss.RoundedBorder())
		if c := th.Color(role); c != "" {
			s = s.BorderForeground(lipgloss.Color(c))
		}
		return s
	}
	st := &Styles{
		Theme:      th,
		Text:       fg("fg"),
		Muted:      fg("muted"),
		Title:      fg("title").Bold(true),
		TitleFocus: fg("border_focus").Bold(true).Underline(true),
		Box:        box("border"),
		BoxFocus:   box("border_focus"),
		Key:        fg("key").Bold(true),
		Warn:       fg("warn").Bold(true),
		Error:      fg("failed").Bold(true),
		Gauge:      fg("gauge"),
		GaugeOver:  fg("gauge_over"),
		Header:     fg("fg").Bold(true),
		Dialog:     box("warn").Padding(0, 1),
		state:      map[string]lipgloss.Style{},
	}
	st.Selected = fg("selected_fg").Bold(true)
	if c := th.Color("selected_bg"); c != "" {
		st.Selected = st.Selected.Background(lipgloss.Color(c))
	} else {
		st.Selected = st.Selected.Reverse(true) // NO_COLOR still shows the cursor
	}
	for _, role := range []string{"running", "paused", "queued", "done", "failed", "inbox",
		"accepted", "merged", "rejected", "escalated", "empty"} {
		st.state[role] = fg(role)
	}
	// States without a role of their own borrow the nearest one.
	st.state["publishing"] = st.state["running"]
	st.state["retrying"] = st.state["queued"]
	st.state["interrupted"] = st.state["paused"]
	st.state["discarded"] = st.state["empty"]
	st.defaultRole = st.Text
	st.F = fastStyles{Text: wrapOf(st.Text), Muted: wrapOf(st.Muted), Title: wrapOf(st.Title), Warn: wrapOf(st.Warn),
		Gauge: wrapOf(st.Gauge), GaugeOver: wrapOf(st.GaugeOver)}
	st.stateFast = map[string]painter{}
	for name, style := range st.state {
		st.stateFast[name] = wrapOf(style)
	}
	st.frame = wrapOf(fg("border"))
	st.frameFocus = wrapOf(fg("border_focus"))
	return st
}

// State returns the style of a task state or publish outcome.
func (s *Styles) State(name string) lipgloss.Style {
	if st, ok := s.state[name]; ok {
		return st
	}
	return s.defaultRole
}
