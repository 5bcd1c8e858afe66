package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// benchTUI is `corral bench tui`: the whole interactive process — supervisor and TUI —
// running N idle sessions in a real terminal (a tmux pane), measured from outside by
// its CPU time in /proc (goal: under 5% of one core with 100 sessions).
func benchTUI(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench tui", stderr)
	n := fs.Int("sessions", 100, "idle sessions in the fleet")
	window := fs.Duration("window", 20*time.Second, "how long to measure")
	size := fs.String("size", "200x50", "terminal size, COLSxROWS")
	scratch := fs.String("scratch", defaultScratch(), "directory for the bench repository")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cols, rows, ok := strings.Cut(*size, "x")
	if !ok {
		return badInput("bench tui: --size %q: want COLSxROWS", *size)
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		return fmt.Errorf("bench tui needs tmux for a real terminal: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := benchRepo(*scratch, "corral-bench-tui-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var plan strings.Builder
	fmt.Fprintf(&plan, "[fleet]\nrepo = \".\"\nbase = \"main\"\nhead = \"corral/head\"\nmax_running = %d\n\n", *n)
	plan.WriteString("[defaults]\nlifetime = \"persistent\"\nagent = \"sleep 3600\"\n")
	for i := 0; i < *n; i++ {
		fmt.Fprintf(&plan, "\n[[task]]\nid = \"idle%d\"\nprompt = \"idle\"\n", i)
	}
	planPath := filepath.Join(dir, "bench.toml")
	if err := os.WriteFile(planPath, []byte(plan.String()), 0o644); err != nil {
		return err
	}

	tmuxName := fmt.Sprintf("corral-bench-%d", os.Getpid())
	tmux := func(args ...string) (string, error) {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	cmd := fmt.Sprintf("cd %q && exec %q tui bench.toml", dir, self)
	if out, err := tmux("new-session", "-d", "-s", tmuxName, "-x", cols, "-y", rows, cmd); err != nil {
		return fmt.Errorf("tmux: %v: %s", err, out)
	}
	defer tmux("kill-session", "-t", tmuxName)
	pidText, err := tmux("display-message", "-p", "-t", tmuxName, "#{pane_pid}")
	if err != nil {
		return fmt.Errorf("tmux pane pid: %v: %s", err, pidText)
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		return fmt.Errorf("tmux pane pid %q: %w", pidText, err)
	}
	quit := func() {
		// Stop the fleet the way a user would — q, then discard every agent — and wait
		// for the process, so nothing it started outlives the bench.
		tmux("send-keys", "-t", tmuxName, "q")
		time.Sleep(300 * time.Millisecond)
		tmux("send-keys", "-t", tmuxName, "d")
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
				return
			}
		}
		fmt.Fprintf(stderr, "bench tui: corral (pid %d) did not quit; killing it\n", pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	defer quit()

	want := fmt.Sprintf("%d running", *n)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		screen, _ := tmux("capture-pane", "-p", "-t", tmuxName)
		if strings.Contains(screen, want) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the TUI never showed %q; last screen:\n%s", want, screen)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // let the launch burst settle
	cpu0, err := procCPU(pid)
	if err != nil {
		return err
	}
	wall0 := time.Now()
	time.Sleep(*window)
	cpu1, err := procCPU(pid)
	if err != nil {
		return err
	}
	pct := 100 * (cpu1 - cpu0).Seconds() / time.Since(wall0).Seconds()
	mark := "met "
	if pct >= 5 {
		mark = "MISS"
	}
	fmt.Fprintf(stdout, "%s\n", hostLine())
	fmt.Fprintf(stdout, "corral tui (supervisor + TUI) with %d idle sessions in a %s tmux pane: %.2f%% of one core over %s\n",
		*n, *size, pct, *window)
	fmt.Fprintf(stdout, "goals:\n  [%s] whole process under 5%% of one core with %d idle sessions   %.2f%%\n", mark, *n, pct)
	return nil
}

// procCPU is the user+system CPU time a process has used, from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu of %d: %w", pid, err)
	}
	// Fields after the parenthesised command; utime and stime are the 14th and 15th.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("cpu of %d: short stat %q", pid, s)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ, fixed at 100 on Linux
	return time.Duration(ut+st) * time.Second / hz, nil
}
