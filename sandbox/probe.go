package sandbox

import (
	"errors"
	"fmt"
	"github.com/creack/pty"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Need says what a missing capability does to sessions.
type Need string

// The needs a ProbeItem can have.
const (
	NeedRequired  Need = "required"  // without it no session can start
	NeedIsolation Need = "isolation" // sessions run, but less isolated or less controllable
	NeedOptional  Need = "optional"  // sessions run fully isolated without it; one feature needs it
)

// ProbeItem is one capability of the host, found by trying it.
type ProbeItem struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Need   Need   `json:"need"`
	Detail string `json:"detail"`         // what was found
	Cost   string `json:"cost,omitempty"` // when missing: what the user loses
	loss   string // when missing: a few words for the Isolation summary
}

// HostReport is what this host can isolate, as `corral doctor` shows it.
type HostReport struct {
	Level      string      `json:"level"`     // "full", "degraded" or "none"
	Isolation  string      `json:"isolation"` // one line: what a session will get
	CanRun     bool        `json:"can_run"`   // whether sessions can start at all
	Root       bool        `json:"root"`
	SudoUser   string      `json:"sudo_user,omitempty"` // under sudo, agents run as this user
	SudoUID    string      `json:"sudo_uid,omitempty"`
	CgroupMode string      `json:"cgroup_mode"` // "v1", "hybrid", "v2" or "none"
	Items      []ProbeItem `json:"items"`
}

// Item returns the item called name.
func (r HostReport) Item(name string) (ProbeItem, bool) {
	for _, it := range r.Items {
		if it.Name == name {
			return it, true
		}
	}
	return ProbeItem{}, false
}

// The namespaces a session uses, in the order doctor lists them.
var probeNamespaces = []struct {
	name       string
	flag       uintptr
	need       Need
	cost, loss string
}{
	{"mount namespace", syscall.CLONE_NEWNS, NeedRequired,
		"no mount namespace: sessions cannot start (each workspace is mounted at the repository's own path inside a private root)",
		"no mount namespace"},
	{"pid namespace", syscall.CLONE_NEWPID, NeedIsolation,
		"no pid namespace: agents see and can signal every process on the host, and a process that leaves the agent's process group outlives the session",
		"host processes visible"},
	{"net namespace", syscall.CLONE_NEWNET, NeedIsolation,
		"no net namespace: sessions share the host network; two agents cannot both bind :4173 — use network = \"host\" mode, ports are handed out through CORRAL_PORT_<n>",
		"shared host network"},
	{"uts namespace", syscall.CLONE_NEWUTS, NeedIsolation,
		"no uts namespace: sessions share the host's hostname; an agent running `hostname x` renames the host",
		"shared hostname"},
	{"ipc namespace", syscall.CLONE_NEWIPC, NeedIsolation,
		"no ipc namespace: agents share System V IPC and POSIX message queues with the host and with each other",
		"shared IPC"},
}

// Probe finds out what this host can isolate by trying each capability: it mounts an
// overlay, starts processes in new namespaces, brings lo up in a fresh netns, opens a
// pty and creates (then removes) scratch cgroups. It leaves no mount, cgroup or
// process behind. Most items need root; as another user they report what fails.
func Probe() HostReport {
	r := HostReport{Root: os.Geteuid() == 0, SudoUser: os.Getenv("SUDO_USER"), SudoUID: os.Getenv("SUDO_UID")}
	r.Items = append(r.Items, probeRoot(r))
	r.Items = append(r.Items, probeOverlay()...)
	for _, ns := range probeNamespaces {
		it := ProbeItem{Name: ns.name, OK: true, Need: ns.need, Detail: "started a process in a new " + ns.name}
		if err := probeClone(ns.flag); err != nil {
			it = ProbeItem{Name: ns.name, Need: ns.need, Detail: "new " + ns.name + ": " + err.Error(), Cost: ns.cost, loss: ns.loss}
		}
		r.Items = append(r.Items, it)
	}
	r.Items = append(r.Items, probeUserNamespace())
	cg := ProbeCgroups()
	r.CgroupMode = string(cg.Mode)
	r.Items = append(r.Items, cgroupItems(cg)...)
	r.Items = append(r.Items, probePty(), probeNetlink(), probeNsenter())
	for i := range r.Items {
		if r.Items[i].OK { // a cost only describes what is missing
			r.Items[i].Cost, r.Items[i].loss = "", ""
		}
	}
	r.Level, r.Isolation, r.CanRun = summarize(r.Items)
	return r
}

