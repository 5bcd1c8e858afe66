package sandbox

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
)

// A session reaches a host service on its own loopback: the listener is bound inside
// its netns (private) or on the host (host network), served by host goroutines, and
// its address reaches the agent through the environment. Each session gets its own
// listener, so the server knows which session each request came from.
func TestSessionServiceReachableFromInside(t *testing.T) {
	repo, snap := sessionFixture(t)
	for _, mode := range []Network{NetPrivate, NetHost} {
		t.Run(string(mode), func(t *testing.T) {
			svc := func(name string) Service {
				return Service{
					Name: "echo",
					Serve: func(ln net.Listener) {
						http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
							fmt.Fprintf(w, "hello %s via %s", name, r.URL.Path)
						}))
					},
					Env: func(addr string) []string { return []string{"SVC_ADDR=" + addr} },
				}
			}
			script := `curl -sS "http://$SVC_ADDR/x"; echo; echo addr=$SVC_ADDR`
			a := testSession(t, repo, snap, script, func(c *SessionConfig) { c.Network = mode; c.Services = []Service{svc("alpha")} })
			b := testSession(t, repo, snap, script, func(c *SessionConfig) { c.Network = mode; c.Services = []Service{svc("beta")} })
			for name, s := range map[string]*Session{"alpha": a, "beta": b} {
				st, out := waitExit(t, s)
				if st.Code != 0 || !strings.Contains(out, "hello "+name+" via /x") {
					t.Errorf("session %s exited %d:\n%s", name, st.Code, out)
				}
				if !strings.Contains(out, "addr=127.0.0.1:") {
					t.Errorf("session %s: no loopback address in env:\n%s", name, out)
				}
			}
		})
	}
}

// The listener is bound in the namespace: the host's own loopback does not answer on
// its port (unless by chance something else listens there).
func TestListenInNetnsIsInsideTheNamespace(t *testing.T) {
	requireRoot(t)
	ns := newTestNetns(t)
	ln, err := ListenInNetns(ns.path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "inside") }))
	port := ln.Addr().(*net.TCPAddr).Port
	var body string
	inNetns(t, ns.path, func() error {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return err
		}
		defer c.Close()
		fmt.Fprintf(c, "GET / HTTP/1.0\r\n\r\n")
		buf := make([]byte, 4096)
		n, _ := c.Read(buf)
		body = string(buf[:n])
		return nil
	})
	if !strings.Contains(body, "inside") {
		t.Errorf("inside the netns got %q", body)
	}
	if _, err := ListenInNetns("/proc/self/status", 0); err == nil {
		t.Error("ListenInNetns accepted a file that is not a namespace")
	}
}
