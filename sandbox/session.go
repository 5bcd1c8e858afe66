package sandbox

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Network is how a session reaches (and is reached from) the network.
type Network string

const (
	// NetPrivate gives the session its own network namespace with only lo; declared
	// ports are exposed on distinct host endpoints.
	NetPrivate Network = "private"
	// NetHost shares the host's network; each declared port is replaced by a distinct
	// free host port handed to the agent as CORRAL_PORT_<port>.
	NetHost Network = "host"
)

// Port is one port a session declares: Inside is what the agent binds; Host is the
// host port to expose it on (0 = any free one).
type Port struct {
	Inside int `json:"inside"`
	Host   int `json:"host,omitempty"`
}

// Service is a host-side server offered to a session. In private networking the
// session listens on 127.0.0.1:Port inside its own netns; in host networking on a free
// host loopback port. Serve runs in its own goroutine with that listener and must
// return once the listener is closed (when the session's processes are gone); Env
// turns the address the agent dials ("127.0.0.1:P") into the environment that names it.
type Service struct {
	Name  string
	Port  int
	Serve func(ln net.Listener)
	Env   func(addr string) []string
}

// User is who the agent runs as.
type User struct {
	UID, GID int
	Groups   []int
	Name     string
	Home     string
}

// SessionConfig describes one sandboxed session.
type SessionConfig struct {
	ID       string    // unique and never reused, e.g. "checkout-2"
	Repo     Repo      // the repository; the workspace appears at Repo.WorkTree
	Snapshot *Snapshot // the base revision's snapshot
	Command  []string  // argv of the agent
	Env      []string  // extra environment (CORRAL_TASK, CORRAL_PROMPT, ...); a key given here replaces the default's (PATH)
	Ports    []Port
	Network  Network // NetPrivate by default
	Limits   Limits
	EnvFiles []string // work-tree paths (gitignored files: .env, node_modules) visible read-only, never captured
	Binds    []Bind   // extra host paths, read-only unless Writable
	// HomeFiles are written into the agent's private HOME before it starts (path
	// relative to HOME → content), e.g. the agent's MCP configuration.
	HomeFiles map[string]string
	User      *User // nil: the invoking user (SUDO_UID under sudo), else the current one
	Cols      int
	Rows      int
	RingSize  int       // bytes of output kept for live panes
	Pool      *InitPool // spare inits to start from; nil starts one cold
	// Services are host-side servers the agent reaches on its own loopback (the model
	// gateway); see Service.
	Services []Service
	// AdoptLayer is an existing private layer (an interrupted session's upper dir) to
	// continue from: it is moved, not copied, into this session.
	AdoptLayer string
	// Recording is the asciicast file of the terminal; "" puts it in the session's
	// directory, which Destroy removes unless the layer is kept. The supervisor keeps
	// recordings apart, so a run can be replayed after its sessions are gone.
	Recording string
	// RecordingLimit bounds the recording's output bytes (0: DefaultRecordingLimit,
	// <0: no limit).
	RecordingLimit int64
}

// ExitStatus is how an agent ended.
type ExitStatus struct {
	Code   int    `json:"code"`             // exit code; 128+N when killed by signal N
	Signal string `json:"signal,omitempty"` // the signal's name when killed by one
}

// SessionMeta is what a session leaves on disk so a later process can find it.
type SessionMeta struct {
	ID       string    `json:"id"`
	Commit   string    `json:"commit"`
	Layers   []string  `json:"layers"`
	EnvFiles []string  `json:"env_files,omitempty"`
	Cgroup   string    `json:"cgroup"`
	Created  time.Time `json:"created"`
}