// summarize turns the items into the one-line verdict doctor prints last.
func summarize(items []ProbeItem) (level, line string, canRun bool) {
	var fatal, lost []string
	for _, it := range items {
		switch {
		case it.OK || it.Need == NeedOptional:
		case it.Need == NeedRequired:
			fatal = append(fatal, it.loss)
		default:
			lost = append(lost, it.loss)
		}
	}
	switch {
	case len(fatal) > 0:
		return "none", "none: sessions cannot start here (" + strings.Join(fatal, "; ") + ")", false
	case len(lost) > 0:
		return "degraded", "degraded: sessions run with copy-on-write workspaces, but with " + strings.Join(lost, "; "), true
	}
	return "full", "full: each session gets a copy-on-write workspace, its own mount, pid, net, uts and ipc namespaces, and cgroup limits, freeze and kill", true
}

func probeRoot(r HostReport) ProbeItem {
	it := ProbeItem{Name: "root", OK: r.Root, Need: NeedRequired}
	switch {
	case r.Root && r.SudoUser != "":
		it.Detail = fmt.Sprintf("uid 0 via sudo from %s (uid %s): agents run as %s", r.SudoUser, r.SudoUID, r.SudoUser)
	case r.Root:
		it.Detail = "uid 0 (not under sudo: agents run as root)"
	default:
		it.Detail = fmt.Sprintf("uid %d", os.Geteuid())
		it.Cost = "not root: sessions cannot start (overlay mounts, namespaces and cgroups need root; rootless mode is not built yet) — run corral with sudo"
		it.loss = "not root"
	}
	return it
}

// probeOverlay mounts a scratch overlay with redirect_dir=on and renames a directory
// that lives in the lower layer: without redirect_dir that rename fails with EXDEV,
// which is what a session would hit on `mv dir` or a git checkout moving a directory.
// Without redirect_dir the mount may still work, which tells "no overlay" apart from
// "old kernel or redirect_dir disabled".
func probeOverlay() []ProbeItem {
	ov := ProbeItem{Name: "overlayfs", Need: NeedRequired, Detail: "mounted a scratch overlay",
		Cost: "no overlayfs: sessions cannot start (corral needs copy-on-write workspaces)",
		loss: "no overlayfs"}
	rd := ProbeItem{Name: "overlay redirect_dir", Need: NeedIsolation, Detail: "not tried",
		Cost: "no redirect_dir: renaming a directory that came from the repository fails with EXDEV (mv, some git checkouts)",
		loss: "directory renames failing with EXDEV"}
	if b, _ := os.ReadFile("/proc/filesystems"); !strings.Contains(string(b), "\toverlay\n") {
		ov.Detail += " (overlay was not in /proc/filesystems before the mount loaded it)"
	}
	dir, err := os.MkdirTemp("", "corral-probe-")
	if err != nil {
		ov.Detail = fmt.Sprintf("make scratch dir: %v", err)
		return []ProbeItem{ov, rd}
	}
	defer os.RemoveAll(dir)
	// Short names: the whole option string must fit in one 4 KiB page.
	l, u, w, m := filepath.Join(dir, "l"), filepath.Join(dir, "u"), filepath.Join(dir, "w"), filepath.Join(dir, "m")
	for _, d := range []string{filepath.Join(l, "d"), u, w, m} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			ov.Detail = fmt.Sprintf("make scratch dir: %v", err)
			return []ProbeItem{ov, rd}
		}
	}
	opts := "lowerdir=" + l + ",upperdir=" + u + ",workdir=" + w
	if err := unix.Mount("overlay", m, "overlay", 0, opts+",redirect_dir=on"); err != nil {
		rd.Detail = fmt.Sprintf("mount with redirect_dir=on: %v", err)
		if err := unix.Mount("overlay", m, "overlay", 0, opts); err != nil {
			ov.Detail = fmt.Sprintf("mount overlay: %v", err)
			return []ProbeItem{ov, rd}
		}
	} else if err := os.Rename(filepath.Join(m, "d"), filepath.Join(m, "e")); err != nil {
		rd.Detail = fmt.Sprintf("redirect_dir=on accepted, but renaming a lower-layer directory failed: %v", err)
	} else {
		rd.OK, rd.Detail = true, "renamed a lower-layer directory under redirect_dir=on"
	}
	ov.OK = true
	// A lazy detach is the fallback so that nothing stays mounted even if something
	// still holds the directory.
	if err := unix.Unmount(m, 0); err != nil {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
			ov.Detail += fmt.Sprintf("; unmount %s failed: %v", m, err)
		}
	}
	return []ProbeItem{ov, rd}
}

