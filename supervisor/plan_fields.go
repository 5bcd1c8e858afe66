package supervisor

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"time"

	"corral/policies"
)

// Keys a plan may use, per table. An unknown key is an error, not something ignored:
// a misspelt `memroy` would otherwise run the task without its limit.
var (
	planTopKeys   = []string{"fleet", "defaults", "task", "policy", "gateway"}
	planFleetKeys = []string{"name", "repo", "base", "head", "test", "max_running", "cpu", "memory", "launch_interval", "overlap",
		"handoffs", "needs_input_after",
		"gating", "on_red", "narrow", "test_reruns", "test_parallel", "test_timeout", "test_cpu", "test_memory", "test_every_head"}
	// planAliases point words users bring from other tools at ours.
	planAliases = map[string]string{
		"tasks": "task", "default": "defaults",
		"depends_on": "after", "dependencies": "after", "deps": "after", "needs": "after",
		"command": "agent", "cmd": "agent", "run": "agent",
		"paths": "intent", "globs": "intent", "files": "intent", "intents": "intent",
		"mem": "memory", "cpus": "cpu", "port": "ports", "branch": "head",
		"concurrency": "max_running", "parallel": "max_running", "max_parallel": "max_running",
		"test_command": "test", "tests": "test", "gate": "gating", "reruns": "test_reruns", "retest": "test_reruns",
		"acceptance": "accept", "check": "accept",
	}
)

// planTask is a task being decoded: the record, and for each key it has a value for,
// the field that set it ("task[3].agent", or "defaults.agent" when inherited), so that
// a later check reports the line the value came from.
type planTask struct {
	Task
	field string
	set   map[string]string
}

// planTaskField is one key a [[task]] or [defaults] table may set.
type planTaskField struct {
	key     string
	decode  func(d *planDecoder, field string, v any, t *Task)
	inherit func(dst, src *Task) // copies the key's value from [defaults]
}

var planTaskFields = []planTaskField{
	{"id", planDecodeID, func(dst, src *Task) { dst.ID = src.ID }},
	{"prompt", func(d *planDecoder, f string, v any, t *Task) { t.Prompt, _ = d.str(f, v) },
		func(dst, src *Task) { dst.Prompt = src.Prompt }},
	{"agent", planDecodeAgent, func(dst, src *Task) { dst.Agent = src.Agent }},
	{"lifetime", func(d *planDecoder, f string, v any, t *Task) {
		s, _ := d.oneOf(f, v, string(OneShot), string(Persistent))
		t.Lifetime = Lifetime(s)
	}, func(dst, src *Task) { dst.Lifetime = src.Lifetime }},
	{"intent", planDecodeIntent, func(dst, src *Task) { dst.Intent = slices.Clone(src.Intent) }},
	{"ports", planDecodePorts, func(dst, src *Task) { dst.Ports = slices.Clone(src.Ports) }},
	{"cpu", func(d *planDecoder, f string, v any, t *Task) {
		if n, ok := d.number(f, v); ok && n <= 0 {
			d.problem(f, "%v cores: want more than 0 (leave cpu out for no reservation)", n)
		} else {
			t.CPU = n
		}
	}, func(dst, src *Task) { dst.CPU = src.CPU }},
	{"memory", func(d *planDecoder, f string, v any, t *Task) {
		if n, ok := d.size(f, v); ok && n == 0 {
			d.problem(f, "0 bytes: want more than 0 (leave memory out for no reservation)")
		} else {
			t.Memory = n
		}
	}, func(dst, src *Task) { dst.Memory = src.Memory }},
	{"pids", func(d *planDecoder, f string, v any, t *Task) {
		if n, ok := d.integer(f, v); ok && n < 0 {
			d.problem(f, "%d: want 0 (no limit) or more", n)
		} else {
			t.Pids = n
		}
	}, func(dst, src *Task) { dst.Pids = src.Pids }},
	{"network", func(d *planDecoder, f string, v any, t *Task) { t.Network, _ = d.oneOf(f, v, "private", "host") },
		func(dst, src *Task) { dst.Network = src.Network }},
	{"env", planDecodeEnv, func(dst, src *Task) { dst.EnvFiles = slices.Clone(src.EnvFiles) }},
	{"priority", func(d *planDecoder, f string, v any, t *Task) { n, _ := d.integer(f, v); t.Priority = int(n) },
		func(dst, src *Task) { dst.Priority = src.Priority }},
	{"after", func(d *planDecoder, f string, v any, t *Task) { t.After, _ = d.strs(f, v) },
		func(dst, src *Task) { dst.After = slices.Clone(src.After) }},
	{"retries", func(d *planDecoder, f string, v any, t *Task) {
		if n, ok := d.integer(f, v); ok && n < 0 {
			d.problem(f, "%d: want 0 or more further attempts", n)
		} else {
			t.Retries = int(n)
		}
	}, func(dst, src *Task) { dst.Retries = src.Retries }},
	{"budget_tokens", func(d *planDecoder, f string, v any, t *Task) {
		if n, ok := d.integer(f, v); ok && n <= 0 {
			d.problem(f, "%d: want more than 0 tokens (leave budget_tokens out for no budget)", n)
		} else {
			t.BudgetTokens = n
		}
	}, func(dst, src *Task) { dst.BudgetTokens = src.BudgetTokens }},
	{"budget_cost", func(d *planDecoder, f string, v any, t *Task) {
		if n, ok := d.number(f, v); ok && n <= 0 {
			d.problem(f, "%v: want more than 0 (leave budget_cost out for no budget)", n)
		} else {
			t.BudgetCost = n
		}
	}, func(dst, src *Task) { dst.BudgetCost = src.BudgetCost }},
	{"accept", func(d *planDecoder, f string, v any, t *Task) {
		if s, ok := d.str(f, v); ok && strings.TrimSpace(s) == "" {
			d.problem(f, "empty command (leave accept out for no check)")
		} else {
			t.Accept = s
		}
	}, func(dst, src *Task) { dst.Accept = src.Accept }},
}

