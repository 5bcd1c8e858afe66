package supervisor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"corral/policies"
	"corral/supervisor"
	"corral/supervisor/gateway"
)

// testClock is the supervisor's clock: real time plus an offset the test moves, so a
// quota window can reset without waiting hours.
type testClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// gwFixture is a fixture with a scripted upstream (testdata/upstream) on loopback
// and a gateway plan pointing both kinds at it; the host key is in the environment.
type gwFixture struct {
	*fixture
	up    *gateway.ScriptedUpstream
	url   string
	plan  *supervisor.GatewayPlan
	clock *testClock
}

const hostKey = "sk-host-secret-never-in-a-sandbox"

func newGatewayFixture(t *testing.T) *gwFixture {
	f := newFixture(t)
	t.Setenv("CORRAL_TEST_KEY", hostKey)
	up := &gateway.ScriptedUpstream{Dir: "../testdata/upstream"}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	plan := &supervisor.GatewayPlan{
		Upstreams: []supervisor.GatewayUpstream{
			{Kind: "anthropic", URL: srv.URL, KeyEnv: "CORRAL_TEST_KEY"},
			{Kind: "openai", URL: srv.URL, KeyEnv: "CORRAL_TEST_KEY"},
		},
		Allow:  []string{"127.0.0.1"},
		Prices: map[string]policies.Price{"claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}},
	}
	return &gwFixture{fixture: f, up: up, url: srv.URL, plan: plan, clock: &testClock{}}
}

func (f *gwFixture) supervisor(adm supervisor.Admission) *supervisor.Supervisor {
	f.t.Helper()
	sv, err := supervisor.New(supervisor.Config{
		Repo: f.repo, Store: f.store, SampleEvery: 100 * time.Millisecond, Now: f.clock.now, Gateway: f.plan,
		Fleet: supervisor.Fleet{Name: "test", BaseRef: "main", HeadRef: "corral/head", Admission: adm},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return sv
}

// start runs the supervisor until the test ends.
func start(t *testing.T, sv *supervisor.Supervisor) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sv.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitState polls the supervisor's state until cond holds.
func waitState(t *testing.T, sv *supervisor.Supervisor, what string, cond func(supervisor.FleetState) bool) supervisor.FleetState {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := sv.State()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; tasks: %+v", what, st.Tasks)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func taskState(st supervisor.FleetState, id string) supervisor.Task {
	for _, t := range st.Tasks {
		if t.ID == id {
			return t
		}
	}
	return supervisor.Task{}
}

func (f *gwFixture) calls(session string) []supervisor.ModelCall {
	var cs []supervisor.ModelCall
	f.store.View(func(r supervisor.Reader) error {
		var err error
		cs, err = r.ModelCalls(session)
		return err
	})
	return cs
}

// resetFinishes moves the clock past the quota window and waits for task, paused by
// the quota, to resume and land all its model calls' answers.
func (f *gwFixture) resetFinishes(t *testing.T, sv *supervisor.Supervisor, task string, calls int) {
	t.Helper()
	f.clock.advance(time.Hour + time.Second)
	waitState(t, sv, task+" done after the reset", func(st supervisor.FleetState) bool {
		return taskState(st, task).State == supervisor.TaskDone
	})
	got := git(t, f.repo.WorkTree, "show", "corral/head:work/"+task+"/result.txt")
	if !strings.Contains(got, fmt.Sprintf("calls=%d", calls)) {
		t.Errorf("%s lost work:\n%s", task, got)
	}
}

func reasonOf(e supervisor.Event) string {
	var d struct{ Reason string }
	json.Unmarshal(e.Data, &d)
	return d.Reason
}

// A real session in its own netns reaches both upstream shapes through its gateway,
// streamed and not; every call is metered exactly, priced, stored and announced; the
// host's key reaches the upstream and never the sandbox.
func TestGatewayMetersRealSession(t *testing.T) {
	f := newGatewayFixture(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 1})
	shapes := "anthropic anthropic-stream openai-chat openai-chat-stream openai-responses openai-responses-stream"
	if err := sv.AddTasks(agentTask("talk", "model.sh", "MODEL_SHAPE='"+shapes+"'")); err != nil {
		t.Fatal(err)
	}
	if !runToEnd(t, sv, 60*time.Second) {
		t.Fatalf("not done: %+v", sv.State().Tasks)
	}
	got := git(t, f.repo.WorkTree, "show", "corral/head:work/talk/result.txt")
	if !strings.Contains(got, "calls=1 key=corral-gateway-injects-the-key") || strings.Contains(got, hostKey) {
		t.Errorf("result:\n%s", got)
	}
	want := []struct {
		model                  string
		in, out, cread, cwrite int64
		streamed               bool
	}{
		{"claude-sonnet-4-5", 21, 17, 100, 40, false},
		{"claude-sonnet-4-5", 25, 31, 200, 50, true},
		{"gpt-4.1", 30, 12, 20, 0, false},
		{"gpt-4.1", 44, 9, 64, 0, true},
		{"gpt-5", 70, 33, 30, 0, false},
		{"gpt-5", 12, 19, 0, 0, true},
	}
	calls := f.calls("talk-1")
	if len(calls) != len(want) {
		t.Fatalf("%d calls metered, want %d: %+v", len(calls), len(want), calls)
	}
	var tokens int64
	for i, w := range want {
		c := calls[i]
		if c.Task != "talk" || c.Model != w.model || c.Input != w.in || c.Output != w.out || c.CacheRead != w.cread ||
			c.CacheWrite != w.cwrite || c.Streamed != w.streamed || c.Status != 200 {
			t.Errorf("call %d: %+v, want %+v", i, c, w)
		}
		tokens += c.Tokens()
	}
	// 21×3 + 17×15 + 100×0.3 + 40×3.75 per million for the first call.
	if c := calls[0].Cost; c < 0.000497999 || c > 0.000498001 {
		t.Errorf("first call cost %v, want 0.000498", c)
	}
	if calls[2].Cost != 0 {
		t.Errorf("an unpriced model cost %v", calls[2].Cost)
	}
	st := sv.State()
	if st.Spend.Calls != 6 || st.Spend.Tokens() != tokens || st.TaskSpend["talk"].Tokens() != tokens || st.SessionSpend["talk-1"].Calls != 6 {
		t.Errorf("spend %+v, task %+v", st.Spend, st.TaskSpend)
	}
	if st.CostPerAccepted != st.Spend.Cost || st.Spend.Cost == 0 {
		t.Errorf("cost per accepted task %v, spend %v", st.CostPerAccepted, st.Spend.Cost)
	}
	if n := len(f.eventsOf(supervisor.EvModelCall)); n != 6 {
		t.Errorf("%d model.call events", n)
	}
	for _, r := range f.up.Requests() {
		if k, a := r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"); k != hostKey && a != "Bearer "+hostKey {
			t.Errorf("upstream %s saw key %q authorization %q", r.Path, k, a)
		}
	}
}

// The egress proxy refuses a host outside the allowlist, logging it, and lets an
// allowed one through.
func TestGatewayEgressAllowlist(t *testing.T) {
	f := newGatewayFixture(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 1})
	script := `mkdir -p work; curl -s -o /dev/null -w 'evil %{http_connect}\n' https://evil.example.com/ > work/egress.txt; ` +
		`curl -s --noproxy '' -x "$HTTP_PROXY" -d '{}' ` + f.url + `/v1/messages >> work/egress.txt; true`
	if err := sv.AddTasks(supervisor.Task{ID: "egress", Prompt: "p", Agent: script}); err != nil {
		t.Fatal(err)
	}
	if !runToEnd(t, sv, 60*time.Second) {
		t.Fatalf("not done: %+v", sv.State().Tasks)
	}
	got := git(t, f.repo.WorkTree, "show", "corral/head:work/egress.txt")
	if !strings.Contains(got, "evil 403") || !strings.Contains(got, "scripted upstream") {
		t.Errorf("egress results:\n%s", got)
	}
	refused := f.eventsOf(supervisor.EvEgressRefused)
	if len(refused) != 1 || refused[0].Session != "egress-1" || !strings.Contains(string(refused[0].Data), "evil.example.com") {
		t.Errorf("egress.refused events: %+v", refused)
	}
}

