package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"corral/policies"
	"corral/sandbox"

	"golang.org/x/sys/unix"
)

// runSandbox is `corral sandbox`: the sandbox runtime by hand, before (and beside) the
// supervisor.
func runSandbox(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return badInput("want a subcommand: run, ls, reap, discard, gc")
	}
	switch args[0] {
	case "run":
		return sandboxRun(args[1:], stdout, stderr)
	case "ls":
		return sandboxList(args[1:], stdout, stderr)
	case "reap":
		return sandboxReap(args[1:], stdout, stderr)
	case "discard":
		return sandboxDiscard(args[1:], stdout, stderr)
	case "gc":
		return sandboxGC(args[1:], stdout, stderr)
	}
	return badInput("unknown subcommand %q: want run, ls, reap, discard, gc", args[0])
}

// listFlag collects a repeated string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("corral "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// errHelpShown says -h printed a command's flags: the command stops there (exit 0)
// instead of running with its defaults, which for gc or reap would act on the
// current directory's repository.
var errHelpShown = errors.New("help shown")

// parseFlags turns a flag error into bad input.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelpShown
		}
		return badInput("%v", err)
	}
	return nil
}

func sandboxRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sandbox run", stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	rev := fs.String("rev", "HEAD", "the revision the session starts from")
	id := fs.String("id", "", "session id (default: run-<time>)")
	netMode := fs.String("net", "private", "network: private (own netns, ports exposed) or host")
	cpu := fs.Float64("cpu", 0, "CPU limit in cores (0: none)")
	mem := fs.String("mem", "", "memory limit, e.g. 512M (empty: none)")
	pids := fs.Int64("pids", 0, "process limit (0: none)")
	keep := fs.Bool("keep", false, "keep the private layer after the command exits")
	quiet := fs.Bool("q", false, "do not copy the agent's terminal to this one")
	var ports, envFiles, ro, rw listFlag
	fs.Var(&ports, "port", "[HOST:]PORT to expose (repeatable)")
	fs.Var(&envFiles, "env-file", "gitignored work-tree path visible read-only (repeatable)")
	fs.Var(&ro, "ro", "extra host path, read-only (repeatable)")
	fs.Var(&rw, "rw", "extra host path, writable (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: corral sandbox run [flags] -- CMD [ARGS…]   (one CMD word runs via /bin/sh -c)")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	command := fs.Args()
	if len(command) == 0 {
		return badInput("sandbox run: no command; put it after --")
	}
	if len(command) == 1 {
		command = []string{"/bin/sh", "-c", command[0]}
	}
	var limits sandbox.Limits
	limits.CPU, limits.Pids = *cpu, *pids
	if *mem != "" {
		n, err := policies.ParseSize(*mem)
		if err != nil {
			return badInput("--mem: %v", err)
		}
		limits.Memory = n
	}
	var portList []sandbox.Port
	for _, p := range ports {
		port, err := parsePort(p)
		if err != nil {
			return badInput("--port %s: %v", p, err)
		}
		portList = append(portList, port)
	}
	var binds []sandbox.Bind
	for _, p := range ro {
		binds = append(binds, sandbox.Bind{Path: p})
	}
	for _, p := range rw {
		binds = append(binds, sandbox.Bind{Path: p, Writable: true})
	}

	repo, err := sandbox.OpenRepo(*repoDir)
	if err != nil {
		return badInput("--repo: %v", err)
	}
	if _, err := repo.ResolveRev(*rev); err != nil {
		return badInput("--rev: %v", err)
	}
	snaps, err := sandbox.OpenSnapshots(repo)
	if err != nil {
		return err
	}
	snap, err := snaps.Ensure(*rev)
	if err != nil {
		return err
	}
	if *id == "" {
		*id = "run-" + strconv.FormatInt(time.Now().UnixMilli(), 36)
	}
	cols, rows := terminalSize(os.Stdout)
	sess, err := sandbox.StartSession(sandbox.SessionConfig{
		ID: *id, Repo: repo, Snapshot: snap, Command: command, Ports: portList,
		Network: sandbox.Network(*netMode), Limits: limits, EnvFiles: envFiles, Binds: binds,
		Cols: cols, Rows: rows,
	})
	if err != nil {
		if errors.Is(err, sandbox.ErrInvalidConfig) || errors.Is(err, sandbox.ErrPortLeased) {
			return badInput("%v", err)
		}
		return err
	}
	fmt.Fprintf(stderr, "corral: session %s on %s (%s)\n", sess.ID(), snap.Commit[:12], repo.WorkTree)
	for _, ep := range sess.Endpoints() {
		fmt.Fprintf(stderr, "corral: port %d -> http://%s\n", ep.Inside, ep.Host)
	}

	// Forward ^C and friends to the agent, not to us.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	restore := attachTerminal(sess, stdout, *quiet)
	var status sandbox.ExitStatus
wait:
	for {
		select {
		case sig := <-sigs:
			sess.Signal(sig.(syscall.Signal))
		case <-sess.Done():
			status = sess.Wait()
			break wait
		}
	}
	restore()

	cs, capErr := sess.Capture()
	destroyErr := sess.Destroy(*keep)
	fmt.Fprintf(stdout, "\ncorral: %s exited %d", sess.ID(), status.Code)
	if status.Signal != "" {
		fmt.Fprintf(stdout, " (%s)", status.Signal)
	}
	fmt.Fprintln(stdout)
	if capErr != nil {
		return capErr
	}
	printChangeset(stdout, cs)
	if *keep {
		fmt.Fprintf(stdout, "corral: private layer kept at %s\n", sess.Upper())
	}
	if destroyErr != nil {
		return destroyErr
	}
	if status.Code != 0 {
		// Like `docker run`, pass the agent's own exit code on.
		return exitError{code: status.Code, msg: fmt.Sprintf("%s exited %d", sess.ID(), status.Code)}
	}
	return nil
}