// probeClone starts a process that exits at once with the given clone flags.
func probeClone(flags uintptr) error {
	path, err := exec.LookPath("true") // any exit-0 program would do
	if err != nil {
		path = "/bin/true"
	}
	cmd := exec.Command(path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
	return cmd.Run() // its error already names the program: "fork/exec /bin/true: …"
}

func probeUserNamespace() ProbeItem {
	it := ProbeItem{Name: "user namespace", Need: NeedOptional,
		Cost: "no user namespaces: the coming rootless mode will not work on this host; running with sudo is unaffected"}
	maxNS := "unknown"
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil {
		maxNS = strings.TrimSpace(string(b))
	}
	err := probeClone(syscall.CLONE_NEWUSER)
	switch {
	case err != nil:
		it.Detail = fmt.Sprintf("new user namespace: %v (max_user_namespaces %s)", err, maxNS)
	case maxNS == "0":
		it.Detail = "max_user_namespaces is 0"
	default:
		it.OK = true
		it.Detail = "started a process in a new user namespace; max_user_namespaces " + maxNS
	}
	return it
}

// probeNsenter finds nsenter, which Session.Exec runs to reach into a live session.
func probeNsenter() ProbeItem {
	it := ProbeItem{Name: "nsenter", Need: NeedOptional,
		Cost: "no nsenter (util-linux): a persistent task with an accept check cannot publish while its agent runs, since the check runs inside the live session"}
	path, err := exec.LookPath("nsenter")
	if err != nil {
		it.Detail = "not on PATH"
		return it
	}
	it.OK, it.Detail = true, path+" (runs a persistent task's accept check beside its agent)"
	return it
}

// probePty opens a pty pair exactly the way a session does (creack/pty).
func probePty() ProbeItem {
	it := ProbeItem{Name: "pty", Need: NeedRequired,
		Cost: "no pty: agents cannot get a terminal, so interactive agents (claude, aider) cannot run",
		loss: "no pty"}
	master, slave, err := pty.Open()
	if err != nil {
		it.Detail = fmt.Sprintf("open a pty: %v", err)
		return it
	}
	defer master.Close()
	defer slave.Close()
	it.OK = true
	it.Detail = "opened /dev/ptmx and " + slave.Name()
	return it
}

// probeNetlink creates a network namespace on a locked thread, brings lo up and
// connects to itself over 127.0.0.1 there, then switches the thread back. A thread
// that cannot switch back stays locked and the runtime discards it.
func probeNetlink() ProbeItem {
	it := ProbeItem{Name: "netlink", Need: NeedIsolation,
		Cost: "cannot bring lo up in a new netns: sessions fall back to network = \"host\" (shared host network, ports through CORRAL_PORT_<n>)",
		loss: "no loopback in a private netns"}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("open own netns: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("create a netns: %w", err)
			return
		}
		tryErr := probeLoopback()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- errors.Join(tryErr, fmt.Errorf("setns back to the host netns: %w", err))
			return
		}
		runtime.UnlockOSThread()
		done <- tryErr
	}()
	if err := <-done; err != nil {
		it.Detail = err.Error()
		return it
	}
	it.OK = true
	it.Detail = "created a netns, brought lo up and connected over 127.0.0.1"
	return it
}