// Past the soft threshold no session is admitted; the window's reset admits again.
func TestQuotaSoftStopsAdmission(t *testing.T) {
	f := newGatewayFixture(t)
	f.plan.Quota = &policies.Quota{Metric: "tokens", Limit: 300, Window: time.Hour, Soft: 0.5, Hard: 0.95}
	sv := f.supervisor(supervisor.Admission{MaxRunning: 1})
	first, second := agentTask("first", "model.sh"), agentTask("second", "edit.sh")
	first.Priority = 2
	if err := sv.AddTasks(first, second); err != nil {
		t.Fatal(err)
	}
	start(t, sv)
	st := waitState(t, sv, "second to wait for the quota", func(st supervisor.FleetState) bool {
		return strings.HasPrefix(taskState(st, "second").Reason, "quota:") && taskState(st, "first").State == supervisor.TaskDone
	})
	// 178 tokens of 300.
	if r := taskState(st, "second").Reason; !strings.Contains(r, "fleet at 59% of 1h window") || taskState(st, "first").State != supervisor.TaskDone {
		t.Errorf("second: %q; first %s", r, taskState(st, "first").State)
	}
	if st.Quota == nil || st.Quota.Level != "soft" || st.Quota.Used != 178 {
		t.Errorf("quota view %+v", st.Quota)
	}
	if soft := f.eventsOf(supervisor.EvQuotaSoft); len(soft) != 1 || !strings.Contains(reasonOf(soft[0]), "admission stopped: fleet at 59%") {
		t.Errorf("quota.soft events %+v", soft)
	}
	f.clock.advance(time.Hour + time.Second)
	waitState(t, sv, "second to run after the reset", func(st supervisor.FleetState) bool {
		return taskState(st, "second").State == supervisor.TaskDone
	})
}

