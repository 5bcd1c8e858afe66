package supervisor

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"corral/policies"
)

// Plan is a checked plan file: the fleet it describes and its tasks, defaults applied.
// Nothing in it has started; the supervisor turns it into records.
type Plan struct {
	Path  string `json:"path"` // the plan file as named by the user
	Dir   string `json:"dir"`  // absolute directory relative paths (repo = ".") resolve against
	Fleet Fleet  `json:"fleet"`
	Tasks []Task `json:"tasks"`
	// Policies are the plan's [[policy]] path rules, tried before the defaults.
	Policies []policies.PathRule `json:"policies,omitempty"`
	// Gateway is the plan's [gateway]; nil when it has none.
	Gateway *GatewayPlan `json:"gateway,omitempty"`
	// Workspace holds the [fleet] keys of the workspace protocol (ctl*.go).
	Workspace PlanWorkspace `json:"workspace"`

	defaults *planTask      // [defaults], kept for tasks added later (ParseTaskAdd)
	lines    map[string]int // field → line, for messages about the plan after the check
}

// Line returns the plan line where field (as problems name it: "fleet.memory",
// "task[2].intent[0]") or its nearest enclosing table was written, or 0.
func (p *Plan) Line(field string) int { return planLookupLine(p.lines, field) }

// Problem is one thing wrong with a plan, where it was written.
type Problem struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	Field string `json:"field"` // e.g. task[2].memory
	Msg   string `json:"msg"`
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Field, p.Msg)
}

// PlanError lists every problem found in a plan, in line order. A plan is checked
// whole before anything starts, so the user fixes everything in one edit.
type PlanError struct {
	Problems []Problem
}

func (e *PlanError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// PlanOption adjusts how a plan is read.
type PlanOption func(*planConfig)

type planConfig struct {
	dir            string
	hostCPU        float64
	planHostMemory int64
}

// WithPlanDir sets the directory relative paths in the plan resolve against (default:
// the directory of the plan's name), for plans that do not come from a file.
func WithPlanDir(dir string) PlanOption { return func(c *planConfig) { c.dir = dir } }

// WithHostLimits sets the host's cores and memory, from which the fleet's default
// budget is derived (default: this host's, read at parse time).
func WithHostLimits(cpu float64, memory int64) PlanOption {
	return func(c *planConfig) { c.hostCPU, c.planHostMemory = cpu, memory }
}

// ParsePlan reads and checks the plan file at path.
func ParsePlan(path string, opts ...PlanOption) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	return ParsePlanBytes(path, data, opts...)
}

// ParsePlanBytes checks a plan named name (used in messages and, by default, to find
// its directory). Every problem is collected; the error is a *PlanError.
func ParsePlanBytes(name string, data []byte, opts ...PlanOption) (*Plan, error) {
	cfg := planConfig{dir: filepath.Dir(name)}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.hostCPU <= 0 {
		cfg.hostCPU = float64(runtime.NumCPU())
	}
	if cfg.planHostMemory <= 0 {
		cfg.planHostMemory = planHostMemory()
	}
	dir, err := filepath.Abs(cfg.dir)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", name, err)
	}
	d, syntax := newPlanDecoder(name, data)
	if syntax != nil {
		return nil, &PlanError{Problems: []Problem{*syntax}}
	}
	d.checkTopKeys(false)
	fleet := d.decodeFleet(cfg)
	ws := d.decodeWorkspace()
	defaults := d.decodeDefaults()
	tasks := d.decodeTasks(defaults)
	pols := d.decodePolicies()
	gw := d.decodeGateway(dir)
	d.checkBudgets(gw, tasks)
	repo := d.checkRepo(dir, &fleet)
	d.checkTasks(tasks, nil, fleet.Admission)
	if repo != nil {
		d.checkIntents(repo, fleet, tasks)
		d.checkEnvFiles(repo.WorkTree, tasks)
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	if abs, err := filepath.Abs(name); err == nil {
		fleet.Plan = abs
	}
	return &Plan{Path: name, Dir: dir, Fleet: fleet, Tasks: planPlainTasks(tasks), Policies: pols, Gateway: gw, Workspace: ws, defaults: defaults, lines: d.lines}, nil
}

// ParseTaskAdd checks [[task]] tables being added to plan's running fleet (`corral
// add`): the same checks as a plan's tasks under the plan's defaults, ids must be new,
// and `after` may name the fleet's tasks as well as the added ones.
func ParseTaskAdd(name string, data []byte, plan *Plan) ([]Task, error) {
	if plan == nil {
		plan = &Plan{}
	}
	d, syntax := newPlanDecoder(name, data)
	if syntax != nil {
		return nil, &PlanError{Problems: []Problem{*syntax}}
	}
	d.checkTopKeys(true)
	tasks := d.decodeTasks(plan.defaults)
	if len(tasks) == 0 && len(d.probs) == 0 {
		d.problem("task", "no [[task]] table to add")
	}
	d.checkTasks(tasks, plan.Tasks, plan.Fleet.Admission)
	// A fleet record always has its repo; a bare Plan built by hand may not, and
	// then there is nothing to check globs and env files against.
	if plan.Fleet.Repo != "" {
		if repo := d.openRepo(plan.Fleet.Repo, "task"); repo != nil {
			d.checkIntents(repo, plan.Fleet, tasks)
			d.checkEnvFiles(repo.WorkTree, tasks)
		}
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return planPlainTasks(tasks), nil
}

func planPlainTasks(ts []*planTask) []Task {
	out := make([]Task, len(ts))
	for i, t := range ts {
		out[i] = t.Task
	}
	return out
}

// err returns the collected problems in line order, or nil.
func (d *planDecoder) err() error {
	if len(d.probs) == 0 {
		return nil
	}
	sort.SliceStable(d.probs, func(i, j int) bool { return d.probs[i].Line < d.probs[j].Line })
	return &PlanError{Problems: d.probs}
}

// planHostMemory reads the host's RAM from /proc/meminfo and returns the share a fleet
// may reserve by default: 3/4, leaving the rest to the supervisor, the user's editor
// and the page cache. 0 when unknown (no memory budget is enforced then).
func planHostMemory() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kib, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kib << 10 / 4 * 3
		}
	}
	return 0
}
