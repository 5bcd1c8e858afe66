package supervisor_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"corral/supervisor"
)

// planShopFiles is the scratch repository the example plans are checked against.
var planShopFiles = map[string]string{
	"go.mod":                      "module shop\n",
	"pricing/shipping.go":         "package pricing\n\nconst FreeShipping = 50\n",
	"pricing/shipping_test.go":    "package pricing\n",
	"checkout/summary.go":         "package checkout\n",
	"web/index.html":              "<h1>shop</h1>\n",
	"web/templates/checkout.html": "<p>total</p>\n",
	"docs/pricing.md":             "# Pricing\n",
	"load/README.md":              "load scripts\n",
	"CHANGELOG.md":                "# Changes\n",
	".gitignore":                  ".env\n",
}

// Host limits fixed for the tests, so the fleet's default budget does not depend on
// the machine running them.
const (
	planHostCPU    = 8
	planHostMemory = 16 << 30
)

// newPlanRepo makes a git repository on branch main with files committed, and an
// untracked, gitignored .env beside them.
func newPlanRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	planGit(t, dir, "init", "-q", "-b", "main")
	planGit(t, dir, "add", "-A")
	planGit(t, dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "shop")
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func planGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func readPlanFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "plans", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// parseExample checks a testdata plan as if it sat at the root of repo.
func parseExample(t *testing.T, name, repo string) (*supervisor.Plan, error) {
	t.Helper()
	return supervisor.ParsePlanBytes("plans/"+name, readPlanFile(t, name),
		supervisor.WithPlanDir(repo), supervisor.WithHostLimits(planHostCPU, planHostMemory))
}

func planTask(t *testing.T, p *supervisor.Plan, id string) supervisor.Task {
	t.Helper()
	for _, task := range p.Tasks {
		if task.ID == id {
			return task
		}
	}
	t.Fatalf("plan has no task %q", id)
	return supervisor.Task{}
}

func TestPlanMinimalFromDesign(t *testing.T) {
	repo := newPlanRepo(t, planShopFiles)
	p, err := parseExample(t, "minimal.toml", repo)
	if err != nil {
		t.Fatalf("DESIGN.md's minimal plan: %v", err)
	}
	f := p.Fleet
	if f.BaseRef != "main" || f.Base != planGit(t, repo, "rev-parse", "main") || f.HeadRef != "corral/head" {
		t.Errorf("fleet base/head = %q %q %q", f.BaseRef, f.Base, f.HeadRef)
	}
	if want, _ := filepath.EvalSymlinks(repo); f.Repo != want || f.Name != filepath.Base(want) {
		t.Errorf("fleet repo %q name %q, want %q (repo = \".\" is the plan's directory)", f.Repo, f.Name, want)
	}
	if len(p.Tasks) != 2 {
		t.Fatalf("tasks = %d, want 2", len(p.Tasks))
	}
	pricing := planTask(t, p, "pricing")
	if pricing.Agent != `claude -p "$CORRAL_PROMPT"` || pricing.Lifetime != supervisor.OneShot || pricing.Retries != 2 ||
		!slices.Equal(pricing.Intent, []string{"pricing/**"}) || pricing.Prompt == "" {
		t.Errorf("pricing = %+v, want the defaults applied", pricing)
	}
	preview := planTask(t, p, "preview")
	if preview.Agent != "python3 -m http.server 4173" || preview.Lifetime != supervisor.Persistent ||
		!slices.Equal(preview.Ports, []int{4173}) || preview.Retries != 2 || preview.Network != "private" {
		t.Errorf("preview = %+v, want its own agent and lifetime, the default retries", preview)
	}
}

func TestPlanShop(t *testing.T) {
	repo := newPlanRepo(t, planShopFiles)
	p, err := parseExample(t, "shop.toml", repo)
	if err != nil {
		t.Fatalf("shop.toml: %v", err)
	}
	want := supervisor.Admission{MaxRunning: 3, CPU: 6, Memory: 12 << 30, Interval: 2 * time.Second, Overlap: "serialize"}
	if p.Fleet.Admission != want || p.Fleet.Name != "shop" || p.Fleet.Test != "go test ./..." {
		t.Errorf("fleet = %+v, want admission %+v", p.Fleet, want)
	}
	var ids []string
	for _, task := range p.Tasks {
		ids = append(ids, task.ID)
	}
	if !slices.Equal(ids, []string{"pricing", "checkout-tax", "docs", "load-test", "preview"}) {
		t.Errorf("task ids = %v, in plan order", ids)
	}
	pricing := planTask(t, p, "pricing")
	if pricing.CPU != 1 || pricing.Memory != 2<<30 || pricing.Pids != 512 || pricing.Priority != 10 ||
		!slices.Equal(pricing.EnvFiles, []string{".env"}) {
		t.Errorf("pricing = %+v, want the defaults' budget and env", pricing)
	}
	docs := planTask(t, p, "docs")
	if docs.Retries != 0 || docs.Priority != -5 || !slices.Equal(docs.After, []string{"pricing", "checkout-tax"}) ||
		!strings.Contains(docs.Agent, "{{.Task}}") {
		t.Errorf("docs = %+v", docs)
	}
	preview := planTask(t, p, "preview")
	if preview.CPU != 0.5 || preview.Memory != 256<<20 || preview.Prompt != "" || preview.Lifetime != supervisor.Persistent {
		t.Errorf("preview = %+v", preview)
	}
	if l := p.Line("task[4].ports"); l != 63 {
		t.Errorf("Line(task[4].ports) = %d, want 63", l)
	}
}

