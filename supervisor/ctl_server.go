package supervisor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"corral/sandbox"
)

// ctlServer is one session's end of the workspace protocol: a Unix socket in a host
// directory of its own, bound read-only into that session's sandbox (and no other) at
// CtlDirInside. Every call on it is the session's.
type ctlServer struct {
	s       *Supervisor
	session string
	dir     string
	ln      *net.UnixListener
	pidNS   string // the session's pid namespace: only its processes may call

	done chan struct{} // closed by close: calls in progress (wait) give up
	mu   sync.Mutex
	conn map[net.Conn]struct{}
	shut bool
}

// ctlBase is the host directory holding every session's control directory. Socket
// paths must fit 108 bytes, so it is short and outside the repository.
func (s *Supervisor) ctlBase() string {
	if s.cfg.CtlDir != "" {
		return s.cfg.CtlDir
	}
	if os.Geteuid() == 0 {
		return "/run/corral"
	}
	return filepath.Join(os.TempDir(), "corral-"+strconv.Itoa(os.Getuid()))
}

// openCtl makes the session's control directory and socket. The socket belongs to
// the agent's user (mode 0600); the directories only let it through.
func (s *Supervisor) openCtl(session string, user *sandbox.User) (*ctlServer, error) {
	base := s.ctlBase()
	if err := os.MkdirAll(base, 0o711); err != nil {
		return nil, fmt.Errorf("control directory: %w", err)
	}
	dir := filepath.Join(base, sandbox.FleetKey(s.repo)+"-"+session)
	os.RemoveAll(dir) // a dead supervisor's leftover for a never-reused id
	if err := os.Mkdir(dir, 0o711); err != nil {
		return nil, fmt.Errorf("control directory: %w", err)
	}
	sock := filepath.Join(dir, "ctl.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	os.Chmod(sock, 0o600)
	if user != nil {
		os.Chown(sock, user.UID, user.GID)
	}
	return &ctlServer{s: s, session: session, dir: dir, ln: ln, done: make(chan struct{}), conn: map[net.Conn]struct{}{}}, nil
}

// binds and env are what the sandbox needs to reach the server: the directory at a
// fixed path, the corral binary on PATH, and CORRAL_CTL naming the socket.
func (c *ctlServer) binds(binary string) []sandbox.Bind {
	b := []sandbox.Bind{{Path: c.dir, Target: CtlDirInside}}
	if binary != "" {
		b = append(b, sandbox.Bind{Path: binary, Target: CtlBinInside + "/corral"})
	}
	return b
}

func (c *ctlServer) env(binary string) []string {
	env := []string{"CORRAL_CTL=" + CtlSocketInside}
	if binary != "" {
		env = append(env, "PATH="+CtlBinInside+":"+os.Getenv("PATH"))
	}
	return env
}

// SocketPath is the socket as the host sees it.
func (c *ctlServer) SocketPath() string { return filepath.Join(c.dir, "ctl.sock") }

// serve starts answering, once the session's init (pid) runs: its pid namespace is
// what a caller must be in.
func (c *ctlServer) serve(pid int) {
	c.pidNS, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	go c.acceptLoop()
}

func (c *ctlServer) acceptLoop() {
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !c.track(conn) {
			return
		}
		go c.handle(conn)
	}
}

func (c *ctlServer) track(conn net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shut {
		conn.Close()
		return false
	}
	c.conn[conn] = struct{}{}
	return true
}

func (c *ctlServer) untrack(conn net.Conn) {
	c.mu.Lock()
	delete(c.conn, conn)
	c.mu.Unlock()
	conn.Close()
}

// handle answers one request. The caller must be a process of this session: the
// socket is visible in no other sandbox, and a host process that finds it on disk is
// refused by its pid namespace.
func (c *ctlServer) handle(conn net.Conn) {
	defer c.untrack(conn)
	reply := func(data any, err error) {
		resp := CtlResponse{OK: err == nil}
		if err != nil {
			resp.Error = err.Error()
		} else {
			resp.Data = jsonData(data)
		}
		json.NewEncoder(conn).Encode(resp)
	}
	// The request is read before the caller is checked, so a refused caller reads
	// its refusal instead of a broken pipe.
	dec := json.NewDecoder(bufio.NewReader(io.LimitReader(conn, 1<<20)))
	dec.DisallowUnknownFields()
	var req CtlRequest
	decErr := dec.Decode(&req)
	if err := c.checkPeer(conn.(*net.UnixConn)); err != nil {
		reply(nil, err)
		return
	}
	if decErr != nil {
		reply(nil, fmt.Errorf("bad request: %w", decErr))
		return
	}
	// The client sends nothing after its request: a read returning means it left,
	// and a blocking call (wait, publish, ask) stops waiting for it.
	gone := make(chan struct{})
	go func() {
		var b [1]byte
		conn.Read(b[:])
		close(gone)
	}()
	cancel := make(chan struct{})
	go func() {
		select {
		case <-gone:
		case <-c.done:
		}
		close(cancel)
	}()
	reply(c.s.ctlDispatch(c.session, req, cancel))
}

// checkPeer refuses a caller outside the session's pid namespace.
func (c *ctlServer) checkPeer(conn *net.UnixConn) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if cerr != nil {
		return fmt.Errorf("control socket: peer credentials: %w", cerr)
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", cred.Pid))
	if err != nil || c.pidNS == "" || ns != c.pidNS {
		return fmt.Errorf("control socket of session %s: caller (pid %d) is not a process of that session", c.session, cred.Pid)
	}
	return nil
}

// close stops the server: the socket goes, calls in progress are cut. It does not wait
// for their handlers (which may be queued for the loop that calls close).
func (c *ctlServer) close() {
	c.mu.Lock()
	if c.shut {
		c.mu.Unlock()
		return
	}
	c.shut = true
	close(c.done)
	c.ln.Close()
	for conn := range c.conn {
		conn.Close()
	}
	c.mu.Unlock()
	os.RemoveAll(c.dir)
}

// closeProtocol ends what the workspace protocol holds for a session that ends: its
// socket, the relays into its namespace, its needs-input watcher and open items.
func (s *Supervisor) closeProtocol(ls *liveSession) {
	if ls.ctl != nil {
		ls.ctl.close()
	}
	for name, r := range ls.relays {
		r.Close()
		delete(ls.relays, name)
	}
	if ls.quiet != nil {
		close(ls.quiet)
		ls.quiet = nil
	}
	s.closeSessionInbox(ls.rec.ID)
}

// CtlSocket returns a live session's control socket as the host sees it, and its
// init's pid. Only processes in that session's pid namespace may call it.
func (s *Supervisor) CtlSocket(session string) (path string, pid int, ok bool) {
	s.call(func() {
		if ls := s.sessions[session]; ls != nil && ls.ctl != nil {
			path, pid, ok = ls.ctl.SocketPath(), ls.rec.Pid, true
		}
	})
	return path, pid, ok
}

// reapCtl removes the control directories a dead supervisor of this fleet left (its
// sockets answer no one). It runs at start, before any session of this run exists.
func (s *Supervisor) reapCtl() {
	dirs, _ := filepath.Glob(filepath.Join(s.ctlBase(), sandbox.FleetKey(s.repo)+"-*"))
	for _, d := range dirs {
		os.RemoveAll(d)
	}
}