// probeLoopback runs in a fresh netns: lo up, then a real connection over it.
func probeLoopback() error {
	if err := LoopbackUp(); err != nil {
		return err
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo after bringing it up: %w", err)
	}
	if lo.Attrs().Flags&net.FlagUp == 0 {
		return errors.New("lo is still down after LinkSetUp")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen on 127.0.0.1 in the new netns: %w", err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return fmt.Errorf("connect over lo in the new netns: %w", err)
	}
	c.Close()
	return nil
}

// cgroupItems turns ProbeCgroups' findings into doctor's items. On a hybrid host v1
// hierarchies carry memory/cpu/pids while the unified v2 mount usually has no
// controllers but still offers cgroup.freeze (5.2+) and cgroup.kill (5.14+).
func cgroupItems(p CgroupProbe) []ProbeItem {
	mode := ProbeItem{Name: "cgroups", OK: p.Mode != CgroupNone && p.Err == "", Need: NeedIsolation,
		Cost: "no usable cgroups: sessions get no memory, cpu or pids limits, and pause and stop fall back to signals",
		loss: "no cgroups"}
	switch p.Mode {
	case CgroupHybrid:
		mode.Detail = "v1 hybrid: v1 controllers plus the unified v2 mount"
	case CgroupV1:
		mode.Detail = "v1 controllers only"
	case CgroupV2:
		mode.Detail = "v2 unified hierarchy"
	default:
		mode.Detail = "no cgroup hierarchy found under /sys/fs/cgroup"
	}
	if p.Err != "" {
		mode.Detail += "; probe group " + p.Group + ": " + p.Err
	}
	feature := func(name string, f CgroupFeature, cost, loss string) ProbeItem {
		it := ProbeItem{Name: "cgroup " + name, OK: f.OK, Need: NeedIsolation, Detail: "via " + f.Via, Cost: cost, loss: loss}
		if !f.OK {
			it.Detail = strings.TrimPrefix(f.Via+": "+f.Err, ": ")
		}
		return it
	}
	freeze := feature("freeze", p.Freeze,
		"no freezer: pause sends SIGSTOP to the agent's process group, which a process can escape by forking",
		"pause by SIGSTOP")
	if freeze.OK && strings.HasPrefix(p.Freeze.Via, "v1") {
		freeze.Detail += " (a v1-frozen task ignores SIGKILL until thawed)"
	}
	kill := feature("kill", p.Kill,
		"no cgroup.kill or freezer: stopping a session signals its processes one by one, racing against forks (the pid namespace's init going down still takes the rest with it)",
		"stop by signals")
	// ProbeCgroups calls the bare signal loop a working kill; doctor lists it as
	// missing, because it is the one way to stop a session that a process can outrun.
	if strings.HasPrefix(p.Kill.Via, "SIGKILL") {
		kill.OK, kill.Detail = false, "only "+p.Kill.Via
	}
	return []ProbeItem{mode,
		feature("memory", p.Memory,
			"no memory limit: one agent (or its test suite) can push the whole host into the OOM killer", "no memory limit"),
		feature("cpu", p.CPU, "no cpu limit: a busy agent slows every other session and the TUI", "no cpu limit"),
		feature("pids", p.Pids, "no pids limit: a fork bomb in one session exhausts the host's process table", "no pids limit"),
		freeze, kill}
}