// StartTimings says where the time to a ready session went.
type StartTimings struct {
	Warm    bool          `json:"warm"`    // started from a spare init of an InitPool
	Setup   time.Duration `json:"setup"`   // checks, user lookup, session directories
	Spawn   time.Duration `json:"spawn"`   // cold only: cgroup, pty, clone into namespaces, exec
	Prepare time.Duration `json:"prepare"` // upper dir, env layer, metadata, ports
	Root    time.Duration `json:"root"`    // init: workspace overlay, HOME, binds, pivot
	Agent   time.Duration `json:"agent"`   // init: exec of the agent
	Handoff time.Duration `json:"handoff"` // config to the init and status back, less Root and Agent
	Total   time.Duration `json:"total"`
}

// Session is a running (or finished) sandbox.
type Session struct {
	cfg     SessionConfig
	dir     string
	upper   string
	lowers  []string
	meta    SessionMeta
	cg      *Cgroup
	cmd     *exec.Cmd
	master  *os.File
	ring    *Ring
	rec     *Recorder
	recPath string
	fwd     *PortForwarder
	svcs    []net.Listener
	ends    []Endpoint
	env     []string // the agent's environment, for Exec
	started time.Time
	timings StartTimings

	done       chan struct{} // closed when the init has exited
	readerDone chan struct{}
	exit       ExitStatus

	mu        sync.Mutex
	frozen    bool
	destroyed bool
}

var sessionIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// sessionDir is where a session's private layer, work dir and recording live. Names
// are one letter: the overlay option string must fit in a page.
func sessionDir(repo Repo, id string) string { return filepath.Join(repo.StateDir, "w", id) }

// FleetKey names this repository's corral state among others on the host: cgroups are
// created under corral/<FleetKey>/ so cleanup never touches another fleet's.
func FleetKey(repo Repo) string {
	sum := sha256.Sum256([]byte(repo.StateDir))
	return hex.EncodeToString(sum[:5])
}

// CgroupPrefix is the cgroup path under which this repository's sessions live.
func CgroupPrefix(repo Repo) string { return "corral/" + FleetKey(repo) + "/" }

