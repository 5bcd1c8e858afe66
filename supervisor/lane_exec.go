package supervisor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"corral/sandbox"
)

// laneResult is what judging one commit found.
type laneResult struct {
	Outcome string // green, red, flaky or error
	Runs    int
	Session string // the last execution's sandbox id
	Output  string // red or flaky: the tail of the failing run's output
	Record  string // host file holding the failing run's whole output
	Err     error  // error: why the run did not happen
}

// laneOutputTail is how much of a failing run's output a record keeps inline; the
// whole output is in its Record file.
const laneOutputTail = 4 << 10

// laneDir holds the lane's outputs and recordings, beside the fleet's other state.
func (s *Supervisor) laneDir() string { return laneDirOf(s.repo) }

func laneDirOf(repo sandbox.Repo) string { return filepath.Join(repo.StateDir, "lane") }

// laneJudge runs the fleet's test at commit, re-running a failure as the lane's policy
// says, and keeps the failing run's output. It runs off the loop (it waits for
// sandboxes); ctx ends it early, and the result is then an error.
func (s *Supervisor) laneJudge(ctx context.Context, run int64, commit string, lane Lane, test string) laneResult {
	var res laneResult
	var failing []byte
	n := 0
	res.Outcome, res.Runs, res.Err = judgeRuns(lane.Reruns, func() (bool, error) {
		n++
		id := fmt.Sprintf("lane%d-%d-%x", run, n, time.Now().UnixNano()&0xffffff)
		res.Session = id
		ok, out, err := s.laneExec(ctx, run, id, commit, n, lane, test)
		if err == nil && !ok && failing == nil {
			failing = out
		}
		return ok, err
	})
	if res.Err != nil {
		res.Output = res.Err.Error()
		return res
	}
	if failing != nil {
		res.Output = tail(failing, laneOutputTail)
		res.Record = filepath.Join(s.laneDir(), fmt.Sprintf("%d.out", run))
		if err := os.MkdirAll(s.laneDir(), 0o755); err == nil {
			os.WriteFile(res.Record, failing, 0o644)
		}
	}
	return res
}

// laneExec runs the test command once (attempt counts re-runs from 1, given to the
// test as $CORRAL_LANE_ATTEMPT) at commit in a fresh one-shot sandbox — a
// snapshot of the commit, a private layer thrown away after, the lane's budget, the
// gateway's egress proxy when the plan has one — and
// returns whether it exited 0 and what it printed. Its recording is kept under the
// lane's directory as <id>.cast.
func (s *Supervisor) laneExec(ctx context.Context, run int64, id, commit string, attempt int, lane Lane, test string) (bool, []byte, error) {
	if err := ctx.Err(); err != nil {
		return false, nil, err
	}
	snap, err := s.snaps.Ensure(commit)
	if err != nil {
		return false, nil, fmt.Errorf("lane: snapshot %.12s: %w", commit, err)
	}
	sb, err := sandbox.StartSession(sandbox.SessionConfig{
		ID: id, Repo: s.repo, Snapshot: snap, Command: []string{"/bin/sh", "-c", test},
		Env: []string{"CORRAL_LANE_COMMIT=" + commit, "CORRAL_LANE_ATTEMPT=" + strconv.Itoa(attempt),
			"CORRAL_TASK=lane", "CI=1"},
		Limits: sandbox.Limits{CPU: lane.CPU, Memory: lane.Memory},
		Pool:   s.pool, Cols: 120, Rows: 40,
		// The network as sessions have it: the gateway's egress proxy, allowed hosts only.
		Services: s.gatewayService(id),
	})
	if err != nil {
		return false, nil, fmt.Errorf("lane: start %s at %.12s: %w", id, commit, err)
	}
	s.laneLive.add(run, id, sb)
	defer s.laneLive.remove(run, id)
	var timeout <-chan time.Time
	if lane.Timeout > 0 {
		t := time.NewTimer(lane.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	timedOut := false
	select {
	case <-sb.Done():
	case <-timeout:
		timedOut = true
	case <-ctx.Done():
	}
	// Destroy waits for the output reader, so the ring below holds everything printed.
	derr := sb.Destroy(true)
	st := sb.Wait()
	out, _ := sb.Output().Since(0)
	if dst := s.laneDir(); os.MkdirAll(dst, 0o755) == nil {
		copyFile(sb.RecordingPath(), LaneRecording(s.repo, id))
		pruneOldest(filepath.Join(dst, "*.cast"), laneKeepRecordings)
	}
	os.RemoveAll(sb.Dir())
	if ctx.Err() != nil {
		return false, out, ctx.Err()
	}
	if timedOut {
		out = append(out, fmt.Sprintf("\r\ncorral: test timed out after %s\r\n", lane.Timeout)...)
		return false, out, nil
	}
	if derr != nil {
		s.log.Warn("lane: destroy sandbox", "session", id, "err", derr)
	}
	return st.Code == 0, out, nil
}

// laneLive follows the lane's running test sandboxes, so their output can be watched
// live (SessionOutput) and each run says which sandbox runs it now (FleetState).
type laneLive struct {
	mu    sync.Mutex
	byID  map[string]*sandbox.Session
	byRun map[int64]string // lane run → the sandbox executing it
}

func (l *laneLive) add(run int64, id string, sb *sandbox.Session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byID == nil {
		l.byID, l.byRun = map[string]*sandbox.Session{}, map[int64]string{}
	}
	l.byID[id], l.byRun[run] = sb, id
}

func (l *laneLive) remove(run int64, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byID, id)
	if l.byRun[run] == id {
		delete(l.byRun, run)
	}
}

func (l *laneLive) session(id string) *sandbox.Session {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byID[id]
}

func (l *laneLive) runs() map[int64]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[int64]string, len(l.byRun))
	for k, v := range l.byRun {
		m[k] = v
	}
	return m
}

// LaneRecording is where the lane keeps a test sandbox's recorded terminal.
func LaneRecording(repo sandbox.Repo, id string) string {
	return filepath.Join(laneDirOf(repo), id+".cast")
}

// laneKeepRecordings is how many test recordings the lane keeps; older ones go (the
// lane-run records keep each failure's output tail).
const laneKeepRecordings = 500

// pruneOldest removes the oldest files matching pattern beyond keep.
func pruneOldest(pattern string, keep int) {
	files, _ := filepath.Glob(pattern)
	if len(files) <= keep {
		return
	}
	mod := func(p string) time.Time {
		fi, err := os.Stat(p)
		if err != nil {
			return time.Time{}
		}
		return fi.ModTime()
	}
	sort.Slice(files, func(i, j int) bool { return mod(files[i]).Before(mod(files[j])) })
	for _, f := range files[:len(files)-keep] {
		os.Remove(f)
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
	}
	return string(b)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