// TestPlanDefaults checks a plan of tasks alone runs in the plan's repository at its
// checked-out revision, under the documented admission defaults.
func TestPlanDefaults(t *testing.T) {
	repo := newPlanRepo(t, planShopFiles)
	data := []byte("[[task]]\nid = \"x\"\nagent = \"true\"\n")
	p, err := supervisor.ParsePlanBytes(filepath.Join(repo, "p.toml"), data, supervisor.WithHostLimits(planHostCPU, planHostMemory))
	if err != nil {
		t.Fatal(err)
	}
	want := supervisor.Admission{MaxRunning: 4, CPU: planHostCPU, Memory: planHostMemory, Interval: time.Second, Overlap: "warn"}
	if p.Fleet.Admission != want || p.Fleet.BaseRef != "HEAD" || p.Fleet.HeadRef != "corral/head" {
		t.Errorf("fleet = %+v, want the defaults", p.Fleet)
	}
	if task := p.Tasks[0]; task.Lifetime != supervisor.OneShot || task.Network != "private" || task.Retries != 0 {
		t.Errorf("task = %+v, want one-shot, private, no retries", task)
	}
}

// TestPlanFile reads a plan from a subdirectory: repo resolves from the file's place.
func TestPlanFile(t *testing.T) {
	repo := newPlanRepo(t, planShopFiles)
	data := strings.Replace(string(readPlanFile(t, "shop.toml")), `repo = "."`, `repo = ".."`, 1)
	path := filepath.Join(repo, "plans", "shop.toml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := supervisor.ParsePlan(path)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.EvalSymlinks(repo); p.Fleet.Repo != want || p.Fleet.Plan != path {
		t.Errorf("repo %q plan %q, want %q and %q", p.Fleet.Repo, p.Fleet.Plan, want, path)
	}
	if _, err := supervisor.ParsePlan(filepath.Join(repo, "missing.toml")); err == nil || !strings.Contains(err.Error(), "missing.toml") {
		t.Errorf("missing plan: err = %v, want it named", err)
	}
}

// TestPlanBroken checks every broken example: each problem a "# want: FIELD: TEXT"
// comment announces is reported at that comment's line, and nothing else is.
func TestPlanBroken(t *testing.T) {
	repo := newPlanRepo(t, planShopFiles)
	for _, name := range []string{
		"broken-syntax.toml", "broken-keys.toml", "broken-values.toml", "broken-tasks.toml",
		"broken-agent.toml", "broken-repo.toml", "broken-base.toml", "broken-intent.toml", "broken-lane.toml",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseExample(t, name, repo)
			checkPlanWants(t, "plans/"+name, readPlanFile(t, name), err)
		})
	}
}

func TestPlanHeadCheckedOut(t *testing.T) {
	repo := newPlanRepo(t, planShopFiles)
	planGit(t, repo, "checkout", "-q", "-b", "work")
	data := []byte("[fleet]\nbase = \"main\"\nhead = \"work\"  # want: fleet.head: \"work\" is checked out in\n[[task]]\nid = \"x\"\nagent = \"true\"\n")
	_, err := supervisor.ParsePlanBytes("p.toml", data, supervisor.WithPlanDir(repo))
	checkPlanWants(t, "p.toml", data, err)
}