// Past the hard threshold running sessions pause, lowest priority first: their
// requests are held at the gateway and they are frozen. At the window's reset they
// resume highest priority first, staged, and finish with nothing lost.
func TestQuotaHardPausesAndResetResumes(t *testing.T) {
	f := newGatewayFixture(t)
	// 178 tokens a call: soft after 3 calls (500), hard after 5 (800).
	f.plan.Quota = &policies.Quota{Metric: "tokens", Limit: 1000, Window: time.Hour, Soft: 0.5, Hard: 0.8}
	sv := f.supervisor(supervisor.Admission{MaxRunning: 2, Interval: 300 * time.Millisecond})
	hi, lo := agentTask("hi", "model.sh", "MODEL_CALLS=4", "AGENT_TICK=0.4"), agentTask("lo", "model.sh", "MODEL_CALLS=4", "AGENT_TICK=0.4")
	hi.Priority, lo.Priority = 5, 1
	if err := sv.AddTasks(hi, lo); err != nil {
		t.Fatal(err)
	}
	start(t, sv)
	st := waitState(t, sv, "both paused", func(st supervisor.FleetState) bool {
		return taskState(st, "hi").State == supervisor.TaskPaused && taskState(st, "lo").State == supervisor.TaskPaused
	})
	if strings.Join(st.Quota.Paused, " ") != "lo-1 hi-1" || strings.Join(st.Held, " ") != "hi-1 lo-1" {
		t.Errorf("paused %v, held %v", st.Quota.Paused, st.Held)
	}
	paused := f.eventsOf(supervisor.EvSessionPaused)
	if len(paused) != 2 || paused[0].Session != "lo-1" || paused[1].Session != "hi-1" ||
		!strings.HasPrefix(reasonOf(paused[0]), "paused lo-1: fleet at ") || !strings.Contains(reasonOf(paused[0]), "of 1h window, resets ") {
		t.Errorf("session.paused events: %+v", paused)
	}
	if hard := f.eventsOf(supervisor.EvQuotaHard); len(hard) != 1 {
		t.Errorf("quota.hard events %+v", hard)
	}
	before := len(f.calls(""))
	f.clock.advance(time.Hour + time.Second)
	waitState(t, sv, "both done", func(st supervisor.FleetState) bool {
		return taskState(st, "hi").State == supervisor.TaskDone && taskState(st, "lo").State == supervisor.TaskDone
	})
	resumed := f.eventsOf(supervisor.EvSessionResumed)
	if len(resumed) != 2 || resumed[0].Session != "hi-1" || resumed[1].Session != "lo-1" {
		t.Errorf("session.resumed events: %+v", resumed)
	} else if gap := resumed[1].Time.Sub(resumed[0].Time); gap < 250*time.Millisecond {
		t.Errorf("resumes %s apart; the launch interval stages them 300ms apart", gap)
	}
	if len(f.eventsOf(supervisor.EvQuotaReset)) != 1 {
		t.Errorf("no quota.reset event")
	}
	for _, task := range []string{"hi", "lo"} {
		got := git(t, f.repo.WorkTree, "show", "corral/head:work/"+task+"/result.txt")
		if !strings.Contains(got, "calls=4") || strings.Count(got, "call ") != 4 {
			t.Errorf("%s lost work:\n%s", task, got)
		}
	}
	if after := len(f.calls("")); after != 8 || before < 5 {
		t.Errorf("%d calls before the reset, %d in all; want at least 5 and 8", before, after)
	}
}