// StartSession builds the sandbox and execs the agent; it returns once the agent runs.
// On any error everything it made is undone.
//
// The init is started first: while its Go runtime boots (a few ms) the supervisor
// makes the session's directories, metadata and cgroup, puts the init in the cgroup
// and exposes ports. The init does nothing until it reads its configuration, which is
// sent only then — so no agent code ever runs outside its budget.
func StartSession(cfg SessionConfig) (_ *Session, err error) {
	started := time.Now()
	if err := validateSession(&cfg); err != nil {
		return nil, err
	}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	s := &Session{cfg: cfg, dir: sessionDir(cfg.Repo, cfg.ID), started: started,
		done: make(chan struct{}), readerDone: make(chan struct{})}
	if err := os.MkdirAll(filepath.Dir(s.dir), 0o700); err != nil {
		return nil, fmt.Errorf("session %s: %w", cfg.ID, err)
	}
	if err := os.Mkdir(s.dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("session %s: id already used (%s exists; ids are never reused)", cfg.ID, s.dir)
		}
		return nil, fmt.Errorf("session %s: %w", cfg.ID, err)
	}
	undo = append(undo, func() { os.RemoveAll(s.dir) })
	s.upper = filepath.Join(s.dir, "u")
	if err := os.Mkdir(filepath.Join(s.dir, "k"), 0o755); err != nil {
		return nil, fmt.Errorf("session %s: %w", cfg.ID, err)
	}
	if cfg.AdoptLayer != "" {
		// A rename keeps the work and costs nothing; on failure it goes back.
		if err := os.Rename(cfg.AdoptLayer, s.upper); err != nil {
			return nil, fmt.Errorf("session %s: adopt layer %s: %w", cfg.ID, cfg.AdoptLayer, err)
		}
		undo = append(undo, func() { os.Rename(s.upper, cfg.AdoptLayer) })
	} else if err := os.Mkdir(s.upper, 0o755); err != nil {
		return nil, fmt.Errorf("session %s: %w", cfg.ID, err)
	}

	s.timings.Setup = time.Since(s.started)
	boot := cfg.Pool.take(cfg.Network)
	s.timings.Warm = boot != nil
	if boot == nil {
		// Cold: the cgroup first, while nothing else runs; the init joins it as soon
		// as it exists.
		t0 := time.Now()
		cg, err := NewCgroup(CgroupPrefix(cfg.Repo)+cfg.ID, cfg.Limits)
		if err != nil {
			return nil, fmt.Errorf("session %s: %w", cfg.ID, err)
		}
		undo = append(undo, func() { cg.Kill(); cg.Delete() })
		if boot, err = spawnInit(cfg.Repo, cfg.Network); err != nil {
			return nil, fmt.Errorf("session %s: %w", cfg.ID, err)
		}
		if err := cg.Add(boot.cmd.Process.Pid); err != nil {
			boot.discard()
			return nil, fmt.Errorf("session %s: %w", cfg.ID, err)
		}
		boot.cg = cg
		s.timings.Spawn = time.Since(t0)
	} else {
		undo = append(undo, func() { boot.cg.Kill(); boot.cg.Delete() })
		// A spare's group takes the session's budget.
		if err := boot.cg.Update(cfg.Limits); err != nil {
			boot.discard()
			return nil, fmt.Errorf("session %s: %w", cfg.ID, err)
		}
	}
	s.cg = boot.cg
	tPrepare := time.Now()
	defer boot.closePipes()
	s.cmd, s.master = boot.cmd, boot.master
	undo = append(undo, func() { s.kill(); s.cmd.Wait(); s.cleanupProcess() })
	if err := pty.Setsize(s.master, &pty.Winsize{Cols: uint16(cfg.Cols), Rows: uint16(cfg.Rows)}); err != nil {
		return nil, fmt.Errorf("session %s: pty size: %w", cfg.ID, err)
	}

	// The workspace root's owner and mode come from the upper dir's root.
	if fi, err := os.Stat(cfg.Repo.WorkTree); err == nil {
		st := fi.Sys().(*syscall.Stat_t)
		os.Chown(s.upper, int(st.Uid), int(st.Gid))
		os.Chmod(s.upper, fi.Mode().Perm())
	}
	s.lowers = cfg.Snapshot.Layers
	if len(cfg.EnvFiles) > 0 {
		env := filepath.Join(s.dir, "e")
		if err := buildEnvLayer(cfg.Repo.WorkTree, env, cfg.EnvFiles); err != nil {
			return nil, fmt.Errorf("session %s: env layer: %w", cfg.ID, err)
		}
		s.lowers = append([]string{env}, s.lowers...)
	}
	s.meta = SessionMeta{ID: cfg.ID, Commit: cfg.Snapshot.Commit, Layers: cfg.Snapshot.Layers,
		EnvFiles: cfg.EnvFiles, Cgroup: s.cg.Name(), Created: s.started}
	if err := writeJSON(filepath.Join(s.dir, "meta.json"), s.meta); err != nil {
		return nil, fmt.Errorf("session %s: %w", cfg.ID, err)
	}
	env, err := s.exposePorts()
	if err != nil {
		return nil, err
	}
	s.timings.Prepare = time.Since(tPrepare)
	tHandoff := time.Now()
	if err := s.configureInit(boot, env); err != nil {
		return nil, err
	}
	s.timings.Handoff = time.Since(tHandoff) - s.timings.Root - s.timings.Agent
	s.timings.Total = time.Since(s.started)
	cfg.Pool.refill()
	s.ring = NewRing(cfg.RingSize)
	s.recPath = cfg.Recording
	if s.recPath == "" {
		s.recPath = filepath.Join(s.dir, "rec.cast")
	} else {
		// A failure here shows as the recorder's own error at its first write; the
		// agent already runs and is not stopped for a recording.
		os.MkdirAll(filepath.Dir(s.recPath), 0o700)
	}
	s.rec = NewRecorder(s.recPath, cfg.Cols, cfg.Rows, cfg.ID)
	s.rec.Limit(cfg.RecordingLimit)
	go s.readOutput()
	go s.wait()
	return s, nil
}

