package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

const fixtures = "../../testdata/upstream"

// harness is a scripted upstream on loopback and a gateway serving one session on a
// loopback listener, collecting the calls it meters.
type harness struct {
	up    *ScriptedUpstream
	upSrv *httptest.Server
	gw    *Gateway
	addr  string
	ln    net.Listener

	mu      sync.Mutex
	calls   []Call
	refused []string
}

func newHarness(t testing.TB, mutate func(*Config)) *harness {
	t.Helper()
	h := &harness{up: &ScriptedUpstream{Dir: fixtures}}
	h.upSrv = httptest.NewServer(h.up)
	t.Cleanup(h.upSrv.Close)
	cfg := Config{
		Upstreams: []Upstream{{Kind: Anthropic, URL: h.upSrv.URL, Key: "sk-host-anthropic"}, {Kind: OpenAI, URL: h.upSrv.URL, Key: "sk-host-openai"}},
		Allow:     []string{"127.0.0.1", "*.example.org"},
		OnCall: func(c Call) {
			h.mu.Lock()
			h.calls = append(h.calls, c)
			h.mu.Unlock()
		},
		OnRefused: func(session, host string) {
			h.mu.Lock()
			h.refused = append(h.refused, session+" "+host)
			h.mu.Unlock()
		},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	gw, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.gw = gw
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.ln, h.addr = ln, ln.Addr().String()
	done := make(chan struct{})
	go func() { gw.Serve("s-1", ln); close(done) }()
	t.Cleanup(func() { ln.Close(); <-done })
	return h
}

// env returns the session's environment as a map.
func (h *harness) env() map[string]string {
	m := map[string]string{}
	for _, kv := range h.gw.Env(h.addr) {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func (h *harness) post(t testing.TB, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(data)
}

func (h *harness) lastCall(t testing.TB) Call {
	t.Helper()
	// OnCall runs when the gateway has read the body's end, which may be just after
	// the client has; wait for it on the count, not a clock.
	for i := 0; ; i++ {
		h.mu.Lock()
		n := len(h.calls)
		h.mu.Unlock()
		if n > 0 {
			break
		}
		if i > 2000 {
			t.Fatal("no call metered")
		}
		time.Sleep(time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.calls[len(h.calls)-1]
	h.calls = nil
	return c
}

// Every shape the issue names, streamed and not, is metered exactly as the fixture
// files say, and the session receives the upstream's bytes unchanged.
func TestMeteringEveryShape(t *testing.T) {
	h := newHarness(t, nil)
	env := h.env()
	cases := []struct {
		url, file, model     string
		stream               bool
		in, out, cread, cwri int64
	}{
		{env["ANTHROPIC_BASE_URL"] + "/v1/messages", "anthropic_messages.json", "claude-sonnet-4-5", false, 21, 17, 100, 40},
		{env["ANTHROPIC_BASE_URL"] + "/v1/messages", "anthropic_messages.sse", "claude-sonnet-4-5", true, 25, 31, 200, 50},
		{env["OPENAI_BASE_URL"] + "/chat/completions", "openai_chat.json", "gpt-4.1", false, 30, 12, 20, 0},
		{env["OPENAI_BASE_URL"] + "/chat/completions", "openai_chat.sse", "gpt-4.1", true, 44, 9, 64, 0},
		{env["OPENAI_BASE_URL"] + "/responses", "openai_responses.json", "gpt-5", false, 70, 33, 30, 0},
		{env["OPENAI_BASE_URL"] + "/responses", "openai_responses.sse", "gpt-5", true, 12, 19, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			resp, body := h.post(t, c.url, fmt.Sprintf(`{"model":"x","stream":%v}`, c.stream))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			want := readFixture(t, c.file)
			if body != want {
				t.Errorf("body changed on the way:\n got %q\nwant %q", body, want)
			}
			got := h.lastCall(t)
			if got.Model != c.model || got.Input != c.in || got.Output != c.out || got.CacheRead != c.cread || got.CacheWrite != c.cwri || got.Streamed != c.stream {
				t.Errorf("metered %+v; want model %s in %d out %d cache read %d write %d streamed %v",
					got, c.model, c.in, c.out, c.cread, c.cwri, c.stream)
			}
			if got.Session != "s-1" || got.Status != 200 || got.Latency <= 0 {
				t.Errorf("call %+v", got)
			}
		})
	}
}

func readFixture(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile(fixtures + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The host's key replaces whatever the session sends; the session's environment
// holds only a placeholder.
func TestCredentialsStayOnTheHost(t *testing.T) {
	h := newHarness(t, nil)
	env := h.env()
	if strings.Contains(strings.Join(h.gw.Env(h.addr), "\n"), "sk-host") {
		t.Fatalf("the session environment holds the host key: %v", env)
	}
	req, _ := http.NewRequest("POST", env["ANTHROPIC_BASE_URL"]+"/v1/messages", strings.NewReader(`{}`))
	req.Header.Set("X-Api-Key", env["ANTHROPIC_API_KEY"])
	req.Header.Set("Authorization", "Bearer session-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	h.post(t, env["OPENAI_BASE_URL"]+"/chat/completions", `{}`)
	reqs := h.up.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests upstream", len(reqs))
	}
	if k := reqs[0].Header.Get("X-Api-Key"); k != "sk-host-anthropic" || reqs[0].Header.Get("Authorization") != "" {
		t.Errorf("anthropic upstream saw key %q, authorization %q", k, reqs[0].Header.Get("Authorization"))
	}
	if a := reqs[1].Header.Get("Authorization"); a != "Bearer sk-host-openai" {
		t.Errorf("openai upstream saw authorization %q", a)
	}
	if reqs[0].Path != "/v1/messages" || reqs[1].Path != "/v1/chat/completions" {
		t.Errorf("upstream paths %q %q", reqs[0].Path, reqs[1].Path)
	}
}

// Rate-limit headers of both providers are read: remaining, limit, reset.
func TestRateLimitHeadersRecorded(t *testing.T) {
	h := newHarness(t, nil)
	reset := time.Date(2026, 11, 29, 15, 57, 0, 0, time.UTC)
	h.up.Header = http.Header{
		"Anthropic-Ratelimit-Tokens-Remaining":   {"4000"},
		"Anthropic-Ratelimit-Tokens-Limit":       {"10000"},
		"Anthropic-Ratelimit-Tokens-Reset":       {reset.Format(time.RFC3339)},
		"Anthropic-Ratelimit-Requests-Remaining": {"49"},
	}
	h.post(t, h.env()["ANTHROPIC_BASE_URL"]+"/v1/messages", `{}`)
	c := h.lastCall(t)
	l := c.Limits
	if l.TokensRemaining != 4000 || l.TokensLimit != 10000 || l.RequestsRemaining != 49 || !l.Reset.Equal(reset) || l.Utilization < 0.599 || l.Utilization > 0.601 {
		t.Errorf("limits %+v", l)
	}
	now := time.Now()
	h.up.Header = http.Header{"X-Ratelimit-Remaining-Tokens": {"10"}, "X-Ratelimit-Limit-Tokens": {"100"}, "X-Ratelimit-Reset-Tokens": {"6m0s"}}
	h.post(t, h.env()["OPENAI_BASE_URL"]+"/chat/completions", `{}`)
	l = h.lastCall(t).Limits
	if l.TokensRemaining != 10 || l.Reset.Sub(now) < 6*time.Minute || l.Reset.Sub(now) > 7*time.Minute || l.Utilization < 0.89 {
		t.Errorf("openai limits %+v", l)
	}
}

// A streamed response is passed on as it comes: the session reads the first event
// before the upstream has sent the second.
func TestStreamIsNotBuffered(t *testing.T) {
	second := make(chan struct{})
	h := newHarness(t, nil)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		<-second
		fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":8}}\n\n")
	}))
	defer slow.Close()
	if err := h.gw.SetUpstream(Upstream{Kind: Anthropic, URL: slow.URL}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(h.env()["ANTHROPIC_BASE_URL"]+"/v1/messages", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, _ := br.ReadString('\n')
	if !strings.Contains(first, "message_start") {
		t.Fatalf("first line %q", first)
	}
	close(second)
	io.Copy(io.Discard, br)
	c := h.lastCall(t)
	if c.Input != 3 || c.Output != 8 || c.Model != "m" {
		t.Errorf("metered %+v", c)
	}
}

// A held session's next request waits at the gateway — the upstream never sees it —
// until released; then it goes through.
func TestHoldKeepsRequestsUntilRelease(t *testing.T) {
	h := newHarness(t, nil)
	h.gw.Hold("s-1")
	if !h.gw.Held("s-1") {
		t.Fatal("not held")
	}
	done := make(chan string)
	go func() {
		_, body := h.post(t, h.env()["ANTHROPIC_BASE_URL"]+"/v1/messages", `{}`)
		done <- body
	}()
	for h.gw.Waiting("s-1") != 1 {
		time.Sleep(time.Millisecond)
	}
	if n := len(h.up.Requests()); n != 0 {
		t.Fatalf("upstream saw %d requests while held", n)
	}
	h.gw.Release("s-1")
	if body := <-done; !strings.Contains(body, "scripted upstream") {
		t.Errorf("released request got %q", body)
	}
	if n := len(h.up.Requests()); n != 1 {
		t.Errorf("upstream saw %d requests after release", n)
	}
}

// lateEOF is an upstream body that is slow to say it has ended after its last byte:
// the end comes on a read of its own, 300 ms later.
type lateEOF struct {
	io.ReadCloser
	ended bool
}

func (b *lateEOF) Read(p []byte) (int, error) {
	if b.ended {
		time.Sleep(300 * time.Millisecond)
		return 0, io.EOF
	}
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.ended = true
		if n > 0 {
			return n, nil
		}
		return b.Read(p)
	}
	return n, err
}

type lateEOFTransport struct{ http.RoundTripper }

func (t lateEOFTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(r)
	if err == nil {
		resp.Body = &lateEOF{ReadCloser: resp.Body}
	}
	return resp, err
}

// A call whose answer has a known length is reported with its last byte, before the
// session has it: what the report decides (a quota hold) is in place before the
// session can send its next request, however late the upstream's end comes.
func TestCallReportedBeforeItsLastByteIsPassedOn(t *testing.T) {
	tr := lateEOFTransport{http.DefaultTransport.(*http.Transport).Clone()}
	h := newHarness(t, func(c *Config) { c.Transport = tr })
	resp, body := h.post(t, h.env()["ANTHROPIC_BASE_URL"]+"/v1/messages", `{"model":"x"}`)
	h.mu.Lock()
	n := len(h.calls)
	h.mu.Unlock()
	if resp.ContentLength <= 0 || n != 1 {
		t.Fatalf("the session read the whole answer (%d bytes, length %d) with %d calls reported; want it reported first",
			len(body), resp.ContentLength, n)
	}
	if c := h.lastCall(t); c.Input != 21 || c.Output != 17 {
		t.Errorf("metered %+v", c)
	}
}

// HoldAll holds every session's next request until ReleaseAll, whatever the
// session's own hold; a session held on its own stays held after ReleaseAll.
func TestHoldAllUntilReleaseAll(t *testing.T) {
	h := newHarness(t, nil)
	h.gw.HoldAll()
	if !h.gw.Held("s-1") {
		t.Fatal("not held")
	}
	done := make(chan string, 1)
	send := func() {
		_, body := h.post(t, h.env()["ANTHROPIC_BASE_URL"]+"/v1/messages", `{}`)
		done <- body
	}
	go send()
	for h.gw.Waiting("s-1") != 1 {
		time.Sleep(time.Millisecond)
	}
	h.gw.Release("s-1") // the session's own hold was never set: nothing changes
	time.Sleep(20 * time.Millisecond)
	if n := len(h.up.Requests()); n != 0 || h.gw.Waiting("s-1") != 1 {
		t.Fatalf("upstream saw %d requests while all were held", n)
	}
	h.gw.Hold("s-1")
	h.gw.ReleaseAll()
	time.Sleep(20 * time.Millisecond)
	if n := len(h.up.Requests()); n != 0 || !h.gw.Held("s-1") {
		t.Fatalf("ReleaseAll released a session held on its own (%d requests upstream)", n)
	}
	h.gw.Release("s-1")
	if body := <-done; !strings.Contains(body, "scripted upstream") {
		t.Errorf("released request got %q", body)
	}
}

// The egress proxy lets allowed hosts through (plain HTTP and CONNECT tunnels) and
// refuses the rest with 403, reporting each refusal.
func TestEgressAllowlist(t *testing.T) {
	h := newHarness(t, nil)
	proxyURL, _ := url.Parse("http://" + h.addr)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tls ok") }))
	defer tlsSrv.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "plain ok") }))
	defer plain.Close()
	tr := tlsSrv.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(proxyURL)
	client := &http.Client{Transport: tr}
	for _, u := range []string{tlsSrv.URL, plain.URL} {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatalf("GET %s through the proxy: %v", u, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.HasSuffix(string(body), "ok") {
			t.Errorf("GET %s: %q", u, body)
		}
	}
	// Disallowed: an https host (CONNECT) and an http one.
	for _, u := range []string{"https://evil.example.com/", "http://localhost:1/x"} {
		resp, err := client.Get(u)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("GET %s: status %d %q, want 403", u, resp.StatusCode, body)
			}
		} else if !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("GET %s: %v, want Forbidden", u, err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if strings.Join(h.refused, ",") != "s-1 evil.example.com,s-1 localhost" {
		t.Errorf("refused %v", h.refused)
	}
}

