package sandbox

import (
	"io"
	"net"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/usr/bin", "HOME=/root"}, []string{"PATH=/x:/usr/bin", "A=1", "A=2"})
	if want := "PATH=/x:/usr/bin HOME=/root A=2"; strings.Join(got, " ") != want {
		t.Errorf("mergeEnv = %q, want %q", got, want)
	}
}

// TestRelay forwards a connection made to the relay's address (here in the test's own
// namespace; sessions use their sandbox's) to the target and back.
func TestRelay(t *testing.T) {
	requireRoot(t) // setns, even into one's own namespace, needs CAP_SYS_ADMIN
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 5)
				io.ReadFull(c, buf)
				c.Write([]byte("got " + string(buf)))
			}()
		}
	}()
	r, err := NewRelay("/proc/self/ns/net", 0, srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("hello"))
	c.(*net.TCPConn).CloseWrite()
	out, _ := io.ReadAll(c)
	c.Close()
	if string(out) != "got hello" {
		t.Errorf("through the relay: %q", out)
	}
	// A port taken in the namespace falls back to a free one.
	r2, err := NewRelay("/proc/self/ns/net", srv.Addr().(*net.TCPAddr).Port, srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if r2.Addr() == srv.Addr().String() {
		t.Errorf("second relay took the server's own address")
	}
	r2.Close()
	if err := r.Close(); err != nil {
		t.Error(err)
	}
	if _, err := net.Dial("tcp", r.Addr()); err == nil {
		t.Error("the relay still listens after Close")
	}
}