// bootedInit is an init that runs, has built the session-independent half of its
// sandbox, and waits for its session's configuration.
type bootedInit struct {
	cmd    *exec.Cmd
	cg     *Cgroup  // a spare's own cgroup, nil for a cold start
	master *os.File // the pty the init (and later the agent) has as its terminal
	config *os.File // write end of the init's configuration pipe
	status *os.File // read end of the init's status pipe
}

// closePipes releases the supervisor's ends of the init's pipes.
func (b *bootedInit) closePipes() {
	b.config.Close()
	b.status.Close()
}

// discard kills an unused init and releases everything it held.
func (b *bootedInit) discard() {
	if b.cg != nil {
		b.cg.Kill()
	}
	b.cmd.Process.Kill()
	b.cmd.Wait()
	if b.cg != nil {
		b.cg.Delete()
	}
	b.closePipes()
	b.master.Close()
}

// alive reports whether the init has not exited, without reaping it.
func (b *bootedInit) alive() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, b.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo == 0
}

// spawnInit starts an init in new namespaces on a fresh pty and sends it the
// session-independent prelude; it then waits, unconfigured, for configureInit.
func spawnInit(repo Repo, network Network) (_ *bootedInit, err error) {
	root := filepath.Join(repo.StateDir, "r")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox root mountpoint: %w", err)
	}
	master, slave, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	defer slave.Close()
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		master.Close()
		return nil, err
	}
	defer cfgR.Close()
	statR, statW, err := os.Pipe()
	if err != nil {
		master.Close()
		cfgW.Close()
		return nil, err
	}
	defer statW.Close()
	b := &bootedInit{master: master, config: cfgW, status: statR}
	defer func() {
		if err != nil {
			b.closePipes()
			master.Close()
		}
	}()
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Args = []string{initArg0}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.ExtraFiles = []*os.File{cfgR, statW}
	flags := uintptr(unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC)
	if network == NetPrivate {
		flags |= unix.CLONE_NEWNET
	}
	// Setsid keeps the supervisor's terminal signals (^C) away from the init;
	// Pdeathsig takes the sandbox down if the supervisor dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags, Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start sandbox init: %w", err)
	}
	b.cmd = cmd
	base, _ := toolchainBinds(repo)
	pre := initPrelude{Root: root, Binds: base, PrivNet: network == NetPrivate}
	if err := json.NewEncoder(cfgW).Encode(pre); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("send prelude to init: %w", err)
	}
	return b, nil
}

// exposePorts makes the session's declared ports reachable from the host and returns
// the agent's environment (which, in host networking, names the ports it got).
func (s *Session) exposePorts() ([]string, error) {
	cfg := s.cfg
	env, ends, err := s.agentEnv()
	if err != nil {
		return nil, err
	}
	svcEnv, err := s.openServices()
	if err != nil {
		return nil, err
	}
	env = append(env, svcEnv...)
	s.ends = ends
	if cfg.Network != NetPrivate || len(cfg.Ports) == 0 {
		return env, nil
	}
	if s.fwd, err = NewPortForwarder(fmt.Sprintf("/proc/%d/ns/net", s.Pid())); err != nil {
		return nil, fmt.Errorf("session %s: %w", cfg.ID, err)
	}
	for _, p := range cfg.Ports {
		ep, err := s.fwd.Expose(p.Inside, p.Host)
		if err != nil {
			return nil, fmt.Errorf("session %s: port %d: %w", cfg.ID, p.Inside, err)
		}
		s.ends = append(s.ends, ep)
	}
	return env, nil
}

