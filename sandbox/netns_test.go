package sandbox

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"go.uber.org/goleak"
)

// testNetns is a real network namespace held by a sleeping child process, with lo up.
type testNetns struct {
	pid  int
	path string
}

// newTestNetns starts a process in a new network namespace and brings its lo up;
// t.Cleanup kills it by pid.
//
// The child is `cat` reading a pipe we hold rather than a Pdeathsig'd sleep: Pdeathsig
// fires when the forking *thread* exits, which a Go program does not control, while
// the pipe closes only when this whole process ends, and then cat exits too.
func newTestNetns(t testing.TB) testNetns {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("cat")
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		t.Fatalf("start process in new netns: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		w.Close()
	})
	ns := testNetns{pid: cmd.Process.Pid, path: fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)}
	inNetns(t, ns.path, func() error { return LoopbackUp() })
	return ns
}

// inNetns runs fn in the namespace at path (runInNetns) and fails the test on an
// error from either.
func inNetns(t testing.TB, path string, fn func() error) {
	t.Helper()
	target, err := os.Open(path)
	if err != nil {
		t.Fatalf("in netns %s: %v", path, err)
	}
	defer target.Close()
	var fnErr error
	if err := runInNetns(target, func() { fnErr = fn() }); err != nil {
		t.Fatalf("in netns %s: %v", path, err)
	}
	if fnErr != nil {
		t.Fatalf("in netns %s: %v", path, fnErr)
	}
}

