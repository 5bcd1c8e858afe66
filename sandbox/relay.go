package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Relay makes an address outside a sandbox reachable from inside it: it listens on
// 127.0.0.1 in the sandbox's network namespace and, for each connection, dials the
// target from the host's. This is how one session reaches a service another session
// leased: the owner's port is exposed on the host (PortForwarder), and the caller gets
// a relay to that endpoint inside its own namespace, where an empty netns otherwise
// reaches nothing.
type Relay struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	conns  connSet
}

// NewRelay listens in the namespace at netnsPath on 127.0.0.1:port — or on a free port
// when port is 0 or already taken there — and forwards to target (an IP:port literal
// on the host).
func NewRelay(netnsPath string, port int, target string) (*Relay, error) {
	ln, err := ListenIn(netnsPath, port)
	if err != nil && port != 0 && errors.Is(err, syscall.EADDRINUSE) {
		ln, err = ListenIn(netnsPath, 0)
	}
	if err != nil {
		return nil, err
	}
	r := &Relay{ln: ln, target: target}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr is the relay's address inside the sandbox, e.g. 127.0.0.1:4173.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Target is the host address the relay forwards to.
func (r *Relay) Target() string { return r.target }

// Close stops the relay and cuts its connections.
func (r *Relay) Close() error {
	if !r.conns.closeAll() {
		return nil
	}
	err := r.ln.Close()
	r.wg.Wait()
	return err
}

func (r *Relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !r.conns.track(c) {
			continue
		}
		r.wg.Add(1)
		go r.forward(c.(*net.TCPConn))
	}
}

func (r *Relay) forward(in *net.TCPConn) {
	defer r.wg.Done()
	out, err := net.DialTimeout("tcp", r.target, dialTimeout)
	if err != nil {
		r.conns.untrack(in) // the owner's service is gone: the caller sees the connection close
		return
	}
	splice(&r.conns, in, out.(*net.TCPConn))
}

// ListenIn opens a TCP listener on 127.0.0.1:port inside the network namespace at
// netnsPath (0 picks a free port there). Only the socket is made inside the namespace
// (runInNetns); the socket keeps it afterwards.
func ListenIn(netnsPath string, port int) (net.Listener, error) {
	ns, err := os.Open(netnsPath)
	if err != nil {
		return nil, fmt.Errorf("listen in %s: %w", netnsPath, err)
	}
	defer ns.Close()
	var ln net.Listener
	var lerr error
	if err := runInNetns(ns, func() {
		ln, lerr = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}); err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, fmt.Errorf("listen in %s: %w", netnsPath, err)
	}
	if lerr != nil {
		return nil, fmt.Errorf("listen on port %d in %s: %w", port, netnsPath, lerr)
	}
	return ln, nil
}
