package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kinds of upstream: the API shape the gateway meters, the route prefix sessions use
// and the environment variable that points their SDKs at it.
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
)

// Upstream is a model API the gateway forwards to.
type Upstream struct {
	Kind string // Anthropic or OpenAI
	URL  string // base URL without the API version, e.g. https://api.anthropic.com
	// Key, when set, is injected as the request's credential (x-api-key for
	// Anthropic, Authorization: Bearer for OpenAI); the session never holds it.
	// Empty passes the session's own credential through.
	Key string
}

// Config sets up a gateway.
type Config struct {
	Upstreams []Upstream
	// Allow lists the hosts the egress proxy lets sessions reach: "host", "*.domain"
	// (any subdomain) or "*" (anything). Everything else is refused.
	Allow []string
	// Transport carries requests upstream; nil uses a fresh transport that ignores the
	// host's proxy environment.
	Transport http.RoundTripper
	// OnCall receives each metered model call once its response has ended.
	OnCall func(Call)
	// OnRefused receives each refused egress attempt.
	OnRefused func(session, host string)
	Now       func() time.Time
}

// Gateway serves sessions' model calls and egress. Its methods are safe for
// concurrent use.
type Gateway struct {
	cfg       Config
	transport http.RoundTripper

	mu        sync.RWMutex
	routes    map[string]*route // by kind
	sessions  map[string]*sessionState
	closed    bool
	holdAll   chan struct{} // non-nil while every session is held; closed on release
	egressRP  *httputil.ReverseProxy
	allowHost func(string) bool
}

// route is one upstream and the reverse proxy that forwards to it.
type route struct {
	up    Upstream
	base  *url.URL
	proxy *httputil.ReverseProxy
}

// sessionState is what the gateway keeps per session: its hold and its tunnels.
type sessionState struct {
	mu      sync.Mutex
	hold    chan struct{} // non-nil while held; closed on release
	waiting int           // requests waiting on the hold
	gone    chan struct{} // closed when the session's listener has closed
	srv     *http.Server
	tunnels map[net.Conn]struct{}
}

// New checks cfg and returns a gateway serving nothing yet (see Serve).
func New(cfg Config) (*Gateway, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &Gateway{cfg: cfg, transport: cfg.Transport, routes: map[string]*route{}, sessions: map[string]*sessionState{}}
	if g.transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil // the host's own HTTP_PROXY is not the sessions'
		t.MaxIdleConnsPerHost = 64
		g.transport = t
	}
	for _, u := range cfg.Upstreams {
		if err := g.SetUpstream(u); err != nil {
			return nil, err
		}
	}
	allow, err := AllowList(cfg.Allow)
	if err != nil {
		return nil, err
	}
	g.allowHost = allow
	g.egressRP = &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.Out.RequestURI = "" },
		Transport:     g.transport,
		FlushInterval: -1,
		ErrorHandler:  badGateway,
	}
	return g, nil
}

// SetUpstream adds or replaces the upstream of its kind — how a fallback upstream
// takes over from an exhausted primary. Calls in flight finish where they started.
func (g *Gateway) SetUpstream(u Upstream) error {
	if u.Kind != Anthropic && u.Kind != OpenAI {
		return fmt.Errorf("gateway: upstream kind %q: want %q or %q", u.Kind, Anthropic, OpenAI)
	}
	base, err := url.Parse(u.URL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("gateway: upstream %s: %q is not an http(s) URL", u.Kind, u.URL)
	}
	r := &route{up: u, base: base}
	r.proxy = &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { r.rewrite(pr) },
		Transport: g.transport,
		// Flush every write: a streamed (SSE) response reaches the agent as it comes.
		FlushInterval:  -1,
		ErrorHandler:   badGateway,
		ModifyResponse: meterResponse,
		BufferPool:     copyBuffers,
	}
	g.mu.Lock()
	g.routes[u.Kind] = r
	g.mu.Unlock()
	return nil
}

// Upstream returns the upstream now serving kind.
func (g *Gateway) Upstream(kind string) (Upstream, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	r, ok := g.routes[kind]
	if !ok {
		return Upstream{}, false
	}
	return r.up, true
}

