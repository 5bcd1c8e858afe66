package sandbox

import (
	"fmt"
	"net"
	"os"
	"runtime"
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
// As in dialInside, the socket is made on a locked thread that has setns'd into the
// namespace; if switching back fails the thread stays locked and dies with its
// goroutine instead of serving others in the wrong namespace.
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
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		ln, err := listenOnLockedThread(ns, netnsPath, port)
		ch <- result{ln, err}
	}()
	r := <-ch
	return r.ln, r.err
}

func listenOnLockedThread(ns *os.File, nsPath string, port int) (net.Listener, error) {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("listen on port %d in %s: open own netns: %w", port, nsPath, err)
	}
	defer orig.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("listen on port %d in %s: setns: %w", port, nsPath, err)
	}
	// The init brings lo up too, but concurrently: without lo up there is no
	// 127.0.0.1 to bind. Setting it up twice is harmless.
	listenErr := LoopbackUp()
	var ln net.Listener
	if listenErr == nil {
		ln, listenErr = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, fmt.Errorf("listen on port %d in %s: setns back to host: %w", port, nsPath, err)
	}
	runtime.UnlockOSThread()
	if listenErr != nil {
		return nil, fmt.Errorf("listen on port %d in %s: %w", port, nsPath, listenErr)
	}
	return ln, nil
}