// testServer listens on 127.0.0.1:4173 inside a netns. Per connection it writes its
// name and a newline, then echoes everything until the client half-closes.
type testServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func startTestServer(t testing.TB, ns testNetns, name string) *testServer {
	t.Helper()
	s := &testServer{conns: map[net.Conn]struct{}{}}
	// The listening socket keeps the namespace it was created in, so accepting can
	// happen on any thread afterwards.
	inNetns(t, ns.path, func() (err error) {
		s.ln, err = net.Listen("tcp", "127.0.0.1:4173")
		return err
	})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				fmt.Fprintf(c, "%s\n", name)
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *testServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func newForwarder(t testing.TB, ns testNetns) *PortForwarder {
	t.Helper()
	f, err := NewPortForwarder(ns.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// greeting dials a host endpoint and returns the first line the sandbox sends.
func greeting(t testing.TB, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read greeting from %s: %v", addr, err)
	}
	return strings.TrimSpace(line)
}

func TestNetnsLoopbackUp(t *testing.T) {
	requireRoot(t)
	ns := newTestNetns(t) // brings lo up
	inNetns(t, ns.path, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if lo.Attrs().Flags&net.FlagUp == 0 {
			return fmt.Errorf("lo is not up: flags %v", lo.Attrs().Flags)
		}
		return nil
	})
}

func TestForwardTwoSandboxesSamePort(t *testing.T) {
	requireRoot(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	a, b := newTestNetns(t), newTestNetns(t)
	sa, sb := startTestServer(t, a, "sandbox-a"), startTestServer(t, b, "sandbox-b")
	fa, fb := newForwarder(t, a), newForwarder(t, b)
	epA, err := fa.Expose(4173, 0)
	if err != nil {
		t.Fatal(err)
	}
	epB, err := fb.Expose(4173, 0)
	if err != nil {
		t.Fatal(err)
	}
	if epA.Host == epB.Host {
		t.Fatalf("both sandboxes exposed at %s", epA.Host)
	}
	for range 3 { // several connections each, interleaved
		if got := greeting(t, epA.Host); got != "sandbox-a" {
			t.Errorf("%s answered %q, want sandbox-a", epA.Host, got)
		}
		if got := greeting(t, epB.Host); got != "sandbox-b" {
			t.Errorf("%s answered %q, want sandbox-b", epB.Host, got)
		}
	}
	if got := fa.Endpoints(); len(got) != 1 || got[0] != epA {
		t.Errorf("Endpoints() = %v, want [%v]", got, epA)
	}
	// Close everything now so the leak check sees the end of every goroutine.
	for _, f := range []*PortForwarder{fa, fb} {
		if err := f.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	sa.close()
	sb.close()
}

func TestForwardExposeErrors(t *testing.T) {
	requireRoot(t)
	ns := newTestNetns(t)
	f := newForwarder(t, ns)

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	_, err = f.Expose(4173, busyPort)
	if want := fmt.Sprintf("host port %d already in use", busyPort); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Expose on busy port: err = %v, want %q", err, want)
	}

	ep, err := f.Expose(4173, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Expose(4173, 0)
	if want := "port 4173 already exposed at " + ep.Host; err == nil || err.Error() != want {
		t.Errorf("duplicate Expose: err = %v, want %q", err, want)
	}
	for _, bad := range [][2]int{{0, 0}, {70000, 0}, {80, -1}, {80, 65536}} {
		if _, err := f.Expose(bad[0], bad[1]); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("Expose(%d, %d): err = %v, want out of range", bad[0], bad[1], err)
		}
	}
	f.Close()
	if _, err := f.Expose(5000, 0); err == nil {
		t.Error("Expose after Close succeeded")
	}
	if _, err := NewPortForwarder("/proc/self/status"); err == nil {
		t.Error("NewPortForwarder on a non-namespace file succeeded")
	}
}

func TestForwardLargeTransfer(t *testing.T) {
	requireRoot(t)
	ns := newTestNetns(t)
	startTestServer(t, ns, "big")
	f := newForwarder(t, ns)
	ep, err := f.Expose(4173, 0)
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 8<<20)
	rand.Read(payload)

	c, err := net.Dial("tcp", ep.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	// Write while reading: the echo would otherwise fill both socket buffers and stall.
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite() // the half-close must reach the sandbox
		}
		werr <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read echo: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
	want := append([]byte("big\n"), payload...)
	if !bytes.Equal(got, want) {
		t.Fatalf("echo differs: got %d bytes sha256 %x, want %d bytes sha256 %x",
			len(got), sha256.Sum256(got), len(want), sha256.Sum256(want))
	}
}

func TestForwardCloseCutsLiveConnections(t *testing.T) {
	requireRoot(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ns := newTestNetns(t)
	srv := startTestServer(t, ns, "live")
	f := newForwarder(t, ns)
	ep, err := f.Expose(4173, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", ep.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	if line, err := r.ReadString('\n'); err != nil || line != "live\n" {
		t.Fatalf("greeting = %q, %v", line, err)
	}
	// The connection is idle and open at both ends: Close must cut it, not wait for it.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadByte(); err == nil {
		t.Error("connection still open after Close")
	}
	if c2, err := net.DialTimeout("tcp", ep.Host, time.Second); err == nil {
		c2.Close()
		t.Errorf("%s still accepts after Close", ep.Host)
	}
	srv.close()
}

func TestForwardInsideNotListening(t *testing.T) {
	requireRoot(t)
	ns := newTestNetns(t)
	f := newForwarder(t, ns)
	ep, err := f.Expose(9, 0) // nothing listens on 9 inside
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", ep.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("read %d bytes from a port nobody listens on", n)
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || p > 65535 || seen[p] {
			t.Fatalf("FreePorts(5) = %v: bad or repeated port %d", ports, p)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d from FreePorts is not free: %v", p, err)
		}
		ln.Close()
	}
	if ports, err := FreePorts(0); err != nil || len(ports) != 0 {
		t.Errorf("FreePorts(0) = %v, %v", ports, err)
	}
}

// BenchmarkForwardDial measures one forwarded connection: host accept, setns dial
// inside, and the first bytes back.
func BenchmarkForwardDial(b *testing.B) {
	requireRoot(b)
	ns := newTestNetns(b)
	startTestServer(b, ns, "bench")
	f := newForwarder(b, ns)
	ep, err := f.Expose(4173, 0)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, len("bench\n"))
	for b.Loop() {
		c, err := net.Dial("tcp", ep.Host)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