func TestAllowListPatterns(t *testing.T) {
	allow, err := AllowList([]string{"registry.npmjs.org", "*.golang.org"})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"registry.npmjs.org": true, "REGISTRY.npmjs.org.": true, "proxy.golang.org": true,
		"golang.org": false, "evilnpmjs.org": false, "npmjs.org": false, "x.registry.npmjs.org": false,
	} {
		if allow(host) != want {
			t.Errorf("allow(%q) = %v, want %v", host, !want, want)
		}
	}
	for _, bad := range []string{"", "a*b", "http://x", "host:80"} {
		if _, err := AllowList([]string{bad}); err == nil {
			t.Errorf("AllowList(%q) accepted", bad)
		}
	}
}

func TestUnknownRouteNamesTheConfiguredOnes(t *testing.T) {
	h := newHarness(t, nil)
	resp, body := h.post(t, "http://"+h.addr+"/gemini/v1/x", `{}`)
	if resp.StatusCode != 404 || !strings.Contains(body, "/anthropic, /openai") {
		t.Errorf("status %d %q", resp.StatusCode, body)
	}
}

// earlyStream is an upstream that starts its streamed answer as soon as the request's
// header arrives, before reading the body, and keeps sending for a while.
func earlyStream(events int) (http.HandlerFunc, string) {
	var want strings.Builder
	want.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n")
	for i := range events {
		fmt.Fprintf(&want, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"part %d\"}}\n\n", i)
	}
	want.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":42}}\n\n")
	text := want.String()
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range strings.SplitAfter(text, "\n\n") {
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
	}, text
}