func TestPlanTaskAdd(t *testing.T) {
	repo := newPlanRepo(t, planShopFiles)
	plan, err := parseExample(t, "shop.toml", repo)
	if err != nil {
		t.Fatal(err)
	}

	good := []byte("[[task]]\nid = \"seo\"\nprompt = \"Add meta tags\"\nintent = [\"web/**\"]\nafter = [\"pricing\"]\n")
	added, err := supervisor.ParseTaskAdd("add.toml", good, plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 1 || added[0].CPU != 1 || added[0].Memory != 2<<30 || added[0].Retries != 2 ||
		added[0].Agent != `claude -p "$CORRAL_PROMPT"` {
		t.Errorf("added = %+v, want the plan's defaults applied", added)
	}

	bad := []byte(`[fleet]                      # want: fleet: only [[task]] tables can be added
base = "x"

[[task]]
id = "docs"                  # want: task[0].id: "docs" already exists in the fleet
prompt = "Again"

[[task]]
id = "seo"
prompt = "Add meta tags"
after = ["pricing", "sitemap"]   # want: task[1].after: dependency cycle: seo -> sitemap -> seo

[[task]]
id = "sitemap"
prompt = "Write a sitemap"
after = ["seo", "nope"]      # want: task[2].after[1]: unknown task "nope"
intent = ["sitemaps/**"]     # want: task[2].intent[0]: glob "sitemaps/**" matches no file in base main
memory = "64G"               # want: task[2].memory: 64.0G exceeds the fleet's budget of 12.0G
`)
	_, err = supervisor.ParseTaskAdd("add.toml", []byte(bad), plan)
	checkPlanWants(t, "add.toml", bad, err)

	empty := []byte("# nothing\n")
	_, err = supervisor.ParseTaskAdd("empty.toml", empty, plan)
	if err == nil || !strings.Contains(err.Error(), "empty.toml:1: task: no [[task]] table to add") {
		t.Errorf("empty add: err = %v", err)
	}
}

// TestPlanErrorFormat checks the shape other tools parse: FILE:LINE: FIELD: message,
// one problem per line, in line order.
func TestPlanErrorFormat(t *testing.T) {
	repo := newPlanRepo(t, planShopFiles)
	_, err := parseExample(t, "broken-values.toml", repo)
	var pe *supervisor.PlanError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v (%T), want a *PlanError", err, err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(pe.Problems) {
		t.Fatalf("%d lines for %d problems", len(lines), len(pe.Problems))
	}
	if lines[0] != `plans/broken-values.toml:6: fleet.name: "my/shop": want a name without / (it names the fleet's database file)` {
		t.Errorf("first line = %q", lines[0])
	}
	shape := regexp.MustCompile(`^plans/broken-values\.toml:\d+: [a-z_\[\]0-9.]+: .+$`)
	last := 0
	for i, l := range lines {
		if !shape.MatchString(l) {
			t.Errorf("line %q is not FILE:LINE: FIELD: message", l)
		}
		if pe.Problems[i].Line < last {
			t.Errorf("problems out of line order at %q", l)
		}
		last = pe.Problems[i].Line
	}
	if !strings.Contains(err.Error(), `plans/broken-values.toml:23: task[0].memory: size "2X": want a number with an optional unit (K, M, G, T)`) {
		t.Errorf("missing the memory problem:\n%v", err)
	}
}

// planWant is a problem a plan's "# want: FIELD: TEXT" comment expects on its line.
type planWant struct {
	line        int
	field, text string
	seen        bool
}

func planWants(data []byte) []*planWant {
	var wants []*planWant
	for i, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue // prose about want comments, not one
		}
		parts := strings.Split(l, "# want: ")
		for _, w := range parts[1:] {
			field, text, _ := strings.Cut(strings.TrimSpace(w), ": ")
			wants = append(wants, &planWant{line: i + 1, field: field, text: text})
		}
	}
	return wants
}

// checkPlanWants matches err's problems against data's want comments: each problem
// must name file, its line and its field as announced, and every want must be met.
func checkPlanWants(t *testing.T, file string, data []byte, err error) {
	t.Helper()
	wants := planWants(data)
	var pe *supervisor.PlanError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v (%T), want a *PlanError", err, err)
	}
	for _, p := range pe.Problems {
		if p.File != file {
			t.Errorf("%v: file %q, want %q", p, p.File, file)
		}
		matched := false
		for _, w := range wants {
			if w.line == p.Line && w.field == p.Field && strings.Contains(p.Msg, w.text) {
				w.seen, matched = true, true
			}
		}
		if !matched {
			t.Errorf("unexpected problem: %v", p)
		}
	}
	for _, w := range wants {
		if !w.seen {
			t.Errorf("%s:%d: want a problem %s: %q; got none there\nall problems:\n%v", file, w.line, w.field, w.text, err)
		}
	}
}

// TestPlanInlineTables checks lines are found in every TOML spelling of a plan:
// dotted keys, inline tables in an array, and a table where an array is wanted.
func TestPlanInlineTables(t *testing.T) {
	repo := newPlanRepo(t, planShopFiles)
	data := []byte(`fleet.base = "main"
fleet.cpu = "lots"   # want: fleet.cpu: want a number, got string "lots"
task = [
  { id = "a", agent = "true" },
  { id = "b", agent = "true", after = ["zz"] },   # want: task[1].after[0]: unknown task "zz"
  { id = "c", agent = "true", memroy = "1G" },    # want: task[2].memroy: unknown key (did you mean "memory"?)
]
`)
	_, err := supervisor.ParsePlanBytes("p.toml", data, supervisor.WithPlanDir(repo))
	checkPlanWants(t, "p.toml", data, err)

	data = []byte("[fleet]\nbase = \"main\"\n[task]   # want: task: want [[task]] tables, got a table\nid = \"a\"\n")
	_, err = supervisor.ParsePlanBytes("p.toml", data, supervisor.WithPlanDir(repo))
	checkPlanWants(t, "p.toml", data, err)
}
