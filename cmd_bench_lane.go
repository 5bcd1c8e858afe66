package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"text/tabwriter"
	"time"

	"corral/sandbox"
	"corral/store"
	"corral/supervisor"
)

// benchLane is `corral bench lane`: the integration lane on a scripted workload with a
// known failure rate, run twice on the same host — batching with bisection (the
// lane's default) against testing every head on its own — and compared on
// publishes landed per hour and lane runs per publish.
func benchLane(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench lane", stderr)
	tasks := fs.Int("tasks", 24, "scripted tasks, each publishing one change")
	failEvery := fs.Int("fail-every", 8, "every Nth task breaks the suite (a known failure rate of 1/N)")
	testTime := fs.Duration("test-time", 400*time.Millisecond, "how long the sample suite takes (it sleeps this long)")
	agentTime := fs.Duration("agent-time", 200*time.Millisecond, "how long each scripted agent works")
	running := fs.Int("running", 4, "sessions at once")
	scratch := fs.String("scratch", defaultScratch(), "directory for the bench repositories")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *tasks < 2 || *failEvery < 1 {
		return badInput("bench lane: want --tasks ≥ 2 and --fail-every ≥ 1")
	}
	if err := os.MkdirAll(*scratch, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "corral bench lane — %d tasks, every %dth breaks the suite (failure rate %.1f%%), suite %s, agents %s, %d at once; %s\n\n",
		*tasks, *failEvery, 100/float64(*failEvery), *testTime, *agentTime, *running, hostLine())
	var results []laneBenchResult
	for _, every := range []bool{false, true} {
		r, err := laneBenchRun(*scratch, *tasks, *failEvery, *testTime, *agentTime, *running, every)
		if err != nil {
			return err
		}
		results = append(results, r)
		fmt.Fprintf(stderr, "bench: %s done in %s\n", r.name, r.wall.Round(time.Millisecond))
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\twall\tlanded\tof them repairs\tlanded/hour\tlane runs\texecutions\truns/publish\tculprits named\tbreakers among them\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%d\t%d\t%.2f\t%d\t%d\t\n", r.name, r.wall.Round(time.Millisecond), r.landed, r.repairs,
			r.perHour(), r.runs, r.execs, r.runsPerPublish(), r.culprits, r.right)
	}
	tw.Flush()
	b, e := results[0], results[1]
	fmt.Fprintf(stdout, "\nbatching+bisect vs every head: %.2f× the publishes landed per hour, %.2f× fewer lane runs per publish (%.2f vs %.2f)\n",
		b.perHour()/e.perHour(), e.runsPerPublish()/b.runsPerPublish(), b.runsPerPublish(), e.runsPerPublish())
	return nil
}

type laneBenchResult struct {
	name                     string
	wall                     time.Duration
	landed, repairs          int
	runs, execs              int
	culprits, right, breaker int
}

func (r laneBenchResult) perHour() float64 { return float64(r.landed) / r.wall.Hours() }
func (r laneBenchResult) runsPerPublish() float64 {
	return float64(r.runs) / float64(max(r.landed, 1))
}

// laneBenchAgent writes its task's value. Told of a red suite ($CORRAL_FAILURE), it
// resets the values the failing output names — the repair a model would make from it.
const laneBenchAgent = `sleep "$BENCH_AGENT_TIME"
mkdir -p lib
if [ -n "$CORRAL_FAILURE" ]; then
  for f in $(sed -n 's/^FAIL: \(lib\/[^ ]*\) is over 5.*/\1/p' "$CORRAL_FAILURE"); do echo 1 > "$f"; done
  exit 0
fi
echo "${VALUE:-1}" > "lib/$CORRAL_TASK.txt"`

// laneBenchSuite fails when any value is over 5, naming each one.
const laneBenchSuite = `sleep "$1"
rc=0
for f in lib/*.txt; do
  [ -e "$f" ] || continue
  if [ "$(cat "$f")" -gt 5 ]; then echo "FAIL: $f is over 5"; rc=1; fi
done
[ $rc = 0 ] && echo ok
exit $rc`

// laneBenchRun runs the workload once in a fresh repository and fleet.
func laneBenchRun(scratch string, tasks, failEvery int, testTime, agentTime time.Duration, running int, every bool) (laneBenchResult, error) {
	res := laneBenchResult{name: "batch+bisect"}
	if every {
		res.name = "every head"
	}
	dir, err := os.MkdirTemp(scratch, "corral-bench-lane-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	script := `set -e; cd "$1"; git init -q -b main; mkdir lib; echo 1 > lib/base.txt
printf '%s\n' "$2" > agent.sh; printf '%s\n' "$3" > test.sh; git add -A
GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@c GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@c git commit -q -m init`
	if out, err := exec.Command("/bin/sh", "-c", script, "sh", dir, laneBenchAgent, laneBenchSuite).CombinedOutput(); err != nil {
		return res, fmt.Errorf("bench repo: %v: %s", err, out)
	}
	repo, err := sandbox.OpenRepo(dir)
	if err != nil {
		return res, err
	}
	os.MkdirAll(repo.StateDir, 0o700)
	db, err := store.Open(filepath.Join(repo.StateDir, "fleet.db"))
	if err != nil {
		return res, err
	}
	defer db.Close()
	lane := supervisor.DefaultLane()
	lane.EveryHead = every
	sv, err := supervisor.New(supervisor.Config{Repo: repo, Store: db, Fleet: supervisor.Fleet{Name: "bench", BaseRef: "main",
		Test: fmt.Sprintf("sh test.sh %.3f", testTime.Seconds()), Lane: lane,
		Admission: supervisor.Admission{MaxRunning: running, Overlap: "warn"}}})
	if err != nil {
		return res, err
	}
	var ts []supervisor.Task
	breakers := map[string]bool{}
	for i := 1; i <= tasks; i++ {
		id := fmt.Sprintf("t%02d", i)
		value := 1
		if i%failEvery == 0 {
			value, breakers[id] = 9, true
		}
		ts = append(ts, supervisor.Task{ID: id, Prompt: id, Lifetime: supervisor.OneShot, Retries: 1,
			Agent: fmt.Sprintf("BENCH_AGENT_TIME=%.3f VALUE=%d sh agent.sh", agentTime.Seconds(), value)})
	}
	res.breaker = len(breakers)
	if err := sv.AddTasks(ts...); err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	t0 := time.Now()
	if _, err := sv.RunUntilDone(ctx); err != nil {
		return res, err
	}
	res.wall = time.Since(t0)
	return res, db.View(func(r supervisor.Reader) error {
		pubs, err := r.Publishes()
		if err != nil {
			return err
		}
		byID := map[int64]supervisor.Publish{}
		for _, p := range pubs {
			byID[p.ID] = p
			if p.NewHead != "" {
				res.landed++
				if len(p.Task) > 4 && p.Task[:4] == "fix-" {
					res.repairs++
				}
			}
		}
		runs, err := r.LaneRuns()
		if err != nil {
			return err
		}
		named := map[int64]bool{}
		for _, run := range runs {
			if run.Outcome == supervisor.LaneSkipped {
				continue
			}
			res.runs++
			res.execs += run.Runs
			if run.Kind == supervisor.LaneKindHead && run.Outcome == supervisor.LaneRed && run.Culprit != 0 && !named[run.Culprit] {
				named[run.Culprit] = true
				res.culprits++
				if breakers[byID[run.Culprit].Task] {
					res.right++
				}
			}
		}
		return nil
	})
}
