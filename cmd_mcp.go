package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"corral/supervisor"
)

// The MCP tools of `corral mcp`: the ctl verbs, each calling the session's control
// socket, so an MCP-speaking agent (Claude Code, Codex…) uses the workspace natively.
// Every tool answers with the verb's JSON as text (and as structured content).

type mcpNoArgs struct{}

type mcpIntentArgs struct {
	Action string   `json:"action" jsonschema:"add to declare paths this session will touch, drop to narrow them"`
	Globs  []string `json:"globs,omitempty" jsonschema:"path globs relative to the repository root, e.g. pricing/**; drop with none drops all"`
}

type mcpLeaseArgs struct {
	Action string `json:"action" jsonschema:"port to claim a port, drop to release"`
	Port   int    `json:"port,omitempty" jsonschema:"the port this session listens on"`
	Name   string `json:"name,omitempty" jsonschema:"a service name other sessions find with endpoint"`
}

type mcpEndpointArgs struct {
	Name string `json:"name" jsonschema:"the service name another session leased"`
}

type mcpPublishArgs struct {
	Message string `json:"message,omitempty" jsonschema:"the commit subject"`
}

type mcpHandoffArgs struct {
	Task     string   `json:"task" jsonschema:"id of the follow-up task"`
	Artifact string   `json:"artifact,omitempty" jsonschema:"path in this workspace the follow-up builds on"`
	Accept   string   `json:"accept,omitempty" jsonschema:"shell command that must pass for the follow-up to count"`
	Prompt   string   `json:"prompt,omitempty" jsonschema:"what the follow-up should do"`
	Agent    string   `json:"agent,omitempty" jsonschema:"agent command (default: this task's)"`
	Intent   []string `json:"intent,omitempty" jsonschema:"path globs the follow-up will touch"`
}

type mcpWaitArgs struct {
	What    string `json:"what" jsonschema:"head, publish or lease"`
	Name    string `json:"name,omitempty" jsonschema:"the lease name, for lease"`
	From    string `json:"from,omitempty" jsonschema:"for head: wait until the head is not this revision"`
	Timeout string `json:"timeout,omitempty" jsonschema:"give up after this long, e.g. 30s"`
}

type mcpAskArgs struct {
	Question string `json:"question" jsonschema:"what to ask the human"`
	Kind     string `json:"kind,omitempty" jsonschema:"needs-input, permission, done or rate-limited"`
	NoWait   bool   `json:"nowait,omitempty" jsonschema:"return at once instead of waiting for the answer"`
}

// newMCPServer builds the server whose tools call socket.
func newMCPServer(socket string) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "corral", Version: "1"}, nil)
	call := func(ctx context.Context, req supervisor.CtlRequest) (*mcp.CallToolResult, any, error) {
		type result struct {
			data json.RawMessage
			err  error
		}
		ch := make(chan result, 1)
		go func() {
			d, err := supervisor.CallCtl(socket, req, 0)
			ch <- result{d, err}
		}()
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case r := <-ch:
			if r.err != nil {
				return nil, nil, r.err
			}
			var structured any
			json.Unmarshal(r.data, &structured)
			if _, ok := structured.(map[string]any); !ok {
				structured = map[string]any{"result": structured}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(r.data)}}, StructuredContent: structured}, nil, nil
		}
	}
	flags := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "board", Description: "The fleet's public board: live tasks with owner, state, base, how far behind the head, declared intent; leases and endpoints; recent publishes and conflicts; lane status. Never another session's files."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ mcpNoArgs) (*mcp.CallToolResult, any, error) {
			return call(ctx, supervisor.CtlRequest{Verb: supervisor.VerbBoard})
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "status", Description: "This session's own state, base, distance behind the head, intent, leases, budget and usage."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ mcpNoArgs) (*mcp.CallToolResult, any, error) {
			return call(ctx, supervisor.CtlRequest{Verb: supervisor.VerbStatus})
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "intent", Description: "Declare (add) or narrow (drop) the paths this session will touch; overlapping tasks are reported at once."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in mcpIntentArgs) (*mcp.CallToolResult, any, error) {
			return call(ctx, supervisor.CtlRequest{Verb: supervisor.VerbIntent, Args: append([]string{in.Action}, in.Globs...)})
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "lease", Description: "Claim a port this session listens on (action port), optionally as a named service, or release it (action drop)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in mcpLeaseArgs) (*mcp.CallToolResult, any, error) {
			args := []string{in.Action}
			if in.Port != 0 {
				args = append(args, strconv.Itoa(in.Port))
			}
			return call(ctx, supervisor.CtlRequest{Verb: supervisor.VerbLease, Args: args, Flags: flags("name", in.Name)})
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "endpoint", Description: "The address, reachable from this sandbox, of a service another session leased by name."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in mcpEndpointArgs) (*mcp.CallToolResult, any, error) {
			return call(ctx, supervisor.CtlRequest{Verb: supervisor.VerbEndpoint, Args: []string{in.Name}})
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "publish", Description: "Publish this persistent session's work to the shared head now and return the typed outcome (accepted, merged, rejected with conflicts, escalated, empty)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in mcpPublishArgs) (*mcp.CallToolResult, any, error) {
			return call(ctx, supervisor.CtlRequest{Verb: supervisor.VerbPublish, Flags: flags("message", in.Message)})
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "handoff", Description: "Propose a follow-up task with an artifact and an acceptance command; it waits in the human's inbox or is queued by policy."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in mcpHandoffArgs) (*mcp.CallToolResult, any, error) {
			return call(ctx, supervisor.CtlRequest{Verb: supervisor.VerbHandoff, Args: []string{in.Task}, Flags: flags(
				"artifact", in.Artifact, "accept", in.Accept, "prompt", in.Prompt, "agent", in.Agent, "intent", strings.Join(in.Intent, ","))})
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "wait", Description: "Block until the head moves (head), a publish has an outcome (publish), or a named lease is held (lease), instead of polling."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in mcpWaitArgs) (*mcp.CallToolResult, any, error) {
			args := []string{in.What}
			if in.Name != "" {
				args = append(args, in.Name)
			}
			return call(ctx, supervisor.CtlRequest{Verb: supervisor.VerbWait, Args: args, Flags: flags("from", in.From, "timeout", in.Timeout)})
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "ask", Description: "Put a question in the human's inbox and wait for the answer."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in mcpAskArgs) (*mcp.CallToolResult, any, error) {
			f := flags("kind", in.Kind)
			if in.NoWait {
				f["nowait"] = "1"
			}
			return call(ctx, supervisor.CtlRequest{Verb: supervisor.VerbAsk, Args: []string{in.Question}, Flags: f})
		})
	return srv
}

// runMCP is `corral mcp`: the ctl verbs as MCP tools over stdio.
func runMCP(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("mcp", stderr)
	socket := fs.String("socket", ctlSocket(), "the session's control socket")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	t := &mcp.IOTransport{Reader: os.Stdin, Writer: nopCloser{stdout}}
	if err := newMCPServer(*socket).Run(ctx, t); err != nil && ctx.Err() == nil {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
