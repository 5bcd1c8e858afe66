package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
)

// ScriptedUpstream is a model API that answers from files (testdata/upstream): the
// Anthropic Messages endpoint and OpenAI's Chat Completions and Responses, each
// streamed or not as the request's "stream" asks. Tests, benchmarks and CI run
// sessions against it on loopback; it is no model.
type ScriptedUpstream struct {
	Dir string
	// Header is added to every response (rate-limit headers, say).
	Header http.Header
	// ToolTurn, when set, names the file (without .json/.sse) answered to a Messages
	// request that offers tools and carries no tool result yet: a coding agent's
	// first turn, asking it to run a tool. The next request, with the result, gets
	// the plain answer.
	ToolTurn string

	mu       sync.Mutex
	requests []ScriptedRequest
}

// ScriptedRequest is one request the upstream received.
type ScriptedRequest struct {
	Path   string
	Header http.Header
	Body   []byte
}

// Requests returns what the upstream has received so far.
func (s *ScriptedUpstream) Requests() []ScriptedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ScriptedRequest(nil), s.requests...)
}

var scriptedRoutes = map[string]string{
	"/v1/messages":         "anthropic_messages",
	"/v1/chat/completions": "openai_chat",
	"/v1/responses":        "openai_responses",
}

func (s *ScriptedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body bytes.Buffer
	body.ReadFrom(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, ScriptedRequest{Path: r.URL.Path, Header: r.Header.Clone(), Body: body.Bytes()})
	s.mu.Unlock()
	name, ok := scriptedRoutes[r.URL.Path]
	if !ok || r.Method != http.MethodPost {
		http.Error(w, fmt.Sprintf(`{"error":"scripted upstream: no %s %s"}`, r.Method, r.URL.Path), http.StatusNotFound)
		return
	}
	var req struct {
		Stream bool `json:"stream"`
	}
	json.Unmarshal(body.Bytes(), &req)
	if s.ToolTurn != "" && name == "anthropic_messages" && bytes.Contains(body.Bytes(), []byte(`"tools"`)) &&
		!bytes.Contains(body.Bytes(), []byte(`"tool_result"`)) {
		name = s.ToolTurn
	}
	for k, vs := range s.Header {
		w.Header()[k] = vs
	}
	if !req.Stream {
		data, err := os.ReadFile(filepath.Join(s.Dir, name+".json"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(data)
		return
	}
	f, err := os.Open(filepath.Join(s.Dir, name+".sse"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	// One event at a time, flushed, as a provider streams them.
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		w.Write(sc.Bytes())
		w.Write([]byte("\n"))
		if len(sc.Bytes()) == 0 && flusher != nil {
			flusher.Flush()
		}
	}
}
