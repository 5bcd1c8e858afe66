package main

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"corral/policies"
	"corral/supervisor"
)

// namedReport is `corral report [RUN] [--json|--markdown] [--vs RUN] [--svg FILE]`, and
// `corral report --runs` to list the runs.
func runReport(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("report", stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	asJSON := fs.Bool("json", false, "print JSON")
	asMD := fs.Bool("markdown", false, "print Markdown tables")
	vs := fs.String("vs", "", "compare with this run, per accepted task")
	svg := fs.String("svg", "", "also write the per-task timeline as an SVG file")
	width := fs.Int("width", 72, "columns of the terminal timeline")
	runs := fs.Bool("runs", false, "list the runs of the repository")
	if err := parseFlags(fs, reorderValueFlags(args, "repo", "vs", "svg", "width")); err != nil {
		return err
	}
	if *asJSON && *asMD {
		return badInput("report: --json and --markdown are two answers; pick one")
	}
	if *runs {
		return listRunsCmd(stdout, *repoDir)
	}
	if fs.NArg() > 1 {
		return badInput("report: want at most one RUN (report --runs lists them)")
	}
	a, err := reportRun(*repoDir, fs.Arg(0))
	if err != nil {
		return err
	}
	if *svg != "" {
		if err := os.WriteFile(*svg, []byte(ganttSVG(a)), 0o644); err != nil {
			return badInput("--svg: %v", err)
		}
	}
	if *vs != "" {
		b, err := reportRun(*repoDir, *vs)
		if err != nil {
			return err
		}
		switch {
		case *asJSON:
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(map[string]namedReport{"a": a, "b": b})
		default:
			writeComparison(stdout, a, b, *asMD)
			return nil
		}
	}
	switch {
	case *asJSON:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(a)
	case *asMD:
		writeReportMarkdown(stdout, a)
	default:
		writeReportText(stdout, a, *width)
	}
	return nil
}

// namedReport is a run's report with the run it is of.
type namedReport struct {
	Run string `json:"run"`
	supervisor.Report
}

func reportRun(repoDir, id string) (namedReport, error) {
	_, ref, db, h, err := loadRun(repoDir, id)
	if err != nil {
		return namedReport{}, err
	}
	defer db.Close()
	totals, err := db.UsageTotals()
	if err != nil {
		return namedReport{}, err
	}
	usage := map[string]supervisor.UsageTotal{}
	for k, u := range totals {
		usage[k] = supervisor.UsageTotal{CPU: u.CPU, MemoryPeak: u.MemoryPeak}
	}
	return namedReport{Run: ref.ID, Report: h.Report(usage)}, nil
}

func listRunsCmd(w io.Writer, repoDir string) error {
	repo, _, err := resolveRun(repoDir, "")
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tCURRENT\tLAST USED\tEVENTS\tTASKS\tRECORDINGS")
	for _, r := range listRuns(repo) {
		_, _, db, h, err := loadRun(repoDir, r.Path)
		if err != nil {
			fmt.Fprintf(tw, "%s\t%v\t%s\t-\t-\t(%v)\n", r.ID, r.Current, r.Mod.Format(time.DateTime), err)
			continue
		}
		db.Close()
		var size int64
		for _, s := range h.Sessions {
			if fi, err := os.Stat(s.Recording); err == nil {
				size += fi.Size()
			}
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%d\t%d\t%s\n", r.ID, r.Current, r.Mod.Format(time.DateTime), len(h.Events), len(h.Tasks), bytesSI(size))
	}
	return tw.Flush()
}

// dur prints a duration rounded for people.
func dur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func optDur(d *time.Duration) string {
	if d == nil {
		return "-"
	}
	return dur(*d)
}

func classes(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

const costNote = "cost: no model calls recorded (the fleet ran without a [gateway] in its plan)"

// costCell is a cost as a report shows it: dollars and tokens, or "-" without calls.
func costCell(c *supervisor.Spend) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("$%.4f (%s tok, %d calls)", c.Cost, policies.FormatCount(c.Tokens()), c.Calls)
}

// fleetLines are the fleet's figures as (name, value) pairs, for every format.
func fleetLines(r namedReport) [][2]string {
	f := r.Fleet
	pa := f.PerAccepted
	return [][2]string{
		{"run", r.Run},
		{"fleet", f.Fleet},
		{"span", f.Start.Local().Format(time.DateTime) + " → " + f.End.Local().Format(time.TimeOnly)},
		{"batch elapsed", dur(f.BatchElapsed)},
		{"tasks", fmt.Sprintf("%d (%s)", f.Tasks, classes(f.Outcomes))},
		{"accepted", fmt.Sprint(f.Accepted)},
		{"attempts", fmt.Sprint(f.Attempts)},
		{"retries", fmt.Sprintf("%d (%.0f%% of attempts)", f.Retries, 100*f.RetryRate)},
		{"publishes", fmt.Sprintf("%d (%s)", f.Publishes, classes(f.PublishesBy))},
		{"reject rate", fmt.Sprintf("%.0f%%", 100*f.RejectRate)},
		{"conflicts", classes(f.Conflicts)},
		{"first conflict", optDur(f.FirstConflict) + " after the start"},
		{"human minutes", fmt.Sprintf("%.1f over %d decided item(s); %d pending", f.HumanMinutes, len(f.HumanItems)-f.Pending, f.Pending)},
		{"CPU", dur(f.CPU)},
		{"per accepted task", fmt.Sprintf("latency %s = running %s + waiting admission %s + waiting human %s; %.1f attempts; CPU %s",
			dur(pa.Latency), dur(pa.Running), dur(pa.WaitingAdmission), dur(pa.WaitingHuman), pa.Attempts, dur(pa.CPU))},
		{"cost", fleetCost(f)},
	}
}

var taskHeader = []string{"TASK", "OUTCOME", "ACCEPTED", "ATTEMPTS", "RETRIES", "PUBLISHES", "CONFLICTS", "1ST CONFLICT",
	"LATENCY", "RUNNING", "PAUSED", "WAIT ADMIT", "WAIT HUMAN", "CPU", "MEM PEAK", "COST"}

// fleetCost is the fleet's model spend and what one accepted task cost.
func fleetCost(f supervisor.FleetReport) string {
	if f.Cost == nil {
		return "-  (" + costNote + ")"
	}
	s := costCell(f.Cost)
	if c := f.PerAccepted.Cost; c != nil {
		s += fmt.Sprintf("; per accepted task $%.4f (%s tok)", c.Cost, policies.FormatCount(c.Tokens()))
	}
	return s
}

func taskCells(t supervisor.TaskReport) []string {
	lat := dur(t.Latency)
	if !t.Ended {
		lat += "+"
	}
	return []string{t.Task, string(t.Outcome), yesNo(t.Accepted), fmt.Sprint(t.Attempts), fmt.Sprint(t.Retries), fmt.Sprint(t.Publishes),
		classes(t.Conflicts), optDur(t.FirstConflict), lat, dur(t.Running), dur(t.Paused), dur(t.WaitingAdmission),
		dur(t.WaitingHuman), dur(t.CPU), policies.FormatSize(int64(t.MemoryPeak)), costCell(t.Cost)}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func writeReportText(w io.Writer, r namedReport, width int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, l := range fleetLines(r) {
		fmt.Fprintf(tw, "%s:\t%s\n", l[0], l[1])
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(taskHeader, "\t"))
	for _, t := range r.Tasks {
		fmt.Fprintln(tw, strings.Join(taskCells(t), "\t"))
	}
	tw.Flush()
	fmt.Fprintln(w, "(latency+ : the task had not ended when the run did)")
	fmt.Fprintln(w)
	fmt.Fprint(w, ganttText(r, width))
}

func writeReportMarkdown(w io.Writer, r namedReport) {
	fmt.Fprintf(w, "# corral report: %s\n\n| figure | value |\n|---|---|\n", r.Run)
	for _, l := range fleetLines(r) {
		fmt.Fprintf(w, "| %s | %s |\n", l[0], mdCell(l[1]))
	}
	fmt.Fprintf(w, "\n## Tasks\n\n| %s |\n|%s\n", strings.Join(taskHeader, " | "), strings.Repeat("---|", len(taskHeader)))
	for _, t := range r.Tasks {
		cells := taskCells(t)
		for i := range cells {
			cells[i] = mdCell(cells[i])
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintf(w, "\n## Timeline\n\n```\n%s```\n", ganttText(r, 72))
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// writeComparison prints two runs side by side: the seeds' protocol is to change one
// thing (workers, policy) and read the difference per accepted task.
func writeComparison(w io.Writer, a, b namedReport, md bool) {
	fa, fb := a.Fleet, b.Fleet
	pa, pb := fa.PerAccepted, fb.PerAccepted
	rows := [][3]string{
		{"tasks", fmt.Sprint(fa.Tasks), fmt.Sprint(fb.Tasks)},
		{"accepted", fmt.Sprint(fa.Accepted), fmt.Sprint(fb.Accepted)},
		{"batch elapsed", dur(fa.BatchElapsed), dur(fb.BatchElapsed)},
		{"attempts", fmt.Sprint(fa.Attempts), fmt.Sprint(fb.Attempts)},
		{"retry rate", fmt.Sprintf("%.0f%%", 100*fa.RetryRate), fmt.Sprintf("%.0f%%", 100*fb.RetryRate)},
		{"reject rate", fmt.Sprintf("%.0f%%", 100*fa.RejectRate), fmt.Sprintf("%.0f%%", 100*fb.RejectRate)},
		{"conflicts", classes(fa.Conflicts), classes(fb.Conflicts)},
		{"first conflict", optDur(fa.FirstConflict), optDur(fb.FirstConflict)},
		{"human minutes", fmt.Sprintf("%.1f", fa.HumanMinutes), fmt.Sprintf("%.1f", fb.HumanMinutes)},
		{"per accepted: latency", dur(pa.Latency), dur(pb.Latency)},
		{"per accepted: running", dur(pa.Running), dur(pb.Running)},
		{"per accepted: waiting admission", dur(pa.WaitingAdmission), dur(pb.WaitingAdmission)},
		{"per accepted: waiting human", dur(pa.WaitingHuman), dur(pb.WaitingHuman)},
		{"per accepted: attempts", fmt.Sprintf("%.2f", pa.Attempts), fmt.Sprintf("%.2f", pb.Attempts)},
		{"per accepted: CPU", dur(pa.CPU), dur(pb.CPU)},
		{"per accepted: cost", costCell(pa.Cost), costCell(pb.Cost)},
	}
	ratio := func(x, y time.Duration) string {
		if x == 0 || y == 0 {
			return ""
		}
		return fmt.Sprintf("%.2f×", float64(y)/float64(x))
	}
	delta := map[string]string{
		"batch elapsed":         ratio(fa.BatchElapsed, fb.BatchElapsed),
		"per accepted: latency": ratio(pa.Latency, pb.Latency),
		"per accepted: CPU":     ratio(pa.CPU, pb.CPU),
		"accepted":              fmt.Sprintf("%+d", fb.Accepted-fa.Accepted),
	}
	if md {
		fmt.Fprintf(w, "| figure | %s | %s | B vs A |\n|---|---|---|---|\n", a.Run, b.Run)
		for _, r := range rows {
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r[0], mdCell(r[1]), mdCell(r[2]), delta[r[0]])
		}
		if pa.Cost == nil && pb.Cost == nil {
			fmt.Fprintf(w, "\n%s\n", costNote)
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "FIGURE\tA: %s\tB: %s\tB vs A\n", a.Run, b.Run)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r[0], r[1], r[2], delta[r[0]])
	}
	tw.Flush()
	if pa.Cost == nil && pb.Cost == nil {
		fmt.Fprintln(w, costNote)
	}
}

// ganttGlyphs draws each state in the terminal timeline.
var ganttGlyphs = map[supervisor.TaskState]rune{
	supervisor.TaskQueued: '·', supervisor.TaskRetrying: '·', supervisor.TaskRunning: '█',
	supervisor.TaskPublishing: '▓', supervisor.TaskPaused: '░', supervisor.TaskInbox: '?',
	supervisor.TaskInterrupted: '!', supervisor.TaskDone: ' ', supervisor.TaskFailed: 'x', supervisor.TaskDiscarded: ' ',
}

// ganttText is a per-task timeline: one row per task, one column per slice of the run,
// each cell the state the task spent most of that slice in.
func ganttText(r namedReport, width int) string {
	start, end := r.Fleet.Start, r.Fleet.End
	total := end.Sub(start)
	if total <= 0 || width < 10 {
		return ""
	}
	nameW := 4
	for _, t := range r.Tasks {
		nameW = max(nameW, len(t.Task))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s %s%s\n", nameW, "", start.Local().Format("15:04:05"),
		fmt.Sprintf("%*s", width-8, end.Local().Format("15:04:05")))
	slice := total / time.Duration(width)
	for _, t := range r.Tasks {
		row := make([]rune, width)
		for c := range row {
			lo := start.Add(time.Duration(c) * total / time.Duration(width))
			hi := lo.Add(slice)
			best, most := ' ', time.Duration(-1)
			for _, sp := range t.Timeline {
				from, to := maxTime(sp.From, lo), minTime(sp.To, hi)
				if d := to.Sub(from); d > most && d >= 0 {
					g, ok := ganttGlyphs[sp.State]
					if !ok {
						g = '?'
					}
					best, most = g, d
				}
			}
			row[c] = best
		}
		fmt.Fprintf(&b, "%-*s %s│ %s\n", nameW, t.Task, string(row), t.Outcome)
	}
	fmt.Fprintf(&b, "%-*s █ running  ▓ publishing  ░ paused  · waiting admission  ? inbox  ! interrupted  x failed\n", nameW, "")
	return b.String()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// ganttColors fill the SVG timeline's bars.
var ganttColors = map[supervisor.TaskState]string{
	supervisor.TaskQueued: "#d0d4da", supervisor.TaskRetrying: "#f2c98a", supervisor.TaskRunning: "#3b82f6",
	supervisor.TaskPublishing: "#8b5cf6", supervisor.TaskPaused: "#94a3b8", supervisor.TaskInbox: "#f59e0b",
	supervisor.TaskInterrupted: "#ef4444", supervisor.TaskFailed: "#b91c1c",
}

// ganttSVG is the same timeline as a picture.
func ganttSVG(r namedReport) string {
	start, end := r.Fleet.Start, r.Fleet.End
	total := end.Sub(start).Seconds()
	if total <= 0 {
		total = 1
	}
	const left, rowH, plotW, top = 140, 22, 800, 30
	h := top + rowH*len(r.Tasks) + 70
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="monospace" font-size="12">`+"\n", left+plotW+20, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="10" y="18">%s — %s to %s (%s)</text>`+"\n",
		html.EscapeString(r.Run), start.Local().Format(time.DateTime), end.Local().Format(time.TimeOnly), dur(end.Sub(start)))
	x := func(t time.Time) float64 { return left + plotW*t.Sub(start).Seconds()/total }
	// A time axis: five ticks, as offsets from the start.
	axisY := top + rowH*len(r.Tasks) + 4
	for i := 0; i <= 4; i++ {
		tx := left + plotW*i/4
		off := time.Duration(float64(end.Sub(start)) * float64(i) / 4)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd"/><text x="%d" y="%d" text-anchor="middle" fill="#555">+%s</text>`+"\n",
			tx, top, tx, axisY, tx, axisY+12, dur(off))
	}
	for i, t := range r.Tasks {
		y := top + i*rowH
		fmt.Fprintf(&b, `<text x="10" y="%d">%s</text>`+"\n", y+15, html.EscapeString(t.Task))
		for _, sp := range t.Timeline {
			col, ok := ganttColors[sp.State]
			if !ok {
				continue
			}
			w := max(x(sp.To)-x(sp.From), 0.5)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s %s</title></rect>`+"\n",
				x(sp.From), y+3, w, rowH-6, col, html.EscapeString(t.Task), sp.State, dur(sp.To.Sub(sp.From)))
		}
	}
	ly := top + rowH*len(r.Tasks) + 28
	lx := left
	for _, s := range []supervisor.TaskState{supervisor.TaskQueued, supervisor.TaskRunning, supervisor.TaskPublishing,
		supervisor.TaskPaused, supervisor.TaskRetrying, supervisor.TaskInbox, supervisor.TaskInterrupted, supervisor.TaskFailed} {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly, ganttColors[s], lx+16, ly+11, s)
		lx += 100
	}
	b.WriteString("</svg>\n")
	return b.String()
}