// openServices listens for each of the session's services where the agent can reach
// it and starts serving; it returns the environment naming them.
func (s *Session) openServices() ([]string, error) {
	var env []string
	for _, svc := range s.cfg.Services {
		var ln net.Listener
		var err error
		if s.cfg.Network == NetPrivate {
			ln, err = ListenInNetns(fmt.Sprintf("/proc/%d/ns/net", s.Pid()), svc.Port)
		} else {
			ln, err = net.Listen("tcp", "127.0.0.1:0")
		}
		if err != nil {
			return nil, fmt.Errorf("session %s: service %s: %w", s.cfg.ID, svc.Name, err)
		}
		s.svcs = append(s.svcs, ln)
		go svc.Serve(ln)
		if svc.Env != nil {
			env = append(env, svc.Env(ln.Addr().String())...)
		}
	}
	return env, nil
}

// configureInit hands the init its configuration and waits until the agent is exec'd.
func (s *Session) configureInit(boot *bootedInit, env []string) error {
	cfg := s.cfg
	ic, err := s.initConfig(env)
	if err != nil {
		return err
	}
	s.env = env
	if err := json.NewEncoder(boot.config).Encode(ic); err != nil {
		return fmt.Errorf("session %s: send config to init: %w", cfg.ID, err)
	}
	boot.config.Close()
	line, err := bufio.NewReader(boot.status).ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(line, "ok "):
		var pid, root, agent int64
		fmt.Sscanf(line, "ok %d %d %d", &pid, &root, &agent)
		s.timings.Root, s.timings.Agent = time.Duration(root)*time.Microsecond, time.Duration(agent)*time.Microsecond
		return nil
	case strings.HasPrefix(line, "err "):
		return fmt.Errorf("session %s: %s", cfg.ID, strings.TrimPrefix(line, "err "))
	default:
		return fmt.Errorf("session %s: sandbox init died before the agent started (%v)", cfg.ID, err)
	}
}

func (s *Session) initConfig(env []string) (initConfig, error) {
	cfg := s.cfg
	u := cfg.User
	_, binds := toolchainBinds(cfg.Repo)
	binds = append(binds, cfg.Binds...)
	argv := cfg.Command
	return initConfig{
		Hostname:  "corral-" + cfg.ID,
		Workspace: cfg.Repo.WorkTree,
		Lowers:    s.lowers,
		Upper:     s.upper,
		Work:      filepath.Join(s.dir, "k"),
		Objects:   filepath.Join(cfg.Repo.GitDir, "objects"),
		Binds:     binds,
		Home:      u.Home,
		HomeFiles: cfg.HomeFiles,
		UID:       u.UID, GID: u.GID, Groups: u.Groups,
		Env:  env,
		Argv: argv,
	}, nil
}

// agentEnv is the environment the agent sees, and for host networking the endpoints
// it is told to use instead of its declared ports.
func (s *Session) agentEnv() ([]string, []Endpoint, error) {
	cfg := s.cfg
	u := cfg.User
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + u.Home,
		"USER=" + u.Name,
		"LOGNAME=" + u.Name,
		"SHELL=/bin/sh",
		"TERM=xterm-256color",
		"LANG=" + envOr("LANG", "C.UTF-8"),
		"GIT_CONFIG_SYSTEM=/.corral/gitconfig",
		"CORRAL_SESSION=" + cfg.ID,
		"CORRAL_WORKSPACE=" + cfg.Repo.WorkTree,
		"CORRAL_BASE=" + cfg.Snapshot.Commit,
	}
	var ends []Endpoint
	if cfg.Network == NetHost && len(cfg.Ports) > 0 {
		free, err := FreePorts(len(cfg.Ports))
		if err != nil {
			return nil, nil, fmt.Errorf("session %s: %w", cfg.ID, err)
		}
		for i, p := range cfg.Ports {
			host := free[i]
			if p.Host != 0 {
				host = p.Host
			}
			env = append(env, fmt.Sprintf("CORRAL_PORT_%d=%d", p.Inside, host))
			ends = append(ends, Endpoint{Inside: p.Inside, Host: "127.0.0.1:" + strconv.Itoa(host)})
		}
	}
	return mergeEnv(env, cfg.Env), ends, nil
}