func planTaskKeys() []string {
	keys := make([]string, len(planTaskFields))
	for i, f := range planTaskFields {
		keys[i] = f.key
	}
	return keys
}

func planDecodeID(d *planDecoder, f string, v any, t *Task) {
	s, ok := d.str(f, v)
	if !ok {
		return
	}
	if err := policies.ValidTaskID(s); err != nil {
		d.problem(f, "%v", err)
	}
	t.ID = s
}

// planDecodeAgent checks the agent command as a template the way the launcher renders it
// (lifecycle.go: missingkey=error over Prompt, Task, Session, ConflictFile), so a
// misspelt {{.Promt}} fails here rather than at the task's first launch.
func planDecodeAgent(d *planDecoder, f string, v any, t *Task) {
	s, ok := d.str(f, v)
	if !ok {
		return
	}
	t.Agent = s
	if strings.TrimSpace(s) == "" {
		d.problem(f, "empty command")
		return
	}
	tmpl, err := template.New("agent").Option("missingkey=error").Parse(s)
	if err == nil {
		err = tmpl.Execute(io.Discard, map[string]string{"Prompt": "p", "Task": "t", "Session": "t-1", "ConflictFile": "c"})
	}
	if err != nil {
		d.problem(f, "%v (the agent may use {{.Prompt}}, {{.Task}}, {{.Session}}, {{.ConflictFile}})", err)
	}
}

func planDecodeIntent(d *planDecoder, f string, v any, t *Task) {
	globs, ok := d.strs(f, v)
	for i, g := range globs {
		if err := policies.ValidIntent(g); err != nil {
			d.problem(fmt.Sprintf("%s[%d]", f, i), "%v", err)
		}
	}
	if ok {
		t.Intent = globs
	}
}

func planDecodePorts(d *planDecoder, f string, v any, t *Task) {
	ports, _ := d.ints(f, v)
	first := map[int64]int{}
	for i, p := range ports {
		el := fmt.Sprintf("%s[%d]", f, i)
		switch j, dup := first[p]; {
		case p < 1 || p > 65535:
			d.problem(el, "port %d: want 1-65535", p)
		case dup:
			d.problem(el, "port %d repeated (already %s[%d])", p, f, j)
		default:
			first[p] = i
			t.Ports = append(t.Ports, int(p))
		}
	}
}

// planDecodeEnv reads the gitignored files copied into the env layer; they are paths in
// the user's work tree and must not reach outside it.
func planDecodeEnv(d *planDecoder, f string, v any, t *Task) {
	files, _ := d.strs(f, v)
	for i, e := range files {
		el := fmt.Sprintf("%s[%d]", f, i)
		c := filepath.Clean(e)
		switch {
		case strings.TrimSpace(e) == "":
			d.problem(el, "empty path")
		case filepath.IsAbs(e) || c == ".." || strings.HasPrefix(c, "../"):
			d.problem(el, "%q: want a path inside the work tree, relative to it", e)
		}
		// Kept even when bad, so that index i stays element i of the plan's array.
		t.EnvFiles = append(t.EnvFiles, c)
	}
}

// decodeTable decodes the task keys of table into a planTask named field.
func (d *planDecoder) decodeTable(field string, table map[string]any) *planTask {
	pt := &planTask{field: field, set: map[string]string{}}
	d.checkKeys(field, table, planTaskKeys(), planAliases)
	for _, tf := range planTaskFields {
		v, ok := table[tf.key]
		if !ok {
			continue
		}
		f := planJoinField(field, tf.key)
		// Marked set even when the value is bad, so the default does not stand in
		// for it and hide the problem behind a second one.
		pt.set[tf.key] = f
		tf.decode(d, f, v, &pt.Task)
	}
	return pt
}

// decodeDefaults reads [defaults]; nil when the plan has none.
func (d *planDecoder) decodeDefaults() *planTask {
	v, ok := d.root["defaults"]
	if !ok {
		return nil
	}
	table, ok := v.(map[string]any)
	if !ok {
		d.problem("defaults", "want a table [defaults], got %s", planDescribe(v))
		return nil
	}
	def := d.decodeTable("defaults", table)
	if _, ok := def.set["id"]; ok {
		d.problem("defaults.id", "ids are per task: set id in each [[task]]")
		delete(def.set, "id")
	}
	return def
}

