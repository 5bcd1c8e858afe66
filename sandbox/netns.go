package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// LoopbackUp brings lo up in the calling thread's network namespace (the sandbox init
// calls it as PID 1 of a fresh netns, where lo starts down and even 127.0.0.1 is
// unreachable) using netlink.
func LoopbackUp() error {
	// NewHandle opens its netlink socket in the namespace of the calling thread, so a
	// caller that has setns'd a locked thread configures the namespace it means to.
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("bring lo up: open netlink socket: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("bring lo up: find lo: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bring lo up: set lo up: %w", err)
	}
	return nil
}

// Endpoint is one exposed port: Inside is the port in the sandbox, Host the
// "127.0.0.1:P" address on the host.
type Endpoint struct {
	Inside int    `json:"inside"`
	Host   string `json:"host"`
}

// dialTimeout bounds one dial inside the sandbox; the peer is on the same machine, so
// anything slower means the server inside is wedged, not that the network is slow.
const dialTimeout = 5 * time.Second

// PortForwarder exposes ports of a process's network namespace on the host. Each
// accepted host connection is matched by one dialled inside the namespace; sandboxes
// can therefore all listen on the same port (say 4173) without colliding.
type PortForwarder struct {
	nsPath string
	ns     *os.File // held open so the namespace outlives its processes while we serve

	ctx    context.Context // cancelled by Close to abort dials in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loops and connection handlers

	mu        sync.Mutex
	closed    bool
	endpoints []Endpoint
	listeners map[int]net.Listener // by inside port
	conns     connSet              // live connections, both host and inside ends
}

// NewPortForwarder opens the network namespace at netnsPath (e.g. "/proc/<pid>/ns/net")
// and keeps the fd, so the namespace stays valid even if its processes exit first.
func NewPortForwarder(netnsPath string) (*PortForwarder, error) {
	ns, err := os.Open(netnsPath)
	if err != nil {
		return nil, fmt.Errorf("port forwarder: open netns: %w", err)
	}
	// Setns with the wrong fd kind fails only at the first connection; checking the
	// namespace type now reports a bad path where it was given.
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(ns.Fd()), &st); err != nil || st.Type != unix.NSFS_MAGIC {
		ns.Close()
		return nil, fmt.Errorf("port forwarder: %s is not a namespace file", netnsPath)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &PortForwarder{
		nsPath:    netnsPath,
		ns:        ns,
		ctx:       ctx,
		cancel:    cancel,
		listeners: map[int]net.Listener{},
	}, nil
}

// Expose listens on 127.0.0.1:hostPort (0 picks a free port) and forwards each
// connection to 127.0.0.1:inside in the sandbox's namespace.
func (f *PortForwarder) Expose(inside int, hostPort int) (Endpoint, error) {
	if inside < 1 || inside > 65535 {
		return Endpoint{}, fmt.Errorf("expose port %d: inside port out of range 1-65535", inside)
	}
	if hostPort < 0 || hostPort > 65535 {
		return Endpoint{}, fmt.Errorf("expose port %d: host port %d out of range 0-65535", inside, hostPort)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return Endpoint{}, fmt.Errorf("expose port %d: forwarder for %s is closed", inside, f.nsPath)
	}
	if ln, ok := f.listeners[inside]; ok {
		return Endpoint{}, classed(ErrPortLeased, fmt.Errorf("port %d already exposed at %s", inside, ln.Addr()))
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(hostPort)))
	if errors.Is(err, syscall.EADDRINUSE) {
		return Endpoint{}, classed(ErrPortLeased, fmt.Errorf("expose port %d: host port %d already in use", inside, hostPort))
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("expose port %d: listen on host: %w", inside, err)
	}
	ep := Endpoint{Inside: inside, Host: ln.Addr().String()}
	f.listeners[inside] = ln
	f.endpoints = append(f.endpoints, ep)
	f.wg.Add(1)
	go f.acceptLoop(ln, inside)
	return ep, nil
}

// Unexpose stops listening for a port exposed before; connections already forwarded
// go on until either side closes them.
func (f *PortForwarder) Unexpose(inside int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ln, ok := f.listeners[inside]
	if !ok {
		return fmt.Errorf("unexpose port %d: not exposed", inside)
	}
	delete(f.listeners, inside)
	for i, ep := range f.endpoints {
		if ep.Inside == inside {
			f.endpoints = append(f.endpoints[:i], f.endpoints[i+1:]...)
			break
		}
	}
	return ln.Close()
}

