package supervisor

import (
	"bytes"
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
