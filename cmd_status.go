package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"corral/policies"
	"corral/sandbox"
	"corral/store"
	"corral/supervisor"
)

// openFleetDB finds a fleet's database in the repository: the named one, or the most
// recently used.
func openFleetDB(repoDir, name string) (sandbox.Repo, *store.DB, error) {
	repo, err := sandbox.OpenRepo(repoDir)
	if err != nil {
		return repo, nil, badInput("--repo: %v", err)
	}
	path := ""
	if name != "" {
		path = fleetDB(repo, name)
		if _, err := os.Stat(path); err != nil {
			return repo, nil, badInput("--fleet %s: no such fleet in %s", name, repo.WorkTree)
		}
	} else {
		dbs, _ := filepath.Glob(filepath.Join(repo.StateDir, "fleets", "*.db"))
		sort.Slice(dbs, func(i, j int) bool { return modTime(dbs[i]).After(modTime(dbs[j])) })
		if len(dbs) == 0 {
			return repo, nil, badInput("no fleet has run in %s (corral run PLAN --headless starts one)", repo.WorkTree)
		}
		path = dbs[0]
	}
	db, err := store.Open(path)
	return repo, db, err
}

func modTime(p string) time.Time {
	fi, err := os.Stat(p)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// statusReport is `corral status --json`.
type statusReport struct {
	Fleet    supervisor.Fleet     `json:"fleet"`
	Tasks    []supervisor.Task    `json:"tasks"`
	Sessions []supervisor.Session `json:"sessions"`
	Leases   []supervisor.Lease   `json:"leases"`
	Usage    []supervisor.Usage   `json:"usage"`
	Events   int64                `json:"events"`
	Lane     []supervisor.LaneRun `json:"lane,omitempty"`  // the integration lane's runs
	Model    *modelReport         `json:"model,omitempty"` // spend through the gateway, when any
}

// modelReport is what the fleet's model calls cost, in all and per task, and per task
// whose work was accepted (all spend over the tasks an accepted or merged publish
// brought to the head).
type modelReport struct {
	Total           supervisor.Spend            `json:"total"`
	Tasks           map[string]supervisor.Spend `json:"tasks"`
	Accepted        int                         `json:"accepted_tasks"`
	CostPerAccepted float64                     `json:"cost_per_accepted_task"`
}

// runStatus is `corral status [--json]`: the fleet's records, read from its store
// (the fleet may be running or finished).
func runStatus(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	fleet := fs.String("fleet", "", "fleet name (default: the most recent)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	_, db, err := openFleetDB(*repoDir, *fleet)
	if err != nil {
		return err
	}
	defer db.Close()
	var rep statusReport
	err = db.View(func(r supervisor.Reader) error {
		var err error
		if rep.Fleet, err = r.Fleet(); err != nil {
			return err
		}
		if rep.Tasks, err = r.Tasks(); err != nil {
			return err
		}
		if rep.Sessions, err = r.Sessions(); err != nil {
			return err
		}
		if rep.Leases, err = r.Leases(true); err != nil {
			return err
		}
		if rep.Usage, err = r.LatestUsage(); err != nil {
			return err
		}
		if rep.Lane, err = r.LaneRuns(); err != nil {
			return err
		}
		calls, err := r.ModelCalls("")
		if err != nil {
			return err
		}
		if len(calls) > 0 {
			m := &modelReport{}
			m.Total, m.Tasks = supervisor.SumSpend(calls)
			pubs, err := r.Publishes()
			if err != nil {
				return err
			}
			accepted := map[string]bool{}
			for _, p := range pubs {
				if p.Outcome == supervisor.OutcomeAccepted || p.Outcome == supervisor.OutcomeMerged {
					accepted[p.Task] = true
				}
			}
			if m.Accepted = len(accepted); m.Accepted > 0 {
				m.CostPerAccepted = m.Total.Cost / float64(m.Accepted)
			}
			rep.Model = m
		}
		evs, err := r.Events(0, 1<<30)
		if n := len(evs); n > 0 {
			rep.Events = evs[n-1].Seq
		}
		return err
	})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	f := rep.Fleet
	fmt.Fprintf(stdout, "fleet %s — %s\nbase %.12s (%s), head %s at %.12s; %s; %d events\n",
		f.Name, f.Repo, f.Base, f.BaseRef, f.HeadRef, f.Head, summarizeTasks(rep.Tasks), rep.Events)
	last := map[string]supervisor.Session{}
	for _, s := range rep.Sessions {
		last[s.Task] = s
	}
	// The fleet's totals against its budget: what live sessions reserve and use.
	var resCPU, useCPU float64
	var resMem, useMem int64
	live := 0
	for _, t := range rep.Tasks {
		if s, ok := last[t.ID]; ok && s.State.Live() {
			live++
			resCPU, resMem = resCPU+t.CPU, resMem+t.Memory
		}
	}
	for _, u := range rep.Usage {
		useCPU, useMem = useCPU+u.CPUPercent/100, useMem+int64(u.Memory)
	}
	if line := laneLine(f, rep.Lane); line != "" {
		fmt.Fprintln(stdout, line)
	}
	adm := f.Admission
	fmt.Fprintf(stdout, "budget: %d of %d sessions; CPU %.2g reserved, %.2g used of %.2g; memory %s reserved, %s used of %s\n\n",
		live, adm.MaxRunning, resCPU, useCPU, adm.CPU, policies.FormatSize(resMem), policies.FormatSize(useMem), policies.FormatSize(adm.Memory))
	if m := rep.Model; m != nil {
		fmt.Fprintf(stdout, "model: %d calls, %d tokens (in %d, out %d, cache read %d, cache write %d), cost %.4f; %.4f per accepted task (%d)\n\n",
			m.Total.Calls, m.Total.Tokens(), m.Total.Input, m.Total.Output, m.Total.CacheRead, m.Total.CacheWrite,
			m.Total.Cost, m.CostPerAccepted, m.Accepted)
	}
	usage := map[string]supervisor.Usage{}
	for _, u := range rep.Usage {
		usage[u.Session] = u
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATE\tATTEMPT\tSESSION\tBASE\tCPU\tMEM\tREASON")
	for _, t := range rep.Tasks {
		s := last[t.ID]
		cpu, mem := "-", "-"
		if u, ok := usage[s.ID]; ok && s.State.Live() {
			cpu, mem = fmt.Sprintf("%.0f%%", u.CPUPercent), policies.FormatSize(int64(u.Memory))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.7s\t%s\t%s\t%s\n", t.ID, t.State, t.Attempts, s.ID, s.Base, cpu, mem, oneLine(t.Reason))
	}
	tw.Flush()
	if len(rep.Leases) > 0 {
		fmt.Fprintln(stdout)
		tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PORT\tENDPOINT\tSESSION\tSINCE")
		for _, l := range rep.Leases {
			fmt.Fprintf(tw, "%d\thttp://%s\t%s\t%s\n", l.Port, l.Endpoint, l.Session, l.Start.Format(time.TimeOnly))
		}
		tw.Flush()
	}
	return nil
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// laneLine says what the integration lane last concluded about a head, or "" for a
// fleet without a test command.
func laneLine(f supervisor.Fleet, runs []supervisor.LaneRun) string {
	if f.Test == "" {
		return ""
	}
	line := fmt.Sprintf("lane: %q, %s gating, on red %s", f.Test, f.Lane.Gating, f.Lane.OnRed)
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		if r.Kind == supervisor.LaneKindBisect || r.Outcome == supervisor.LaneSkipped || r.Outcome == supervisor.LaneRunning {
			continue
		}
		line += fmt.Sprintf("; head %.7s %s", r.Commit, r.Outcome)
		if r.Culprit != 0 {
			line += fmt.Sprintf(" (culprit publish %d)", r.Culprit)
		}
		if r.Commit != f.Head {
			line += fmt.Sprintf(", head now %.7s", f.Head)
		}
		break
	}
	return line
}