// Endpoints returns the exposed ports in the order they were exposed.
func (f *PortForwarder) Endpoints() []Endpoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Endpoint(nil), f.endpoints...)
}

// Close stops the listeners, closes every live connection and waits for all of the
// forwarder's goroutines to end. It is safe to call more than once.
func (f *PortForwarder) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.cancel()
	var errs []error
	for inside, ln := range f.listeners {
		if err := ln.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close listener for port %d: %w", inside, err))
		}
	}
	f.mu.Unlock()
	f.conns.closeAll()
	f.wg.Wait()
	if err := f.ns.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close netns %s: %w", f.nsPath, err))
	}
	return errors.Join(errs...)
}

// acceptLoop serves one listener until Close closes it.
func (f *PortForwarder) acceptLoop(ln net.Listener, inside int) {
	defer f.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// EMFILE and friends pass; spinning on them would burn a core while the
			// host is already short of descriptors.
			select {
			case <-f.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if !f.conns.track(c) {
			continue
		}
		f.wg.Add(1)
		go f.forward(c.(*net.TCPConn), inside)
	}
}

// connSet holds the live connections of a forwarder or relay so that closing it cuts
// them; once closed it refuses new ones.
type connSet struct {
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

// track registers a live connection; on a closed set it closes the connection instead
// and reports false.
func (s *connSet) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	return true
}

// untrack forgets a connection and closes it.
func (s *connSet) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

// closeAll closes every live connection and refuses new ones; it reports false when
// the set was closed already.
func (s *connSet) closeAll() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	return true
}

// splice tracks out in set and copies a and out both ways until both directions have
// ended; it closes both.
func splice(set *connSet, in, out *net.TCPConn) {
	defer set.untrack(in)
	if !set.track(out) {
		return
	}
	defer set.untrack(out)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(out, in)
	}()
	pipe(in, out)
	<-done
}

// forward connects one host connection to inside and copies both ways until both
// directions have ended.
func (f *PortForwarder) forward(host *net.TCPConn, inside int) {
	defer f.wg.Done()
	sb, err := f.dialInside(inside)
	if err != nil {
		// The client sees the connection close; there is no channel to tell it why.
		f.conns.untrack(host)
		return
	}
	splice(&f.conns, host, sb)
}

// pipe copies src to dst. At EOF it half-closes dst, so a client that shuts down its
// writing side (as HTTP/1.0 clients and `nc -N` do) still receives the reply. On an
// error it closes both, which also ends the copy running the other way.
func pipe(dst, src *net.TCPConn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	if err := dst.CloseWrite(); err != nil {
		dst.Close()
		src.Close()
	}
}

// dialInside connects to 127.0.0.1:port inside the forwarder's netns.
//
// The socket is created on a thread switched into the sandbox's namespace (runInNetns).
// Only the dial happens there: IP literals only, because a name lookup would run on
// other threads in the host namespace.
func (f *PortForwarder) dialInside(port int) (*net.TCPConn, error) {
	var c net.Conn
	var dialErr error
	err := runInNetns(f.ns, func() {
		d := net.Dialer{Timeout: dialTimeout}
		c, dialErr = d.DialContext(f.ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	})
	if err != nil {
		if c != nil {
			c.Close()
		}
		return nil, fmt.Errorf("dial port %d in %s: %w", port, f.nsPath, err)
	}
	if dialErr != nil {
		return nil, fmt.Errorf("dial port %d in %s: %w", port, f.nsPath, dialErr)
	}
	return c.(*net.TCPConn), nil
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1 (for the "host" network
// mode, where a session gets its ports through its environment). The ports are free
// when returned; nothing reserves them afterwards.
func FreePorts(n int) ([]int, error) {
	if n < 0 {
		return nil, fmt.Errorf("free ports: negative count %d", n)
	}
	// All listeners stay open until every port is chosen, so the kernel cannot hand
	// out the same port twice.
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free ports: listen on 127.0.0.1:0 (%d of %d): %w", len(ports)+1, n, err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
