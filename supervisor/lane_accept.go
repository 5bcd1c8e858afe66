package supervisor

import (
	"bytes"
	"context"
	"fmt"
	"strings"
)

// A task's accept command is its own acceptance check. It runs in the task's session,
// on the agent's work, after the agent exits 0 and before anything is published: the
// session's command becomes a small wrapper that runs the agent, then the check. A
// failing check exits acceptFailedCode after printing acceptFailedMark, so the
// supervisor tells it from an agent's own failure; the attempt then fails without a
// publish, and the next attempt finds the check's output at $CORRAL_FAILURE.

const (
	acceptFailedCode = 86
	acceptMark       = "corral: accept check: "
	acceptFailedMark = "corral: accept check failed (exit "
)

// acceptWrapper runs $CORRAL_AGENT_COMMAND, then $CORRAL_ACCEPT if the agent succeeded.
const acceptWrapper = `/bin/sh -c "$CORRAL_AGENT_COMMAND" || exit $?
printf '\r\n` + acceptMark + `%s\r\n' "$CORRAL_ACCEPT"
/bin/sh -c "$CORRAL_ACCEPT"
rc=$?
if [ "$rc" -ne 0 ]; then
  printf '\r\n` + acceptFailedMark + `%d): nothing is published\r\n' "$rc"
  exit 86
fi`

// acceptCommand wraps an agent command with its task's accept check. The agent sees
// the check as $CORRAL_ACCEPT too, so it can run it itself before it finishes.
func acceptCommand(agent, accept string, env []string) ([]string, []string) {
	env = append(env, "CORRAL_AGENT_COMMAND="+agent, "CORRAL_ACCEPT="+accept)
	return []string{"/bin/sh", "-c", acceptWrapper}, env
}

// acceptFailure finds a failed accept check in a session's output: the check's own
// output, from its start marker, or ok=false when the check did not fail.
func acceptFailure(code int, out []byte) (report string, ok bool) {
	if code != acceptFailedCode {
		return "", false
	}
	end := bytes.LastIndex(out, []byte(acceptFailedMark))
	if end < 0 {
		return "", false
	}
	start := bytes.LastIndex(out[:end], []byte(acceptMark))
	if start < 0 {
		start = 0
	}
	body := strings.ReplaceAll(string(out[start:]), "\r\n", "\n")
	return fmt.Sprintf("corral: the task's accept check failed, so nothing was published\n%s", tail([]byte(body), laneOutputTail)), true
}

// onAcceptFailed fails an attempt whose accept check failed: the session has ended
// (its layer kept), nothing is published, and the report is left for the next attempt.
func (s *Supervisor) onAcceptFailed(t *Task, session, report string) {
	if err := s.writeFailure(t.ID, report); err != nil {
		s.log.Error("accept: failure report", "task", t.ID, "err", err)
	}
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvAcceptFailed, Task: t.ID, Session: session, Data: jsonData(map[string]any{
			"accept": t.Accept, "failure": s.failureFile(t.ID)})})
		return nil
	})
	s.failAttempt(t, session, "accept check failed: "+firstLine(lastLine(report)))
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// A persistent task publishes while its agent runs (PublishNow, ctl publish), so its
// accept check cannot follow the agent's exit: it runs beside the agent, inside the
// live session, before the changeset is captured. A failing check publishes nothing
// and the session goes on; the check's output is in the accept.failed event, and
// `corral publish` inside the session returns it to the agent.
func (s *Supervisor) acceptThenPublish(ls *liveSession, message string) {
	t := s.tasks[ls.rec.Task]
	t.State, t.Reason = TaskPublishing, "accept check running"
	s.saveTask(t)
	ctx, accept := s.ctx, t.Accept
	if ctx == nil {
		ctx = context.Background()
	}
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		out, code, err := ls.sb.Exec(ctx, []string{"/bin/sh", "-c", accept})
		s.post(func() {
			if s.sessions[ls.rec.ID] != ls {
				return // the session ended meanwhile; that path moved the task on
			}
			t.Reason = ""
			switch {
			case ctx.Err() != nil: // the supervisor is stopping: no verdict
				t.State = TaskRunning
				s.saveTask(t)
			case err == nil && code == 0:
				s.capturePublish(ls, 0, false, message)
			default:
				s.onLiveAcceptFailed(t, ls, code, err, out)
			}
		})
	}()
}

// onLiveAcceptFailed records a persistent session's failed accept check: nothing is
// published and the session goes on running.
func (s *Supervisor) onLiveAcceptFailed(t *Task, ls *liveSession, code int, err error, out []byte) {
	why := fmt.Sprintf("exit %d", code)
	if err != nil {
		why = err.Error()
	}
	report := fmt.Sprintf("corral: the task's accept check failed (%s), so nothing was published\n%s", why,
		tail(bytes.ReplaceAll(out, []byte("\r\n"), []byte("\n")), laneOutputTail))
	t.State, t.Reason = TaskRunning, "accept check failed ("+why+"): "+firstLine(lastLine(report))
	s.saveTask(t, Event{Kind: EvAcceptFailed, Task: t.ID, Session: ls.rec.ID, Data: jsonData(map[string]any{
		"accept": t.Accept, "exit": code, "report": report})})
}