// The call that crosses the hard threshold holds the next request at once, even one
// sent the moment its answer arrives, before a busy supervisor has looked: an agent
// calling back to back makes exactly the calls that fit, then waits for the reset.
func TestQuotaHardHoldsTheNextRequestAtOnce(t *testing.T) {
	f := newGatewayFixture(t)
	supervisor.SlowLoop(t, 150*time.Millisecond)
	// 178 tokens a call: hard (500) is crossed by the third.
	f.plan.Quota = &policies.Quota{Metric: "tokens", Limit: 1000, Window: time.Hour, Soft: 0.3, Hard: 0.5}
	sv := f.supervisor(supervisor.Admission{MaxRunning: 1})
	if err := sv.AddTasks(agentTask("eager", "model.sh", "MODEL_CALLS=5")); err != nil {
		t.Fatal(err)
	}
	start(t, sv)
	waitState(t, sv, "eager paused", func(st supervisor.FleetState) bool {
		return taskState(st, "eager").State == supervisor.TaskPaused
	})
	time.Sleep(300 * time.Millisecond) // time for a request that slipped through to be metered
	if n := len(f.calls("")); n != 3 {
		t.Errorf("%d calls went out before the pause; want the 3 that reach the threshold", n)
	}
	f.resetFinishes(t, sv, "eager", 5)
}