// mergeEnv appends extra to env, an extra KEY=… replacing env's entry for KEY in place,
// so the agent (and the init's own PATH lookup) sees one value per key.
func mergeEnv(env, extra []string) []string {
	at := map[string]int{}
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		at[k] = i
	}
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := at[k]; ok {
			env[i] = kv
			continue
		}
		at[k] = len(env)
		env = append(env, kv)
	}
	return env
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// readOutput copies the agent's terminal to the ring and the recording. A pty master
// reports the end with EIO (once every slave is closed), not EOF.
func (s *Session) readOutput() {
	defer close(s.readerDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := s.master.Read(buf)
		if n > 0 {
			s.ring.Write(buf[:n])
			s.rec.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (s *Session) wait() {
	err := s.cmd.Wait()
	st := ExitStatus{}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ws := ee.Sys().(syscall.WaitStatus)
		st.Code = ws.ExitStatus()
		if ws.Signaled() {
			st.Code = 128 + int(ws.Signal())
			st.Signal = unix.SignalName(ws.Signal())
		}
	} else if err != nil {
		st.Code = -1
	}
	if st.Code > 128 && st.Signal == "" {
		st.Signal = unix.SignalName(syscall.Signal(st.Code - 128))
	}
	s.mu.Lock()
	s.exit = st
	s.mu.Unlock()
	close(s.done)
}

// Timings says where the time to this session's start went.
func (s *Session) Timings() StartTimings { return s.timings }

// ID returns the session's id.
func (s *Session) ID() string { return s.cfg.ID }

// Pid returns the init's host pid.
func (s *Session) Pid() int { return s.cmd.Process.Pid }

// Dir returns the session's state directory (upper layer, recording, metadata).
func (s *Session) Dir() string { return s.dir }

// Upper returns the session's private writable layer.
func (s *Session) Upper() string { return s.upper }

// Lowers returns the read-only layers under the workspace, top first.
func (s *Session) Lowers() []string { return s.lowers }

// Endpoints returns where the session's declared ports are reachable on the host.
func (s *Session) Endpoints() []Endpoint { return s.ends }

// Output returns the live output ring.
func (s *Session) Output() *Ring { return s.ring }

// RecordingPath returns the asciicast v2 file of the session's terminal.
func (s *Session) RecordingPath() string { return s.recPath }

// Done is closed when the agent (and with it the sandbox) has exited.
func (s *Session) Done() <-chan struct{} { return s.done }

// Wait blocks until the agent exits and returns its status.
func (s *Session) Wait() ExitStatus {
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exit
}

// Running reports whether the agent has not exited yet.
func (s *Session) Running() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Write types into the agent's terminal.
func (s *Session) Write(p []byte) (int, error) { return s.master.Write(p) }

// Resize changes the agent's terminal size (the agent gets SIGWINCH).
func (s *Session) Resize(cols, rows int) error {
	if err := pty.Setsize(s.master, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
		return fmt.Errorf("session %s: resize: %w", s.cfg.ID, err)
	}
	s.rec.Resize(cols, rows)
	return nil
}

// Signal sends sig to the init, which forwards it to the agent's process group.
func (s *Session) Signal(sig syscall.Signal) error {
	if !s.Running() {
		return nil
	}
	return s.cmd.Process.Signal(sig)
}

// Freeze stops every process of the session where it stands (how corral pauses an agent).
func (s *Session) Freeze() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.cg.Freeze(); err != nil {
		return fmt.Errorf("session %s: %w", s.cfg.ID, err)
	}
	s.frozen = true
	return nil
}

// Thaw resumes a frozen session.
func (s *Session) Thaw() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.cg.Thaw(); err != nil {
		return fmt.Errorf("session %s: %w", s.cfg.ID, err)
	}
	s.frozen = false
	return nil
}

