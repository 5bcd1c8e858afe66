package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxExecOutput caps what Exec keeps of a command's output: its tail.
const maxExecOutput = 1 << 20

// Exec runs argv inside the live session, beside its agent: in the session's
// namespaces and root, in its workspace, as its user, with the agent's environment.
// It returns the command's output (stdout and stderr together, the last MiB) and its
// exit code. The supervisor uses it for checks on a running session's work (a
// persistent task's accept check before a publish).
//
// The command does not join the session's cgroup, so a frozen session does not stop
// it. It ends with ctx or when the session ends, and what it started in the
// background ends with it. It needs nsenter (util-linux).
func (s *Session) Exec(ctx context.Context, argv []string) ([]byte, int, error) {
	if len(argv) == 0 {
		return nil, 0, errors.New("exec: no command")
	}
	if !s.alive() {
		return nil, 0, fmt.Errorf("session %s: exec: the session has ended", s.cfg.ID)
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, 0, fmt.Errorf("session %s: exec needs nsenter (util-linux): %w", s.cfg.ID, err)
	}
	args := []string{"--target", strconv.Itoa(s.Pid()), "--mount", "--uts", "--ipc", "--pid"}
	if s.cmd.SysProcAttr != nil && s.cmd.SysProcAttr.Cloneflags&unix.CLONE_NEWNET != 0 {
		args = append(args, "--net")
	}
	args = append(args, "--root")
	if u := s.cfg.User; u != nil && (u.UID != 0 || u.GID != 0) {
		args = append(args, "--setgid", strconv.Itoa(u.GID), "--setuid", strconv.Itoa(u.UID))
	}
	// nsenter resolves --wd=DIR on the host before it enters the root, so the command
	// changes into the workspace itself, once inside.
	args = append(args, "--", "/bin/sh", "-c", `cd "$0" || exit 127; exec "$@"`, s.cfg.Repo.WorkTree)
	args = append(args, argv...)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-s.done:
			cancel(errors.New("the session ended"))
		case <-ctx.Done():
		}
	}()
	cmd := exec.CommandContext(ctx, nsenter, args...)
	cmd.Env = s.env
	// nsenter forks to enter the pid namespace and does not pass signals on, so the
	// command runs in its own process group and ends with all of it: whatever it
	// started in the background does not outlive it (nor hold its output open).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return unix.Kill(-cmd.Process.Pid, unix.SIGKILL) }
	r, w, err := os.Pipe()
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	w.Close()
	if err != nil {
		return nil, 0, fmt.Errorf("session %s: exec %s: %w", s.cfg.ID, argv[0], err)
	}
	out := &tailBuffer{max: maxExecOutput}
	copied := make(chan struct{})
	go func() {
		io.Copy(out, r)
		close(copied)
	}()
	err = cmd.Wait()
	unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
	<-copied
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.Bytes(), 0, nil
	case !s.alive():
		// The session's end killed the command (or nsenter found no session to enter)
		// before the watcher above saw it: not the command's own failure.
		return out.Bytes(), -1, fmt.Errorf("session %s: exec %s: the session ended", s.cfg.ID, argv[0])
	case ctx.Err() != nil:
		return out.Bytes(), -1, fmt.Errorf("session %s: exec %s: %w", s.cfg.ID, argv[0], context.Cause(ctx))
	case errors.As(err, &exit):
		code := exit.ExitCode()
		if code < 0 {
			code = 128 + int(exit.Sys().(syscall.WaitStatus).Signal())
		}
		return out.Bytes(), code, nil
	default:
		return out.Bytes(), -1, fmt.Errorf("session %s: exec %s: %w", s.cfg.ID, argv[0], err)
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.buf.Reset()
		p = p[len(p)-t.max:]
	} else if over := t.buf.Len() + len(p) - t.max; over > 0 {
		t.buf.Next(over)
	}
	t.buf.Write(p)
	return n, nil
}

func (t *tailBuffer) Bytes() []byte { return t.buf.Bytes() }

// alive reports whether the session's init still runs: it has not been reaped, is not
// a zombie, and has not begun to exit (as PID 1 of its namespace it lingers, exiting,
// until every process in the namespace is gone).
func (s *Session) alive() bool {
	if !s.Running() {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.Pid()))
	if err != nil {
		return false
	}
	// Fields follow the command name, which is in parentheses and may hold any byte:
	// state, ppid, pgrp, session, tty, tpgid, flags.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 7 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfExiting == 0
}

const pfExiting = 0x4 // PF_EXITING in the kernel's task flags