// lateWriter is an upstream connection whose writes return only some time after
// their bytes have gone: the transport's writer looks descheduled, as it may be on a
// loaded host, while the upstream already has the request and answers it.
type lateWriter struct{ net.Conn }

func (c lateWriter) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	time.Sleep(40 * time.Millisecond)
	return n, err
}

// An upstream's answer passes whole even when it starts before the transport has
// finished writing the request. Go's HTTP/1 server drains and closes a request body
// once the answer's header is written; forwarded as it arrived, the transport then
// failed its last read of that body (the check that nothing follows the declared
// length) and closed the upstream connection mid-stream (golang/go#40747). It
// happened now and then under load in CI; here the transport's writes are slowed so
// that every request takes that path.
func TestAnswerBeforeTheRequestIsWrittenIsNotCut(t *testing.T) {
	handler, want := earlyStream(40)
	early := httptest.NewServer(handler)
	defer early.Close()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return lateWriter{c}, nil
	}}
	defer tr.CloseIdleConnections()
	h := newHarness(t, func(c *Config) { c.Transport = tr })
	if err := h.gw.SetUpstream(Upstream{Kind: Anthropic, URL: early.URL}); err != nil {
		t.Fatal(err)
	}
	proxyURL, _ := url.Parse("http://" + h.addr)
	viaProxy := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`
	for _, c := range []struct {
		name, url string
		client    *http.Client
		metered   bool
	}{
		{"model", h.env()["ANTHROPIC_BASE_URL"] + "/v1/messages", http.DefaultClient, true},
		{"egress", early.URL + "/upload", viaProxy, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range 3 {
				resp, err := c.client.Post(c.url, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(got) != want {
					t.Fatalf("round %d: read %d of %d bytes: %v", i, len(got), len(want), err)
				}
				if !c.metered {
					continue
				}
				if m := h.lastCall(t); m.Output != 42 || m.Input != 7 {
					t.Fatalf("round %d: metered %+v", i, m)
				}
			}
		})
	}
}
