package sandbox

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ListenInNetns opens a TCP listener on 127.0.0.1:port inside the network namespace at
// netnsPath (e.g. "/proc/<pid>/ns/net"). A socket keeps the namespace it was created
// in, so the listener accepts the sandbox's connections while any goroutine of the
// host serves them — this is how a session with only lo reaches a host service (the
// model gateway) without a route out: one listener per session also says, for free,
// which session each connection came from.
//
// As in dialInside, only the socket is made inside the namespace (runInNetns).
func ListenInNetns(netnsPath string, port int) (net.Listener, error) {
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("listen in %s: port %d out of range 0-65535", netnsPath, port)
	}
	ns, err := os.Open(netnsPath)
	if err != nil {
		return nil, fmt.Errorf("listen in netns: %w", err)
	}
	defer ns.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(ns.Fd()), &st); err != nil || st.Type != unix.NSFS_MAGIC {
		return nil, fmt.Errorf("listen in netns: %s is not a namespace file", netnsPath)
	}
	var ln net.Listener
	var listenErr error
	err = runInNetns(ns, func() {
		// The init brings lo up too, but concurrently: without lo up there is no
		// 127.0.0.1 to bind. Setting it up twice is harmless.
		if listenErr = LoopbackUp(); listenErr == nil {
			ln, listenErr = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		}
	})
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, fmt.Errorf("listen on port %d in %s: %w", port, netnsPath, err)
	}
	if listenErr != nil {
		return nil, fmt.Errorf("listen on port %d in %s: %w", port, netnsPath, listenErr)
	}
	return ln, nil
}