// Frozen reports whether the session is paused.
func (s *Session) Frozen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frozen
}

// Stats reads the session's CPU, memory and pids usage from its cgroup.
func (s *Session) Stats() (CgroupStats, error) { return s.cg.Stats() }

// Capture returns the session's changeset, read from its private layer alone. A
// running session is frozen for the moment it takes, so no write is half-seen.
func (s *Session) Capture() (Changeset, error) {
	if s.Running() && !s.Frozen() {
		if err := s.Freeze(); err != nil {
			return nil, err
		}
		defer s.Thaw()
	}
	cs, err := Capture(CaptureOptions{Upper: s.upper, Lowers: s.lowers, Exclude: s.cfg.EnvFiles})
	if err != nil {
		return nil, fmt.Errorf("session %s: capture: %w", s.cfg.ID, err)
	}
	return cs, nil
}

// kill ends every process of the session: a v1-frozen task ignores SIGKILL until
// thawed, so the cgroup thaws first; the init's own pid is killed too in case it never
// reached the cgroup.
func (s *Session) kill() {
	if s.cg != nil {
		s.cg.Kill()
	}
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
	}
}

// cleanupProcess releases what the running sandbox held on the host side.
func (s *Session) cleanupProcess() {
	s.mu.Lock()
	fwd := s.fwd
	s.mu.Unlock()
	if fwd != nil {
		fwd.Close()
	}
	for _, ln := range s.svcs {
		ln.Close()
	}
	s.svcs = nil
	if s.master != nil {
		s.master.Close()
	}
}

// Destroy takes the session down in order — kill, wait, unmount, delete the cgroup —
// and removes its directory unless keepLayer, in which case the private layer, the
// recording and the metadata stay for inspection or recovery.
func (s *Session) Destroy(keepLayer bool) error {
	s.mu.Lock()
	if s.destroyed {
		s.mu.Unlock()
		return nil
	}
	s.destroyed = true
	s.mu.Unlock()

	var errs []error
	s.kill()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		errs = append(errs, fmt.Errorf("session %s: init %d did not exit after SIGKILL", s.cfg.ID, s.Pid()))
	}
	// The pty reports EIO once the last process holding the slave is gone.
	select {
	case <-s.readerDone:
	case <-time.After(2 * time.Second):
	}
	s.cleanupProcess()
	<-s.readerDone
	if err := s.rec.Close(); err != nil {
		errs = append(errs, fmt.Errorf("session %s: recording: %w", s.cfg.ID, err))
	}
	// Mounts lived in the sandbox's own mount namespace and died with it; anything
	// found under the session dir on the host is a leak from elsewhere, unmount it.
	if _, err := unmountUnder(s.dir); err != nil {
		errs = append(errs, err)
	}
	if err := s.cg.Delete(); err != nil {
		errs = append(errs, fmt.Errorf("session %s: %w", s.cfg.ID, err))
	}
	var err error
	if keepLayer {
		err = os.RemoveAll(filepath.Join(s.dir, "k"))
	} else {
		err = os.RemoveAll(s.dir)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("session %s: remove state: %w", s.cfg.ID, err))
	}
	return errors.Join(errs...)
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o600)
}

// unmountUnder lazily unmounts every mount at or below dir in this mount namespace,
// deepest first, and returns the mount points it removed.
func unmountUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			found = append(found, mp)
		}
	}
	var errs []error
	for i := len(found) - 1; i >= 0; i-- {
		if err := unix.Unmount(found[i], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, mountErr("unmount stale", found[i], err))
		}
	}
	return found, errors.Join(errs...)
}

// unescapeMount decodes the octal escapes (\040 for space) mountinfo uses in paths.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

var _ io.Writer = (*Session)(nil)