// parsePort reads "4173" or "8080:4173" (host:inside).
func parsePort(s string) (sandbox.Port, error) {
	host, inside, found := strings.Cut(s, ":")
	if !found {
		inside, host = host, "0"
	}
	in, err1 := strconv.Atoi(inside)
	h, err2 := strconv.Atoi(host)
	if err1 != nil || err2 != nil {
		return sandbox.Port{}, errors.New("want PORT or HOST:PORT")
	}
	return sandbox.Port{Inside: in, Host: h}, nil
}

func printChangeset(w io.Writer, cs sandbox.Changeset) {
	if len(cs) == 0 {
		fmt.Fprintln(w, "corral: no changes")
		return
	}
	fmt.Fprintf(w, "corral: %d changed path(s):\n", len(cs))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range cs {
		mode := ""
		if c.Mode != 0 {
			mode = fmt.Sprintf("%o", uint32(c.Mode.Perm()))
			if c.Mode&os.ModeSymlink != 0 {
				mode = "link -> " + c.Link
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Kind, c.Path, mode)
	}
	tw.Flush()
}

// attachTerminal copies the agent's terminal to stdout and our stdin to the agent,
// with the local terminal in raw mode when it is one; it returns the undo.
func attachTerminal(sess *sandbox.Session, stdout io.Writer, quiet bool) func() {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var off int64
		for {
			changed := sess.Output().Changed()
			var data []byte
			data, off = sess.Output().Since(off)
			if len(data) > 0 && !quiet {
				stdout.Write(data)
			}
			select {
			case <-changed:
			case <-done:
				data, _ = sess.Output().Since(off)
				if !quiet {
					stdout.Write(data)
				}
				return
			case <-sess.Done():
				// Let the last bytes arrive, then drain once more.
				time.Sleep(20 * time.Millisecond)
				data, _ = sess.Output().Since(off)
				if !quiet {
					stdout.Write(data)
				}
				return
			}
		}
	}()
	undoRaw := func() {}
	if old, err := unix.IoctlGetTermios(0, unix.TCGETS); err == nil {
		raw := *old
		raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
		raw.Oflag &^= unix.OPOST
		raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		raw.Cflag &^= unix.CSIZE | unix.PARENB
		raw.Cflag |= unix.CS8
		raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
		if unix.IoctlSetTermios(0, unix.TCSETS, &raw) == nil {
			undoRaw = func() { unix.IoctlSetTermios(0, unix.TCSETS, old) }
		}
		go func() {
			buf := make([]byte, 1024)
			for {
				n, err := os.Stdin.Read(buf)
				if n > 0 && sess.Running() {
					sess.Write(buf[:n])
				}
				if err != nil {
					return
				}
			}
		}()
	}
	return func() {
		close(done)
		<-finished
		undoRaw()
	}
}

// terminalSize is the size of f when it is a terminal, else 120×40.
func terminalSize(f *os.File) (int, int) {
	if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
		return int(ws.Col), int(ws.Row)
	}
	return 120, 40
}

func sandboxList(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sandbox ls", stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	repo, err := parseRepoFlags(fs, args, repoDir)
	if err != nil {
		return err
	}
	metas, err := sandbox.ListSessions(repo)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tBASE\tCREATED")
	for _, m := range metas {
		fmt.Fprintf(tw, "%s\t%.12s\t%s\n", m.ID, m.Commit, m.Created.Format(time.DateTime))
	}
	return tw.Flush()
}

func sandboxReap(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sandbox reap", stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	repo, err := parseRepoFlags(fs, args, repoDir)
	if err != nil {
		return err
	}
	// By hand, no session is live: this is the cleanup after a crashed supervisor.
	rep, err := sandbox.Reap(repo, func(string) bool { return false })
	fmt.Fprintf(stdout, "unmounted %d stale mount(s), removed %d cgroup(s); %d private layer(s) kept: %s\n",
		len(rep.Mounts), len(rep.Cgroups), len(rep.Layers), strings.Join(rep.Layers, " "))
	return err
}

func sandboxDiscard(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sandbox discard", stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	repo, err := parseRepoFlags(fs, args, repoDir)
	if err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return badInput("sandbox discard: name the session(s)")
	}
	for _, id := range fs.Args() {
		if err := sandbox.DiscardSession(repo, id); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "discarded %s\n", id)
	}
	return nil
}

func sandboxGC(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sandbox gc", stderr)
	repoDir := fs.String("repo", ".", "the git repository")
	keep := fs.Int("keep", 2, "keep this many most recent snapshots even if unused")
	repo, err := parseRepoFlags(fs, args, repoDir)
	if err != nil {
		return err
	}
	snaps, err := sandbox.OpenSnapshots(repo)
	if err != nil {
		return err
	}
	metas, err := sandbox.ListSessions(repo)
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for _, m := range metas {
		used[m.Commit] = true
	}
	removed, err := snaps.Collect(func(c string) bool { return used[c] }, *keep)
	fmt.Fprintf(stdout, "removed %d snapshot(s)\n", len(removed))
	return err
}

// parseRepoFlags parses a subcommand's flags and opens the --repo they name.
func parseRepoFlags(fs *flag.FlagSet, args []string, repoDir *string) (sandbox.Repo, error) {
	if err := parseFlags(fs, args); err != nil {
		return sandbox.Repo{}, err
	}
	repo, err := sandbox.OpenRepo(*repoDir)
	if err != nil {
		return repo, badInput("--repo: %v", err)
	}
	return repo, nil
}
