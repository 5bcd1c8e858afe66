package supervisor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// The workspace protocol: an agent inside a sandbox talks to the supervisor over its
// session's own Unix socket, one JSON request per connection and one JSON response
// back. The socket is the identity: nothing in a request names a session, so a session
// can only ever act as itself.

// Where the protocol appears inside every sandbox.
const (
	CtlDirInside    = "/run/corral"          // the session's control directory, read-only
	CtlSocketInside = "/run/corral/ctl.sock" // CORRAL_CTL
	CtlBinInside    = "/.corral/bin"         // the corral binary, read-only, first on PATH
)

// Verbs of the protocol (`corral ctl VERB`, and the MCP tools of `corral mcp`).
const (
	VerbBoard    = "board"
	VerbStatus   = "status"
	VerbIntent   = "intent"   // args: add|drop GLOB…
	VerbLease    = "lease"    // args: port PORT | drop [PORT]; flags: name
	VerbEndpoint = "endpoint" // args: NAME
	VerbPublish  = "publish"  // flags: message
	VerbHandoff  = "handoff"  // args: TASK; flags: artifact, accept, prompt, agent, intent
	VerbWait     = "wait"     // args: head|publish|lease [NAME]; flags: timeout, from
	VerbAsk      = "ask"      // args: QUESTION; flags: kind, nowait
)

// CtlRequest is one call. Unknown fields are refused (a request cannot smuggle in a
// session to act as).
type CtlRequest struct {
	Verb  string            `json:"verb"`
	Args  []string          `json:"args,omitempty"`
	Flags map[string]string `json:"flags,omitempty"`
}

// CtlResponse is the answer: Data on success, Error otherwise.
type CtlResponse struct {
	OK    bool            `json:"ok"`
	Error string          `json:"error,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// CallCtl sends one request to a control socket and returns the data of the answer.
// timeout bounds the whole call (0: none — `wait` may block for long).
func CallCtl(socket string, req CtlRequest, timeout time.Duration) (json.RawMessage, error) {
	c, err := net.Dial("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", socket, err)
	}
	defer c.Close()
	if timeout > 0 {
		c.SetDeadline(time.Now().Add(timeout))
	}
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return nil, fmt.Errorf("control socket %s: send: %w", socket, err)
	}
	var resp CtlResponse
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&resp); err != nil {
		return nil, fmt.Errorf("control socket %s: read answer: %w", socket, err)
	}
	if !resp.OK {
		return nil, errors.New(resp.Error)
	}
	return resp.Data, nil
}
