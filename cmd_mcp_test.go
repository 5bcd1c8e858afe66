package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"corral/supervisor"
)

// liveFleet runs a plan's fleet in this process until the test ends.
func liveFleet(t *testing.T, plan string) (*fleet, string) {
	t.Helper()
	dir, planPath := fleetRepo(t, plan)
	fl, err := openFleet(planPath, false, true)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fl.sv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		fl.Close()
	})
	return fl, dir
}

// waitSession waits until the task has a live session and returns its id.
func waitSession(t *testing.T, fl *fleet, task string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range fl.sv.State().Sessions {
			if s.Task == task {
				return s.ID
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("task %s never started a session", task)
	return ""
}

// asSession is the command that runs `corral mcp` as a process of the session would:
// inside its pid namespace (which the control socket checks), talking to its socket.
func asSession(t *testing.T, fl *fleet, session string) []string {
	t.Helper()
	sock, pid, ok := fl.sv.CtlSocket(session)
	if !ok {
		t.Fatalf("session %s has no control socket", session)
	}
	self, _ := os.Executable()
	return []string{"nsenter", "--target", strconv.Itoa(pid), "--pid", "--", self, "mcp", "--socket", sock}
}

const mcpPlan = `
[fleet]
repo = "."
base = "main"

[[task]]
id = "agent"
agent = "sleep 120"
`

// TestMCPRoundTrip drives `corral mcp` with the official Go SDK's client: every verb
// is a tool, answers come back as the verb's JSON, refusals as tool errors; and a
// process outside the session's pid namespace is refused by its socket.
func TestMCPRoundTrip(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("needs nsenter (util-linux) to run the MCP server in the session's pid namespace")
	}
	fl, _ := liveFleet(t, mcpPlan)
	session := waitSession(t, fl, "agent")
	argv := asSession(t, fl, session)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "CORRAL_TEST_MAIN=1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "corral-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if got := strings.Join(names, " "); got != "ask board endpoint handoff intent lease publish status wait" {
		t.Errorf("tools: %s", got)
	}
	call := func(name string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("call %s: %v", name, err)
		}
		text := ""
		if len(res.Content) > 0 {
			text = res.Content[0].(*mcp.TextContent).Text
		}
		return text, res.IsError
	}
	text, isErr := call("status", map[string]any{})
	var st supervisor.SessionStatus
	if isErr || json.Unmarshal([]byte(text), &st) != nil || st.Session != session {
		t.Errorf("status: error %v, %s", isErr, text)
	}
	text, isErr = call("intent", map[string]any{"action": "add", "globs": []string{"src/**"}})
	if isErr || !strings.Contains(text, `"src/**"`) {
		t.Errorf("intent: error %v, %s", isErr, text)
	}
	if text, isErr = call("lease", map[string]any{"action": "port", "port": 7200, "name": "api"}); isErr {
		t.Errorf("lease: %s", text)
	}
	text, isErr = call("endpoint", map[string]any{"name": "api"})
	if isErr || !strings.Contains(text, `"address":"127.0.0.1:7200"`) {
		t.Errorf("endpoint of its own lease: error %v, %s", isErr, text)
	}
	text, isErr = call("wait", map[string]any{"what": "lease", "name": "api"})
	if isErr || !strings.Contains(text, `"name":"api"`) {
		t.Errorf("wait lease: error %v, %s", isErr, text)
	}
	text, isErr = call("board", map[string]any{})
	if isErr || !strings.Contains(text, `"api"`) || !strings.Contains(text, `"src/**"`) {
		t.Errorf("board: error %v, %s", isErr, text)
	}
	text, isErr = call("publish", map[string]any{})
	if !isErr || !strings.Contains(text, "one-shot") {
		t.Errorf("publish from a one-shot session: error %v, %s", isErr, text)
	}
	text, isErr = call("ask", map[string]any{"question": "which port?", "nowait": true})
	if isErr || !strings.Contains(text, `"state":"open"`) {
		t.Errorf("ask: error %v, %s", isErr, text)
	}
	if items := fl.sv.Inbox(); len(items) != 1 || items[0].Text != "which port?" || items[0].Session != session || items[0].ID == 0 {
		t.Errorf("inbox after ask: %+v", items)
	}

	// Handoffs wait in the inbox (the default policy): y queues one, anything else
	// discards it.
	for _, c := range []struct {
		task, answer string
		want         supervisor.TaskState
	}{{"next", "y", supervisor.TaskQueued}, {"other", "no thanks", supervisor.TaskDiscarded}} {
		text, isErr = call("handoff", map[string]any{"task": c.task, "prompt": "carry on"})
		var h supervisor.HandoffResult
		if isErr || json.Unmarshal([]byte(text), &h) != nil || h.Task.State != supervisor.TaskInbox || h.Inbox == 0 {
			t.Fatalf("handoff %s: error %v, %s", c.task, isErr, text)
		}
		if err := fl.sv.AnswerInbox(h.Inbox, c.answer); err != nil {
			t.Fatal(err)
		}
		for _, tk := range fl.sv.State().Tasks {
			if tk.ID == c.task && tk.State != c.want {
				t.Errorf("handoff %s answered %q: %s, want %s", c.task, c.answer, tk.State, c.want)
			}
		}
	}

	// The host is not the session: its own process is refused by the socket.
	sock, _, _ := fl.sv.CtlSocket(session)
	if _, err := supervisor.CallCtl(sock, supervisor.CtlRequest{Verb: "status"}, 5*time.Second); err == nil || !strings.Contains(err.Error(), "not a process of that session") {
		t.Errorf("a host process called the session's socket: %v", err)
	}
}

// TestMCPTypeScriptClient: the official TypeScript SDK lists and calls every tool.
// testdata/mcp needs `npm ci` first (CI does it); without node or the SDK it skips.
func TestMCPTypeScriptClient(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("needs node for the TypeScript MCP SDK")
	}
	if _, err := os.Stat("testdata/mcp/node_modules/@modelcontextprotocol/sdk"); err != nil {
		t.Skip("needs the TypeScript MCP SDK: npm ci --prefix testdata/mcp")
	}
	fl, _ := liveFleet(t, mcpPlan)
	session := waitSession(t, fl, "agent")
	client, _ := filepath.Abs("testdata/mcp/client.mjs")
	cmd := exec.Command("node", append([]string{client}, asSession(t, fl, session)...)...)
	cmd.Env = append(os.Environ(), "CORRAL_TEST_MAIN=1")
	cmd.Dir = "testdata/mcp"
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client: %v\n%s", err, out)
	}
	var got struct {
		Tools   []string `json:"tools"`
		Results map[string]struct {
			IsError bool   `json:"isError"`
			Text    string `json:"text"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if len(got.Tools) != 9 || len(got.Results) != 9 {
		t.Errorf("the TypeScript client saw %d tools and called %d: %v", len(got.Tools), len(got.Results), got.Tools)
	}
	for name, r := range got.Results {
		wantErr := name == "publish" // a one-shot session publishes when its agent exits
		if r.IsError != wantErr || r.Text == "" {
			t.Errorf("%s: isError %v, %q", name, r.IsError, r.Text)
		}
	}
	if !strings.Contains(got.Results["endpoint"].Text, "127.0.0.1:7100") || !strings.Contains(got.Results["handoff"].Text, "ts-follow") {
		t.Errorf("endpoint %s / handoff %s", got.Results["endpoint"].Text, got.Results["handoff"].Text)
	}
}
