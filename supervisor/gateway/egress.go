package gateway

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// AllowList compiles host patterns: "host" matches itself, "*.domain" any subdomain of
// domain, "*" anything. Ports are not part of a pattern.
func AllowList(patterns []string) (func(host string) bool, error) {
	exact := map[string]bool{}
	var suffixes []string
	any := false
	for _, p := range patterns {
		p = strings.ToLower(strings.TrimSpace(p))
		switch {
		case p == "*":
			any = true
		case strings.HasPrefix(p, "*.") && len(p) > 2 && !strings.ContainsAny(p[2:], "*:/"):
			suffixes = append(suffixes, p[1:])
		case p != "" && !strings.ContainsAny(p, "*:/ "):
			exact[p] = true
		default:
			return nil, fmt.Errorf("allow %q: want a host name, *.domain or *", p)
		}
	}
	return func(host string) bool {
		host = strings.ToLower(strings.TrimSuffix(host, "."))
		if any || exact[host] {
			return true
		}
		for _, s := range suffixes {
			if strings.HasSuffix(host, s) {
				return true
			}
		}
		return false
	}, nil
}

// refuse answers a disallowed egress attempt and reports it.
func (g *Gateway) refuse(session, host string, w http.ResponseWriter) {
	if g.cfg.OnRefused != nil {
		g.cfg.OnRefused(session, host)
	}
	http.Error(w, fmt.Sprintf("corral gateway: %s is not in the plan's egress allowlist (gateway.allow)", host), http.StatusForbidden)
}

// forwardEgress proxies a plain-HTTP request to an allowed host.
func (g *Gateway) forwardEgress(session string, w http.ResponseWriter, r *http.Request) {
	if !g.allowHost(r.URL.Hostname()) {
		g.refuse(session, r.URL.Hostname(), w)
		return
	}
	// A body sent on while the answer is already coming back (an upload the server
	// answers early) must not be drained and closed under the transport when the
	// answer's header goes out; see bufferBody. Egress bodies can be large, so they
	// are streamed, with the server told to allow it.
	if r.ContentLength != 0 {
		http.NewResponseController(w).EnableFullDuplex()
	}
	g.egressRP.ServeHTTP(w, r)
}

// tunnel serves CONNECT host:port (HTTPS through the proxy): the bytes are the
// session's own TLS, passed through; only the host is checked.
func (g *Gateway) tunnel(session string, st *sessionState, w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		http.Error(w, "corral gateway: CONNECT wants host:port", http.StatusBadRequest)
		return
	}
	if !g.allowHost(host) {
		g.refuse(session, host, w)
		return
	}
	up, err := (&net.Dialer{Timeout: 30 * time.Second}).DialContext(r.Context(), "tcp", r.Host)
	if err != nil {
		http.Error(w, "corral gateway: "+err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "corral gateway: cannot tunnel over this connection", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		up.Close()
		down.Close()
		return
	}
	st.mu.Lock()
	st.tunnels[down], st.tunnels[up] = struct{}{}, struct{}{}
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		delete(st.tunnels, down)
		delete(st.tunnels, up)
		st.mu.Unlock()
		down.Close()
		up.Close()
	}()
	// When either side ends the tunnel ends: closing both (deferred) stops the other copy.
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(up, buf) // whatever the client sent after its CONNECT is already in buf
		done <- struct{}{}
	}()
	go func() {
		io.Copy(down, up)
		done <- struct{}{}
	}()
	<-done
}
