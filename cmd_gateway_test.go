package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"corral/supervisor"
	"corral/supervisor/gateway"
)

// `corral run` with a plan's [gateway]: the session reaches the scripted upstream
// through the gateway with the host's key, its calls land in the events and in
// `corral status`, and a disallowed host is refused.
func TestRunWithGatewayPlan(t *testing.T) {
	requireRoot(t)
	t.Setenv("CORRAL_TEST_GATEWAY_KEY", "sk-host-only")
	up := &gateway.ScriptedUpstream{Dir: "testdata/upstream"}
	srv := httptest.NewServer(up)
	defer srv.Close()
	dir, plan := fleetRepo(t, fmt.Sprintf(`
[fleet]
repo = "."
base = "main"
name = "gw"

[gateway]
allow = ["registry.npmjs.org"]

[gateway.anthropic]
url = %q
key_env = "CORRAL_TEST_GATEWAY_KEY"

[gateway.prices."claude-sonnet-4-5"]
input = 3.0
output = 15.0
cache_read = 0.3
cache_write = 3.75

[[task]]
id = "talk"
prompt = "ask twice"
agent = "MODEL_CALLS=2 MODEL_SHAPE='anthropic anthropic-stream' sh agents/model.sh; corral ctl status --json > ctl-status.json; curl -s -o /dev/null https://evil.example.com/ || true"
`, srv.URL))
	evPath := filepath.Join(t.TempDir(), "events.jsonl")
	if code, _, errOut := runMain("run", plan, "--headless", "--events", evPath); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	calls, refused := 0, 0
	for _, e := range readEvents(t, evPath) {
		switch e.Kind {
		case supervisor.EvModelCall:
			calls++
		case supervisor.EvEgressRefused:
			refused++
		}
	}
	if calls != 4 || refused != 1 {
		t.Errorf("%d model.call and %d egress.refused events, want 4 and 1", calls, refused)
	}
	for _, r := range up.Requests() {
		if r.Header.Get("X-Api-Key") != "sk-host-only" {
			t.Errorf("upstream saw key %q", r.Header.Get("X-Api-Key"))
		}
	}
	code, out, _ := runMain("status", "--repo", dir, "--json")
	var st statusReport
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Model == nil {
		t.Fatalf("status --json: exit %d\n%s", code, out)
	}
	// Two of each: 21+17+100+40 and 25+31+200+50 tokens.
	if m := st.Model; m.Total.Calls != 4 || m.Total.Tokens() != 968 || m.Accepted != 1 || m.CostPerAccepted != m.Total.Cost {
		t.Errorf("model report %+v", m)
	}
	if _, out, _ = runMain("status", "--repo", dir); !strings.Contains(out, "model: 4 calls, 968 tokens") {
		t.Errorf("status text lacks the model line:\n%s", out)
	}
	// The agent asked the gateway's account of itself through ctl.
	var self supervisor.SessionStatus
	headJSON(t, dir, "ctl-status.json", &self)
	if g := self.Gateway; g.Tokens == nil || *g.Tokens != 968 || g.Calls != 4 || g.TaskTokens != 968 || g.CostUSD == nil || !near(*g.CostUSD, st.Model.Total.Cost) {
		t.Errorf("ctl status gateway %+v, want 4 calls, 968 tokens, cost %v", g, st.Model.Total.Cost)
	}
	// The run's report prices the task and the accepted one.
	code, out, _ = runMain("report", "--repo", dir, "--json")
	var rep namedReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("report --json: exit %d\n%s", code, out)
	}
	if c := rep.Fleet.Cost; c == nil || c.Calls != 4 || c.Tokens() != 968 || !near(c.Cost, st.Model.Total.Cost) ||
		rep.Fleet.PerAccepted.Cost == nil || !near(rep.Fleet.PerAccepted.Cost.Cost, c.Cost) {
		t.Errorf("report cost %+v, per accepted %+v", c, rep.Fleet.PerAccepted.Cost)
	}
}

// `corral bench gateway` on a small scale: both measures print, every call through
// the gateway is metered.
func TestBenchGatewaySmoke(t *testing.T) {
	code, out, errOut := runMain("bench", "gateway", "--requests", "20", "--streams", "2", "--events", "5", "--pace", "0")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	for _, want := range []string{"p50 of 20 calls", "added", "2 streams × 5 events", "22 calls metered"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// near compares money summed in different orders: float addition is not associative.
func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }
