package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// initArg0 is the argv[0] the supervisor gives the re-executed binary to make it the
// sandbox init instead of the CLI.
const initArg0 = "corral-init"

// The init's inherited descriptors beyond stdio (which are the pty slave).
const (
	initConfigFD = 3 // JSON initConfig, written by the supervisor once the init is in its cgroup
	initStatusFD = 4 // one line back: "ok PID" once the agent is exec'd, or "err MESSAGE"
)

// initPrelude is the session-independent half of the sandbox, sent as soon as the init
// starts: the new root (a tmpfs on Root, which every init may share because each mounts
// it in its own mount namespace), /proc, /sys, /dev, /tmp, the read-only toolchains,
// and lo. A spare init from a pool has done all this before any session asks for it.
type initPrelude struct {
	Root    string // host dir the new root tmpfs is mounted on
	Binds   []Bind // toolchains, bound read-only at their own path
	PrivNet bool   // bring lo up in the fresh network namespace
}

// initConfig is the session's half, sent after the supervisor has put the init into
// the session's cgroup, so no agent code runs outside its budget.
type initConfig struct {
	Hostname  string
	Workspace string   // where the overlay appears inside: the repository's own path
	Lowers    []string // overlay lower dirs, top first
	Upper     string
	Work      string
	Objects   string            // host git object dir, bound read-only at /.corral/objects
	Binds     []Bind            // host paths bound at their own path: toolchains under HOME, extras as asked
	Home      string            // private, writable HOME (tmpfs)
	HomeFiles map[string]string // files written into HOME, owned by the agent (path relative to HOME → content)
	UID, GID  int
	Groups    []int
	Env       []string
	Argv      []string
}

// Bind is a host path made visible inside a sandbox, at the same path unless Target
// names another (corral's own control socket and binary appear under fixed paths).
type Bind struct {
	Path     string `json:"path"`
	Target   string `json:"target,omitempty"`
	Writable bool   `json:"writable,omitempty"`
}

// inside is where the bind appears in the sandbox.
func (b Bind) inside() string {
	if b.Target != "" {
		return b.Target
	}
	return b.Path
}

// IsInit reports whether this process was started as a sandbox init.
func IsInit() bool { return len(os.Args) > 0 && os.Args[0] == initArg0 }

// InitMain runs the sandbox init as PID 1 of the new namespaces; it never returns. It
// builds the root, execs the agent, reaps every zombie, forwards signals to the agent's
// process group, and exits with the agent's status — taking the namespace down with it.
func InitMain() {
	status := os.NewFile(initStatusFD, "status")
	fail := func(err error) {
		fmt.Fprintf(status, "err %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(125)
	}
	unix.CloseOnExec(initConfigFD)
	unix.CloseOnExec(initStatusFD)

	// Catch signals before the agent exists so none is lost between exec and the loop.
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs)

	cfgFile := os.NewFile(initConfigFD, "config")
	dec := json.NewDecoder(bufio.NewReader(cfgFile))
	var pre initPrelude
	if err := dec.Decode(&pre); err != nil {
		fail(fmt.Errorf("init: read prelude: %w", err))
	}
	if err := buildBaseRoot(&pre); err != nil {
		fail(err)
	}
	if pre.PrivNet {
		if err := LoopbackUp(); err != nil {
			fail(fmt.Errorf("init: loopback: %w", err))
		}
	}
	var cfg initConfig
	if err := dec.Decode(&cfg); err != nil {
		fail(fmt.Errorf("init: read config: %w", err))
	}
	cfgFile.Close()
	t0 := time.Now()
	if err := finishRoot(pre.Root, &cfg); err != nil {
		fail(err)
	}
	t1 := time.Now()
	agent, err := startAgent(&cfg)
	if err != nil {
		fail(err)
	}
	// The timings let the supervisor say where a start's milliseconds went.
	fmt.Fprintf(status, "ok %d %d %d\n", agent, t1.Sub(t0).Microseconds(), time.Since(t1).Microseconds())
	status.Close()
	os.Exit(superviseAgent(agent, sigs))
}

// startAgent execs the agent on the pty (already our stdio) as the session's user, as
// the leader of a new session with the pty as its controlling terminal.
func startAgent(cfg *initConfig) (int, error) {
	if len(cfg.Argv) == 0 {
		return 0, errors.New("init: no command")
	}
	path, err := lookPath(cfg.Argv[0], cfg.Env)
	if err != nil {
		return 0, fmt.Errorf("init: %w", err)
	}
	cmd := exec.Command(path, cfg.Argv[1:]...)
	cmd.Args[0] = cfg.Argv[0]
	cmd.Env = cfg.Env
	cmd.Dir = cfg.Workspace
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if cfg.UID != 0 || cfg.GID != 0 {
		groups := make([]uint32, len(cfg.Groups))
		for i, g := range cfg.Groups {
			groups[i] = uint32(g)
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(cfg.UID), Gid: uint32(cfg.GID), Groups: groups}
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("init: start %s: %w", cfg.Argv[0], err)
	}
	return cmd.Process.Pid, nil
}

// lookPath resolves a command against the PATH the agent will have, not the init's.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(p) {
				full := filepath.Join(dir, name)
				if fi, err := os.Stat(full); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
					return full, nil
				}
			}
		}
	}
	return "", fmt.Errorf("command %q not found in the sandbox's PATH", name)
}

// superviseAgent is PID 1's loop: forward signals, reap every child, and when the agent
// exits kill whatever it left and return its status as an exit code.
func superviseAgent(agent int, sigs chan os.Signal) int {
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			// The agent leads its own session and process group; forward to all of it.
			_ = unix.Kill(-agent, sig.(syscall.Signal))
			continue
		}
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err != nil || pid <= 0 {
				break
			}
			if pid != agent {
				continue
			}
			code := ws.ExitStatus()
			if ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			// As PID 1, our exit tears the namespace down and the kernel kills the
			// rest; kill them first anyway so nothing outlives the agent by accident.
			_ = unix.Kill(-1, unix.SIGKILL)
			return code
		}
	}
	return 125
}

// buildBaseRoot is the session-independent part of the sandbox's filesystem: a
// private mount tree, a tmpfs root holding read-only toolchains, fresh /proc, /sys and
// /dev, and a private /tmp.
func buildBaseRoot(pre *initPrelude) error {
	// Mount events must not propagate back to the host (or from it).
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return mountErr("make / private", "/", err)
	}
	root := pre.Root
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755,size=16m"); err != nil {
		return mountErr("root tmpfs", root, err)
	}
	ops := []mountOp{
		{"/tmp", func(d string) error { return mountTmpfs(d, "mode=1777") }},
		{"/proc", func(d string) error {
			return mount("proc", d, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}},
		{"/sys", func(d string) error {
			return mount("sysfs", d, "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}},
		{"/dev", func(d string) error { return buildDev(d) }},
	}
	binds, err := linkTopLevel(root, pre.Binds)
	if err != nil {
		return err
	}
	return runMounts(root, append(ops, bindOps(binds)...))
}

// finishRoot adds the session's part — the overlay workspace at the repository's own
// path, the git objects, a private HOME, the asked-for binds — and pivots into the
// root. Nothing of the host is writable afterwards except binds asked for by name.
func finishRoot(root string, cfg *initConfig) error {
	ops := []mountOp{
		{SnapshotObjectsDir, func(d string) error { return bindMount(cfg.Objects, d, false) }},
		{cfg.Workspace, func(d string) error { return mountOverlay(cfg, d) }},
	}
	if cfg.Home != "" {
		uid, gid := cfg.UID, cfg.GID
		ops = append(ops, mountOp{cfg.Home, func(d string) error {
			return mountTmpfs(d, fmt.Sprintf("mode=700,uid=%d,gid=%d", uid, gid))
		}})
	}
	if err := runMounts(root, append(ops, bindOps(cfg.Binds)...)); err != nil {
		return err
	}
	if err := writeHomeFiles(filepath.Join(root, cfg.Home), cfg); err != nil {
		return err
	}
	// git inside refuses a repository owned by another user unless told it is safe.
	gitconfig := "[safe]\n\tdirectory = *\n[include]\n\tpath = /etc/gitconfig\n"
	if err := os.WriteFile(filepath.Join(root, "/.corral/gitconfig"), []byte(gitconfig), 0o644); err != nil {
		return fmt.Errorf("init: write gitconfig: %w", err)
	}
	if err := pivotRoot(root); err != nil {
		return err
	}
	// The root itself is scaffolding: nothing may be created in it afterwards.
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return mountErr("remount root read-only", "/", err)
	}
	if cfg.Hostname != "" {
		if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
			return fmt.Errorf("init: sethostname: %w", err)
		}
	}
	return nil
}

// mountOp is one mount into the new root, at dst as seen from inside.
type mountOp struct {
	dst string
	do  func(target string) error
}

func bindOps(binds []Bind) []mountOp {
	ops := make([]mountOp, 0, len(binds))
	for _, b := range binds {
		b := b
		ops = append(ops, mountOp{b.inside(), func(d string) error {
			if b.Target != "" {
				// runMounts made the mountpoint after the target's host path, which
				// need not exist; it must take the source's kind (a file for a file).
				if err := retypeMountpoint(b.Path, d); err != nil {
					return err
				}
			}
			return bindMount(b.Path, d, b.Writable)
		}})
	}
	return ops
}

// runMounts performs ops parents first: /tmp before a workspace inside /tmp, HOME
// before a toolchain bound inside HOME.
func runMounts(root string, ops []mountOp) error {
	sort.SliceStable(ops, func(i, j int) bool { return depth(ops[i].dst) < depth(ops[j].dst) })
	for _, o := range ops {
		if o.dst == "" {
			continue
		}
		dst := filepath.Join(root, o.dst)
		if err := makeMountpoint(o.dst, dst); err != nil {
			return err
		}
		if err := o.do(dst); err != nil {
			return err
		}
	}
	return nil
}

// linkTopLevel recreates top-level symlinks such as /bin -> usr/bin in the new root
// instead of binding them, and returns the binds left to mount.
func linkTopLevel(root string, binds []Bind) ([]Bind, error) {
	var rest []Bind
	for _, b := range binds {
		if fi, err := os.Lstat(b.Path); err == nil && fi.Mode()&os.ModeSymlink != 0 && filepath.Dir(b.Path) == "/" {
			target, err := os.Readlink(b.Path)
			if err != nil {
				return nil, fmt.Errorf("init: readlink %s: %w", b.Path, err)
			}
			if err := os.Symlink(target, filepath.Join(root, b.Path)); err != nil {
				return nil, fmt.Errorf("init: symlink %s: %w", b.Path, err)
			}
			continue
		}
		rest = append(rest, b)
	}
	return rest, nil
}

// mountOverlay mounts the session's workspace. The option string must fit a page, so
// long layer paths are given relative to their common directory.
func mountOverlay(cfg *initConfig, dst string) error {
	opts := overlayOptions(cfg.Lowers, cfg.Upper, cfg.Work, "")
	if len(opts) > 3800 {
		common := commonDir(append([]string{cfg.Upper, cfg.Work}, cfg.Lowers...))
		if err := os.Chdir(common); err != nil {
			return fmt.Errorf("init: chdir %s: %w", common, err)
		}
		opts = overlayOptions(cfg.Lowers, cfg.Upper, cfg.Work, common)
		if len(opts) > 4000 {
			return fmt.Errorf("init: overlay options are %d bytes even with relative paths (limit 4096): too many layers", len(opts))
		}
	}
	return mount("overlay", dst, "overlay", 0, opts)
}

func overlayOptions(lowers []string, upper, work, rel string) string {
	short := func(p string) string {
		if rel == "" {
			return p
		}
		r, err := filepath.Rel(rel, p)
		if err != nil {
			return p
		}
		return r
	}
	ls := make([]string, len(lowers))
	for i, l := range lowers {
		ls[i] = short(l)
	}
	// redirect_dir=on: without it renaming a lower directory fails with EXDEV.
	return fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,redirect_dir=on",
		strings.Join(ls, ":"), short(upper), short(work))
}

func commonDir(paths []string) string {
	common := filepath.Dir(paths[0])
	for _, p := range paths[1:] {
		for common != "/" && !strings.HasPrefix(p+"/", common+"/") {
			common = filepath.Dir(common)
		}
	}
	return common
}

// devNodes are the harmless character devices every sandbox gets.
var devNodes = []struct {
	name         string
	major, minor uint32
}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}}

// buildDev makes a minimal /dev: the harmless device nodes, a private devpts instance
// (so the agent can open new ptys without seeing the host's), and /dev/shm. Nodes are
// made with mknod rather than bound from the host: one syscall each instead of a mount.
func buildDev(dst string) error {
	if err := mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=64k"); err != nil {
		return err
	}
	for _, d := range devNodes {
		p := filepath.Join(dst, d.name)
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return fmt.Errorf("init: /dev/%s: %w", d.name, err)
		}
		// mknod honours the umask; these must be usable by the agent's user.
		if err := unix.Chmod(p, 0o666); err != nil {
			return fmt.Errorf("init: /dev/%s: %w", d.name, err)
		}
	}
	// The agent's terminal is a pty of the host's devpts, which the sandbox cannot
	// see; bound at /dev/console (as runc does) it has a name, so tty(1) and
	// ttyname(3) work for tools that ask.
	if tty, err := os.Readlink("/proc/self/fd/0"); err == nil && strings.HasPrefix(tty, "/dev/pts/") {
		console := filepath.Join(dst, "console")
		if err := os.WriteFile(console, nil, 0o600); err != nil {
			return fmt.Errorf("init: /dev/console: %w", err)
		}
		if err := bindMount(tty, console, true); err != nil {
			return err
		}
	}
	pts := filepath.Join(dst, "pts")
	if err := os.Mkdir(pts, 0o755); err != nil {
		return fmt.Errorf("init: /dev/pts: %w", err)
	}
	if err := mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return err
	}
	shm := filepath.Join(dst, "shm")
	if err := os.Mkdir(shm, 0o1777); err != nil {
		return fmt.Errorf("init: /dev/shm: %w", err)
	}
	if err := mountTmpfs(shm, "mode=1777,size=64m"); err != nil {
		return err
	}
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, filepath.Join(dst, name)); err != nil {
			return fmt.Errorf("init: /dev/%s: %w", name, err)
		}
	}
	return nil
}