// decodeTasks reads the [[task]] tables and applies def (may be nil) where a task
// leaves a key out.
func (d *planDecoder) decodeTasks(def *planTask) []*planTask {
	v, ok := d.root["task"]
	if !ok {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		d.problem("task", "want [[task]] tables, got %s", planDescribe(v))
		return nil
	}
	var tasks []*planTask
	for i, e := range list {
		field := fmt.Sprintf("task[%d]", i)
		table, ok := e.(map[string]any)
		if !ok {
			d.problem(field, "want a table, got %s", planDescribe(e))
			continue
		}
		t := d.decodeTable(field, table)
		_, ownAgent := t.set["agent"]
		_, ownPrompt := t.set["prompt"]
		if def != nil {
			for _, tf := range planTaskFields {
				_, mine := t.set[tf.key]
				from, theirs := def.set[tf.key]
				if !mine && theirs {
					tf.inherit(&t.Task, &def.Task)
					t.set[tf.key] = from
				}
			}
		}
		switch {
		case t.Agent == "" && t.set["agent"] == "":
			d.problem(field+".agent", "no agent: set agent on the task or in [defaults]")
		case !ownAgent && !ownPrompt:
			d.problem(field+".prompt", "missing: the default agent needs a prompt (or give the task its own agent)")
		}
		if t.Lifetime == "" {
			t.Lifetime = OneShot
		}
		if t.Network == "" {
			t.Network = "private"
		}
		tasks = append(tasks, t)
	}
	return tasks
}

// decodeFleet reads [fleet] with its defaults filled in. Repo is left as written;
// checkRepo resolves it.
func (d *planDecoder) decodeFleet(cfg planConfig) Fleet {
	f := Fleet{
		Repo: ".", BaseRef: "HEAD", HeadRef: "corral/head", Lane: DefaultLane(),
		Admission: Admission{MaxRunning: 4, CPU: cfg.hostCPU, Memory: cfg.planHostMemory, Interval: time.Second, Overlap: "warn"},
	}
	v, ok := d.root["fleet"]
	if !ok {
		return f
	}
	table, ok := v.(map[string]any)
	if !ok {
		d.problem("fleet", "want a table [fleet], got %s", planDescribe(v))
		return f
	}
	d.checkKeys("fleet", table, planFleetKeys, planAliases)
	str := func(key string, dst *string) {
		if v, ok := table[key]; ok {
			if s, ok := d.str("fleet."+key, v); ok && s != "" {
				*dst = s
			} else if ok {
				d.problem("fleet."+key, "empty")
			}
		}
	}
	str("name", &f.Name)
	// The name names the fleet's database file under .git/corral/fleets/.
	if f.Name == "." || f.Name == ".." || strings.ContainsAny(f.Name, "/\\\x00") {
		d.problem("fleet.name", "%q: want a name without / (it names the fleet's database file)", f.Name)
	}
	str("repo", &f.Repo)
	str("base", &f.BaseRef)
	str("head", &f.HeadRef)
	str("test", &f.Test)
	a := &f.Admission
	if v, ok := table["max_running"]; ok {
		if n, ok := d.integer("fleet.max_running", v); ok && n < 1 {
			d.problem("fleet.max_running", "%d: want at least 1 session at once", n)
		} else if ok {
			a.MaxRunning = int(n)
		}
	}
	if v, ok := table["cpu"]; ok {
		if n, ok := d.number("fleet.cpu", v); ok && n <= 0 {
			d.problem("fleet.cpu", "%v cores: want more than 0", n)
		} else if ok {
			a.CPU = n
		}
	}
	if v, ok := table["memory"]; ok {
		if n, ok := d.size("fleet.memory", v); ok && n == 0 {
			d.problem("fleet.memory", "0 bytes: want more than 0")
		} else if ok {
			a.Memory = n
		}
	}
	if v, ok := table["launch_interval"]; ok {
		if t, ok := d.duration("fleet.launch_interval", v); ok && t < 0 {
			d.problem("fleet.launch_interval", "%v: want 0 (no spacing) or more", t)
		} else if ok {
			a.Interval = t
		}
	}
	if v, ok := table["overlap"]; ok {
		if s, ok := d.oneOf("fleet.overlap", v, "warn", "serialize"); ok {
			a.Overlap = s
		}
	}
	d.decodeLane(table, &f)
	return f
}

// checkTopKeys reports unknown top-level keys; a task add may hold [[task]] only.
func (d *planDecoder) checkTopKeys(adding bool) {
	if !adding {
		d.checkKeys("", d.root, planTopKeys, planAliases)
		return
	}
	for _, k := range planSortedKeys(d.root) {
		if k != "task" {
			d.problem(planJoinField("", k), "only [[task]] tables can be added to a running fleet")
		}
	}
}