// The lane's test sandboxes reach the network as sessions do: through the gateway's
// egress proxy, to allowed hosts only (a registry, say), the rest refused and logged.
func TestLaneTestUsesTheEgressProxy(t *testing.T) {
	f := newGatewayFixture(t)
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "pkg-ok") }))
	defer registry.Close()
	// The proxy is explicit: 127.0.0.1 is the sandbox's own loopback, so NO_PROXY names it.
	fetch := `curl -sS --fail --noproxy '' -x "$HTTP_PROXY" `
	test := fetch + registry.URL + "/pkg | grep -q pkg-ok && ! " + fetch + "http://blocked.invalid/ 2>/dev/null"
	sv, err := supervisor.New(supervisor.Config{
		Repo: f.repo, Store: f.store, SampleEvery: 100 * time.Millisecond, Now: f.clock.now, Gateway: f.plan,
		Fleet: supervisor.Fleet{Name: "test", BaseRef: "main", HeadRef: "corral/head",
			Admission: supervisor.Admission{MaxRunning: 1}, Test: test},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.AddTasks(agentTask("alpha", "edit.sh")); err != nil {
		t.Fatal(err)
	}
	if !runToEnd(t, sv, 60*time.Second) {
		t.Fatal("the task did not land")
	}
	if st := sv.State().Lane; st.Outcome != supervisor.LaneGreen {
		t.Errorf("lane %+v, want green: the test reached the registry and was refused the rest", st)
	}
	var refused []string
	for _, e := range f.eventsOf(supervisor.EvEgressRefused) {
		refused = append(refused, string(e.Data))
	}
	if len(refused) != 1 || !strings.Contains(refused[0], "blocked.invalid") {
		t.Errorf("egress.refused events %v, want the test's one attempt at blocked.invalid", refused)
	}
}

// A task over its token budget is paused into the inbox instead of burning on; the
// user's resume lets it finish.
func TestBudgetSendsTaskToInbox(t *testing.T) {
	f := newGatewayFixture(t)
	sv := f.supervisor(supervisor.Admission{MaxRunning: 1})
	task := agentTask("spender", "model.sh", "MODEL_CALLS=3", "AGENT_TICK=0.3")
	task.BudgetTokens = 100
	if err := sv.AddTasks(task); err != nil {
		t.Fatal(err)
	}
	start(t, sv)
	st := waitState(t, sv, "the task in the inbox", func(st supervisor.FleetState) bool {
		return taskState(st, "spender").State == supervisor.TaskInbox
	})
	if r := taskState(st, "spender").Reason; r != "over budget: used 178 tokens of its budget of 100" {
		t.Errorf("reason %q", r)
	}
	if len(st.Sessions) != 1 || st.Sessions[0].State != supervisor.SessionPaused {
		t.Errorf("sessions %+v", st.Sessions)
	}
	if ev := f.eventsOf(supervisor.EvBudgetExceeded); len(ev) != 1 || ev[0].Session != "spender-1" {
		t.Errorf("budget.exceeded events %+v", ev)
	}
	if n := len(f.calls("spender-1")); n >= 3 {
		t.Errorf("%d calls went out; the budget should have stopped it", n)
	}
	if err := sv.Resume("spender"); err != nil {
		t.Fatal(err)
	}
	waitState(t, sv, "the task done after resume", func(st supervisor.FleetState) bool {
		return taskState(st, "spender").State == supervisor.TaskDone
	})
	if got := git(t, f.repo.WorkTree, "show", "corral/head:work/spender/result.txt"); !strings.Contains(got, "calls=3") {
		t.Errorf("result:\n%s", got)
	}
}

// A subscription window no header reports is read by the plan's probe command; its
// samples drive the quota like the gateway's: at 97% the running session pauses, and
// the reset the probe gave resumes it.
func TestQuotaFromProbe(t *testing.T) {
	f := newGatewayFixture(t)
	dir := t.TempDir()
	util := filepath.Join(dir, "util.txt")
	os.WriteFile(util, []byte("0.10\n"), 0o644)
	f.plan.Quota = &policies.Quota{Metric: "utilization", Window: 5 * time.Hour, Soft: 0.8, Hard: 0.95}
	f.plan.Probe, f.plan.ProbeEvery, f.plan.Dir = "cat util.txt", 100*time.Millisecond, dir
	sv := f.supervisor(supervisor.Admission{MaxRunning: 1})
	if err := sv.AddTasks(agentTask("long", "model.sh", "MODEL_CALLS=8", "AGENT_TICK=0.3")); err != nil {
		t.Fatal(err)
	}
	start(t, sv)
	waitState(t, sv, "a call metered", func(st supervisor.FleetState) bool { return st.Spend.Calls > 0 })
	reset := f.clock.now().Add(time.Hour).UTC().Format(time.RFC3339)
	os.WriteFile(util, []byte("0.97 "+reset+"\n"), 0o644)
	st := waitState(t, sv, "the session paused", func(st supervisor.FleetState) bool {
		return taskState(st, "long").State == supervisor.TaskPaused
	})
	if q := st.Quota; q == nil || q.Level != "hard" || q.Used != 0.97 || q.Reset.UTC().Format(time.RFC3339) != reset {
		t.Errorf("quota view %+v", st.Quota)
	}
	if r := taskState(st, "long").Reason; !strings.HasPrefix(r, "paused long-1: fleet at 97% of 5h window, resets ") {
		t.Errorf("reason %q", r)
	}
	if len(f.eventsOf(supervisor.EvQuotaSampled)) == 0 {
		t.Error("no quota.sampled events")
	}
	os.WriteFile(util, []byte("0.05\n"), 0o644)
	f.resetFinishes(t, sv, "long", 8)
}

// When the primary's window is exhausted, the user moves the fleet to the fallback
// upstream: paused sessions resume at once and their calls go there; the window's
// reset brings the primary back.
func TestFallbackUpstreamResumesAtOnce(t *testing.T) {
	f := newGatewayFixture(t)
	fallback := &gateway.ScriptedUpstream{Dir: "../testdata/upstream"}
	fsrv := httptest.NewServer(fallback)
	defer fsrv.Close()
	f.plan.Upstreams[0].FallbackURL = fsrv.URL
	// 178 tokens a call: hard after 2 calls.
	f.plan.Quota = &policies.Quota{Metric: "tokens", Limit: 350, Window: time.Hour, Soft: 0.5, Hard: 0.9}
	sv := f.supervisor(supervisor.Admission{MaxRunning: 1})
	if err := sv.AddTasks(agentTask("busy", "model.sh", "MODEL_CALLS=5", "AGENT_TICK=0.3")); err != nil {
		t.Fatal(err)
	}
	start(t, sv)
	waitState(t, sv, "the session paused", func(st supervisor.FleetState) bool {
		return taskState(st, "busy").State == supervisor.TaskPaused
	})
	primaryCalls := len(f.up.Requests())
	if !sv.State().FallbackReady {
		t.Errorf("a plan with a fallback_url, on its primary: fallback not offered")
	}
	if err := sv.UseFallback(); err != nil {
		t.Fatal(err)
	}
	st := sv.State()
	if st.FallbackReady {
		t.Errorf("fallback still offered on the fallback upstream")
	}
	if taskState(st, "busy").State != supervisor.TaskRunning || !st.Quota.Fallback || len(st.Held) != 0 {
		t.Errorf("after the switch: task %s, quota %+v, held %v", taskState(st, "busy").State, st.Quota, st.Held)
	}
	waitState(t, sv, "the task done", func(st supervisor.FleetState) bool {
		return taskState(st, "busy").State == supervisor.TaskDone
	})
	if n := len(fallback.Requests()); n == 0 || len(f.up.Requests()) != primaryCalls || primaryCalls+n != 5 {
		t.Errorf("%d calls to the primary before the switch, %d after; %d to the fallback", primaryCalls, len(f.up.Requests()), n)
	}
	if sw := f.eventsOf(supervisor.EvUpstreamSwitch); len(sw) != 1 || !strings.Contains(string(sw[0].Data), `"fallback"`) {
		t.Errorf("upstream.switched events %+v", sw)
	}
	f.clock.advance(time.Hour + time.Second)
	waitState(t, sv, "the primary back", func(st supervisor.FleetState) bool { return !st.Quota.Fallback })
	if sw := f.eventsOf(supervisor.EvUpstreamSwitch); len(sw) != 2 || !strings.Contains(string(sw[1].Data), `"primary"`) {
		t.Errorf("upstream.switched events %+v", sw)
	}
}