// rewrite points a session's request at the upstream: the route prefix goes, the
// upstream's base path comes in front, and the host's credential replaces the
// session's when one is configured.
func (r *route) rewrite(pr *httputil.ProxyRequest) {
	in := pr.In.URL.Path
	rest := strings.TrimPrefix(in, "/"+r.up.Kind)
	pr.SetURL(r.base)
	pr.Out.URL.Path = strings.TrimSuffix(r.base.Path, "/") + rest
	pr.Out.URL.RawPath = ""
	pr.Out.URL.RawQuery = pr.In.URL.RawQuery
	pr.Out.Host = r.base.Host
	// The transport then asks for gzip itself and hands back the plain body, which
	// the meter can read; the agent gets it uncompressed over loopback.
	pr.Out.Header.Del("Accept-Encoding")
	if r.up.Key != "" {
		switch r.up.Kind {
		case Anthropic:
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Set("X-Api-Key", r.up.Key)
		case OpenAI:
			pr.Out.Header.Del("Api-Key")
			pr.Out.Header.Set("Authorization", "Bearer "+r.up.Key)
		}
	}
}

// copyBuffers are the proxies' copy buffers: larger than the default 32 KiB so that a
// fast stream costs fewer read and write calls per byte.
var copyBuffers = &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}}

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte  { return *b.p.Get().(*[]byte) }
func (b *bufferPool) Put(p []byte) { b.p.Put(&p) }

func badGateway(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	http.Error(w, "corral gateway: upstream: "+err.Error(), http.StatusBadGateway)
}