// pivotRoot switches to the new root and detaches the host's. pivot_root(".", ".")
// stacks the old root on top of the new one, so one lazy unmount removes it.
func pivotRoot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return fmt.Errorf("init: chdir new root: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("init: pivot_root %s: %w", root, err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return mountErr("detach old root", root, err)
	}
	return unix.Chdir("/")
}

// makeMountpoint creates the path to mount on inside the new root, as a file or a
// directory like its host source hostPath.
func makeMountpoint(hostPath, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("init: mountpoint %s: %w", hostPath, err)
	}
	if fi, err := os.Stat(hostPath); err == nil && !fi.IsDir() {
		f, err := os.OpenFile(dst, os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("init: mountpoint %s: %w", hostPath, err)
		}
		return f.Close()
	}
	if err := os.Mkdir(dst, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("init: mountpoint %s: %w", hostPath, err)
	}
	return nil
}

// writeHomeFiles writes the session's files into its fresh HOME, owned by the agent's
// user so it may change them (agents rewrite their own configuration).
func writeHomeFiles(home string, cfg *initConfig) error {
	if cfg.Home == "" {
		return nil
	}
	for rel, content := range cfg.HomeFiles {
		clean := filepath.Clean(rel)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("init: home file %q: must be relative to HOME", rel)
		}
		p := filepath.Join(home, clean)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("init: home file %s: %w", rel, err)
		}
		for d := filepath.Dir(p); len(d) > len(home); d = filepath.Dir(d) {
			os.Lchown(d, cfg.UID, cfg.GID) // the directories it made are the agent's too
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return fmt.Errorf("init: home file %s: %w", rel, err)
		}
		if err := os.Lchown(p, cfg.UID, cfg.GID); err != nil {
			return fmt.Errorf("init: home file %s: %w", rel, err)
		}
	}
	return nil
}

// retypeMountpoint replaces an empty directory made as a mountpoint by a file when the
// host path to bind there is a file.
func retypeMountpoint(hostPath, dst string) error {
	fi, err := os.Stat(hostPath)
	if err != nil || fi.IsDir() {
		return nil
	}
	if st, err := os.Lstat(dst); err == nil && st.IsDir() {
		if err := os.Remove(dst); err != nil {
			return fmt.Errorf("init: mountpoint %s: %w", dst, err)
		}
	}
	return makeMountpoint(hostPath, dst)
}

func mountTmpfs(dst, opts string) error {
	return mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
}

// bindMount binds src at dst; a read-only bind needs a second, remounting call.
func bindMount(src, dst string, writable bool) error {
	if err := mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if writable {
		return nil
	}
	var st unix.Statfs_t
	flags := uintptr(0)
	if unix.Statfs(src, &st) == nil {
		// Keep the flags the source already has (nosuid, nodev…): dropping them is EPERM.
		flags = uintptr(st.Flags) & (unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_NOATIME | unix.MS_RELATIME)
	}
	return mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|flags, "")
}

// MountError says which mount failed, where, and why.
type MountError struct {
	Op, Target string
	Err        error
}

func (e *MountError) Error() string { return fmt.Sprintf("init: %s at %s: %v", e.Op, e.Target, e.Err) }
func (e *MountError) Unwrap() error { return e.Err }

func mountErr(op, target string, err error) error {
	return &MountError{Op: op, Target: target, Err: err}
}

func mount(src, dst, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(src, dst, fstype, flags, data); err != nil {
		op := "mount " + fstype
		if fstype == "" {
			op = "bind " + src
		}
		return mountErr(op, dst, err)
	}
	return nil
}

func depth(p string) int { return strings.Count(filepath.Clean(p), "/") }