// Env is the environment that points a session's SDKs and tools at the gateway
// listening at addr ("127.0.0.1:P" as the session dials it).
func (g *Gateway) Env(addr string) []string {
	base := "http://" + addr
	env := []string{
		"CORRAL_GATEWAY=" + base,
		"HTTP_PROXY=" + base, "HTTPS_PROXY=" + base, "http_proxy=" + base, "https_proxy=" + base,
		"NO_PROXY=127.0.0.1,localhost,::1", "no_proxy=127.0.0.1,localhost,::1",
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if r, ok := g.routes[Anthropic]; ok {
		env = append(env, "ANTHROPIC_BASE_URL="+base+"/"+Anthropic)
		if r.up.Key != "" {
			// SDKs refuse to start without a key; the real one stays on the host.
			env = append(env, "ANTHROPIC_API_KEY=corral-gateway-injects-the-key")
		}
	}
	if r, ok := g.routes[OpenAI]; ok {
		env = append(env, "OPENAI_BASE_URL="+base+"/"+OpenAI+"/v1")
		if r.up.Key != "" {
			env = append(env, "OPENAI_API_KEY=corral-gateway-injects-the-key")
		}
	}
	return env
}

// Serve serves one session's connections on ln until ln is closed (the sandbox closes
// it when the session ends); then it cuts the session's open connections and tunnels.
func (g *Gateway) Serve(session string, ln net.Listener) {
	st := g.state(session)
	srv := &http.Server{Handler: g.handler(session, st), ReadHeaderTimeout: time.Minute}
	st.mu.Lock()
	st.srv = srv
	st.mu.Unlock()
	srv.Serve(ln)
	srv.Close()
	st.mu.Lock()
	for c := range st.tunnels {
		c.Close()
	}
	st.mu.Unlock()
	// Held requests of an ended session are dropped, never sent on.
	close(st.gone)
	g.mu.Lock()
	delete(g.sessions, session)
	g.mu.Unlock()
}

func (g *Gateway) state(session string) *sessionState {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.sessions[session]
	if st == nil {
		st = &sessionState{tunnels: map[net.Conn]struct{}{}, gone: make(chan struct{})}
		g.sessions[session] = st
	}
	return st
}

// Hold makes the session's next model requests wait at the gateway until Release
// (requests already forwarded finish). Holding a held session does nothing.
func (g *Gateway) Hold(session string) {
	st := g.state(session)
	st.mu.Lock()
	if st.hold == nil {
		st.hold = make(chan struct{})
	}
	st.mu.Unlock()
}

// Release lets a held session's requests go on.
func (g *Gateway) Release(session string) {
	g.mu.RLock()
	st := g.sessions[session]
	g.mu.RUnlock()
	if st == nil {
		return
	}
	st.mu.Lock()
	if st.hold != nil {
		close(st.hold)
		st.hold = nil
	}
	st.mu.Unlock()
}

// Held reports whether a session's model requests are being held, on its own or
// with the whole gateway.
func (g *Gateway) Held(session string) bool {
	g.mu.RLock()
	st, all := g.sessions[session], g.holdAll
	g.mu.RUnlock()
	if st == nil || all != nil {
		return all != nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.hold != nil
}

// Sessions returns the sessions the gateway serves, sorted.
func (g *Gateway) Sessions() []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	ids := make([]string, 0, len(g.sessions))
	for id := range g.sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

var errSessionGone = errors.New("gateway: session ended")

// Waiting returns how many of the session's requests wait on a hold.
func (g *Gateway) Waiting(session string) int {
	g.mu.RLock()
	st := g.sessions[session]
	g.mu.RUnlock()
	if st == nil {
		return 0
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.waiting
}

// wait blocks while the session, or the whole gateway, is held, or until ctx ends.
func (g *Gateway) wait(st *sessionState, ctx context.Context) error {
	for {
		g.mu.RLock()
		all := g.holdAll
		g.mu.RUnlock()
		st.mu.Lock()
		h := st.hold
		if h != nil || all != nil {
			st.waiting++
		}
		st.mu.Unlock()
		if h == nil && all == nil {
			return nil
		}
		var err error
		select { // a nil channel never fires
		case <-h:
		case <-all:
		case <-ctx.Done():
			err = ctx.Err()
		case <-st.gone:
			err = errSessionGone
		}
		st.mu.Lock()
		st.waiting--
		st.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// HoldAll makes every session's next model requests wait, as Hold does one's, until
// ReleaseAll; requests already forwarded finish. It stops the whole fleet at once,
// from the goroutine that saw a limit crossed, before anyone has decided whom to pause.
func (g *Gateway) HoldAll() {
	g.mu.Lock()
	if g.holdAll == nil {
		g.holdAll = make(chan struct{})
	}
	g.mu.Unlock()
}

// ReleaseAll ends HoldAll; sessions held one by one stay held.
func (g *Gateway) ReleaseAll() {
	g.mu.Lock()
	if g.holdAll != nil {
		close(g.holdAll)
		g.holdAll = nil
	}
	g.mu.Unlock()
}

// handler routes one session's requests: CONNECT and absolute-form requests are
// egress; /anthropic/… and /openai/… are model calls.
func (g *Gateway) handler(session string, st *sessionState) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect {
			g.tunnel(session, st, w, r)
			return
		}
		if r.URL.IsAbs() {
			g.forwardEgress(session, w, r)
			return
		}
		kind, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		g.mu.RLock()
		rt := g.routes[kind]
		g.mu.RUnlock()
		if rt == nil {
			http.Error(w, fmt.Sprintf("corral gateway: no upstream for %q (configured: %s)", r.URL.Path, strings.Join(g.kinds(), ", ")), http.StatusNotFound)
			return
		}
		if err := g.wait(st, r.Context()); err != nil {
			return
		}
		m := &meter{g: g, call: Call{Session: session, Upstream: rt.up.Kind, Path: r.URL.Path, Start: g.cfg.Now()}, start: time.Now()}
		out := r.WithContext(context.WithValue(r.Context(), meterKey{}, m))
		if err := bufferBody(out); err != nil {
			code := http.StatusBadRequest
			if errors.Is(err, errBodyTooLarge) {
				code = http.StatusRequestEntityTooLarge
			}
			http.Error(w, "corral gateway: "+err.Error(), code)
			return
		}
		rt.proxy.ServeHTTP(w, out)
	})
}

// maxModelRequest bounds a model request's body, which the gateway holds whole
// (providers refuse far smaller ones: Anthropic's limit is 32 MB).
const maxModelRequest = 64 << 20

var errBodyTooLarge = fmt.Errorf("request body over %d MiB", maxModelRequest>>20)

// bufferBody reads a model request's body whole before it is forwarded and makes that
// copy r's body; r is the handler's own shallow copy of the request.
//
// Forwarding the session's body as it arrives is unsafe with Go's HTTP/1 server: once
// the upstream's answer starts, writing its header to the session drains and closes
// the inbound body, and the transport, still finishing its write upstream (it reads
// once more past the declared length), then gets "invalid Read on closed Body" and
// closes the upstream connection, cutting the streamed answer short
// (golang/go#40747). A held copy is never closed under the transport, and it lets the
// transport retry on an idle connection the upstream has dropped.
func bufferBody(r *http.Request) error {
	var data []byte
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		data, err = io.ReadAll(io.LimitReader(r.Body, maxModelRequest+1))
		if err != nil {
			return fmt.Errorf("reading the request: %w", err)
		}
		if len(data) > maxModelRequest {
			return errBodyTooLarge
		}
	}
	r.ContentLength, r.TransferEncoding = int64(len(data)), nil
	if len(data) == 0 {
		r.Body, r.GetBody = http.NoBody, nil
		return nil
	}
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	r.Body, _ = r.GetBody()
	return nil
}

func (g *Gateway) kinds() []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var ks []string
	for k := range g.routes {
		ks = append(ks, "/"+k)
	}
	sort.Strings(ks)
	return ks
}
