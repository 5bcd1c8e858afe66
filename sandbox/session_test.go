package sandbox

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var sessionSeq atomic.Int64

// testSession starts a session running a shell script and destroys it at cleanup.
func testSession(t *testing.T, repo Repo, snap *Snapshot, script string, opts ...func(*SessionConfig)) *Session {
	t.Helper()
	cfg := SessionConfig{
		ID:       fmt.Sprintf("t%d-%d", os.Getpid(), sessionSeq.Add(1)),
		Repo:     repo,
		Snapshot: snap,
		Command:  []string{"/bin/sh", "-c", script},
	}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := StartSession(cfg)
	if err != nil {
		t.Fatalf("start session: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Destroy(false); err != nil {
			t.Errorf("destroy: %v", err)
		}
		assertSessionGone(t, s)
	})
	return s
}

// waitExit waits for the agent to exit and returns its status and full output.
func waitExit(t *testing.T, s *Session) (ExitStatus, string) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(30 * time.Second):
		out, _ := s.Output().Since(0)
		t.Fatalf("session %s did not exit; output so far:\n%s", s.ID(), out)
	}
	<-s.readerDone
	out, _ := s.Output().Since(0)
	return s.Wait(), string(out)
}

// waitOutput waits until the session's output contains want.
func waitOutput(t *testing.T, s *Session, want string) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		changed := s.Output().Changed()
		out, _ := s.Output().Since(0)
		if strings.Contains(string(out), want) {
			return string(out)
		}
		select {
		case <-changed:
		case <-s.Done():
			out, _ := s.Output().Since(0)
			if strings.Contains(string(out), want) {
				return string(out)
			}
			t.Fatalf("session exited before printing %q:\n%s", want, out)
		case <-deadline:
			t.Fatalf("no %q in output:\n%s", want, out)
		}
	}
}

// assertSessionGone checks destroy left nothing: no mount, no cgroup, no process.
func assertSessionGone(t *testing.T, s *Session) {
	t.Helper()
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), s.Dir()) {
		t.Errorf("a mount under %s survived destroy", s.Dir())
	}
	for _, h := range []string{"memory", "pids", "freezer", "cpu", "unified", ""} {
		p := filepath.Join("/sys/fs/cgroup", h, s.meta.Cgroup)
		if _, err := os.Stat(p); err == nil {
			t.Errorf("cgroup %s survived destroy", p)
		}
	}
	if err := unix.Kill(s.Pid(), 0); err == nil {
		t.Errorf("init %d still alive after destroy", s.Pid())
	}
}

func sessionFixture(t *testing.T) (Repo, *Snapshot) {
	t.Helper()
	requireRoot(t)
	repo := newTestRepo(t, map[string]string{
		"README.md":       "hello\n",
		"src/app.go":      "package app\n",
		"src/lib/util.go": "package lib\n",
		"docs/a.md":       "a\n",
		"docs/b.md":       "b\n",
		"link":            "link:README.md",
		".gitignore":      ".env\nbuild/\n",
	})
	snaps, err := OpenSnapshots(repo)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snaps.Ensure("HEAD")
	if err != nil {
		t.Fatal(err)
	}
	return repo, snap
}

func TestSessionSeesItsBaseRevision(t *testing.T) {
	repo, snap := sessionFixture(t)
	s := testSession(t, repo, snap, `cd "$CORRAL_WORKSPACE" && pwd && git rev-parse HEAD && cat README.md && echo status:$(git status --porcelain | wc -l) && echo base:$CORRAL_BASE && hostname`)
	st, out := waitExit(t, s)
	if st.Code != 0 {
		t.Fatalf("exit %d:\n%s", st.Code, out)
	}
	for _, want := range []string{repo.WorkTree, snap.Commit, "hello", "status:0", "base:" + snap.Commit, "corral-" + s.ID()} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSessionGitShowsOwnChanges(t *testing.T) {
	repo, snap := sessionFixture(t)
	s := testSession(t, repo, snap, `echo changed >> README.md && echo new > new.txt && git status --porcelain && git diff --stat && git add -A && git -c user.name=a -c user.email=a@b commit -qm x && echo committed`)
	st, out := waitExit(t, s)
	if st.Code != 0 {
		t.Fatalf("exit %d:\n%s", st.Code, out)
	}
	for _, want := range []string{" M README.md", "?? new.txt", "1 file changed", "committed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSessionWritesStayPrivate(t *testing.T) {
	repo, snap := sessionFixture(t)
	before := treeDigest(t, snap.Layers...)
	hostTmp := fmt.Sprintf("/tmp/corral-leak-%d", os.Getpid())
	s := testSession(t, repo, snap, fmt.Sprintf(`
echo mine > README.md; echo x > fresh.txt; rm docs/a.md
touch /usr/corral-leak && echo usr-writable
touch /etc/corral-leak && echo etc-writable
touch / corral-leak 2>/dev/null; touch /corral-leak && echo root-writable
echo private > %s && echo tmp-ok
ls %s/corral 2>/dev/null && echo state-visible
echo $HOME > $HOME/home-ok && echo home-ok
true`, hostTmp, repo.GitDir))
	st, out := waitExit(t, s)
	if st.Code != 0 {
		t.Fatalf("exit %d:\n%s", st.Code, out)
	}
	for _, bad := range []string{"usr-writable", "etc-writable", "root-writable", "state-visible"} {
		if strings.Contains(out, bad) {
			t.Errorf("sandbox could: %s\n%s", bad, out)
		}
	}
	for _, want := range []string{"tmp-ok", "home-ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(hostTmp); err == nil {
		os.Remove(hostTmp)
		t.Errorf("a write to the sandbox's /tmp reached the host")
	}
	if data, _ := os.ReadFile(filepath.Join(repo.WorkTree, "README.md")); string(data) != "hello\n" {
		t.Errorf("host work tree changed: README.md = %q", data)
	}
	if _, err := os.Stat(filepath.Join(repo.WorkTree, "fresh.txt")); err == nil {
		t.Errorf("host work tree gained fresh.txt")
	}
	if after := treeDigest(t, snap.Layers...); after != before {
		t.Errorf("the snapshot changed under a session")
	}
	if data, err := os.ReadFile(filepath.Join(s.Upper(), "README.md")); err != nil || string(data) != "mine\n" {
		t.Errorf("upper layer README.md = %q, %v", data, err)
	}
}

func TestSessionsDoNotSeeEachOther(t *testing.T) {
	repo, snap := sessionFixture(t)
	a := testSession(t, repo, snap, `echo from-a > shared.txt && echo a-wrote && sleep 30`)
	waitOutput(t, a, "a-wrote")
	b := testSession(t, repo, snap, `test -e shared.txt && echo b-sees-a || echo b-alone; cat README.md`)
	_, out := waitExit(t, b)
	if !strings.Contains(out, "b-alone") || !strings.Contains(out, "hello") {
		t.Errorf("session b output:\n%s", out)
	}
}

func TestSessionRunsAsGivenUser(t *testing.T) {
	repo, snap := sessionFixture(t)
	s := testSession(t, repo, snap, `id -u; id -g; echo home=$HOME; touch $HOME/x && echo home-writable`, func(c *SessionConfig) {
		c.User = &User{UID: 65534, GID: 65534, Name: "nobody", Home: "/home/nobody"}
	})
	_, out := waitExit(t, s)
	for _, want := range []string{"65534\r\n65534", "home=/home/nobody", "home-writable"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSessionExtraBinds(t *testing.T) {
	repo, snap := sessionFixture(t)
	ro, rw := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ro, "config"), []byte("agent-config\n"), 0o644)
	s := testSession(t, repo, snap, fmt.Sprintf(`cat %[1]s/config; touch %[1]s/x && echo ro-writable; echo cached > %[2]s/cache && echo rw-ok`, ro, rw),
		func(c *SessionConfig) { c.Binds = []Bind{{Path: ro}, {Path: rw, Writable: true}} })
	_, out := waitExit(t, s)
	if !strings.Contains(out, "agent-config") || !strings.Contains(out, "rw-ok") || strings.Contains(out, "ro-writable") {
		t.Errorf("output:\n%s", out)
	}
	if data, _ := os.ReadFile(filepath.Join(rw, "cache")); string(data) != "cached\n" {
		t.Errorf("writable bind did not reach the host: %q", data)
	}
}

func TestSessionEnvLayerVisibleNeverCaptured(t *testing.T) {
	repo, snap := sessionFixture(t)
	os.WriteFile(filepath.Join(repo.WorkTree, ".env"), []byte("SECRET=1\n"), 0o600)
	s := testSession(t, repo, snap, `cat .env && echo SECRET=2 > .env && echo edited && echo src > src/new.go`,
		func(c *SessionConfig) { c.EnvFiles = []string{".env"} })
	_, out := waitExit(t, s)
	if !strings.Contains(out, "SECRET=1") || !strings.Contains(out, "edited") {
		t.Fatalf("output:\n%s", out)
	}
	cs, err := s.Capture()
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Path != "src/new.go" {
		t.Errorf("changeset = %+v, want only src/new.go", cs)
	}
	if data, _ := os.ReadFile(filepath.Join(repo.WorkTree, ".env")); string(data) != "SECRET=1\n" {
		t.Errorf("host .env changed: %q", data)
	}
}

func TestSessionPortsOnDistinctEndpoints(t *testing.T) {
	repo, snap := sessionFixture(t)
	serve := func(name string) *Session {
		return testSession(t, repo, snap, testServerScript(name),
			func(c *SessionConfig) { c.Ports = []Port{{Inside: 4173}} })
	}
	a, b := serve("alpha"), serve("beta")
	for _, s := range []*Session{a, b} {
		waitOutput(t, s, "listening")
	}
	ea, eb := a.Endpoints(), b.Endpoints()
	if len(ea) != 1 || len(eb) != 1 || ea[0].Host == eb[0].Host {
		t.Fatalf("endpoints a=%v b=%v", ea, eb)
	}
	for name, ep := range map[string]string{"alpha": ea[0].Host, "beta": eb[0].Host} {
		body := httpGet(t, ep)
		if !strings.Contains(body, name) {
			t.Errorf("endpoint %s answered %q, want %q", ep, body, name)
		}
	}
}

func TestSessionHostNetworkHandsOutPorts(t *testing.T) {
	repo, snap := sessionFixture(t)
	s := testSession(t, repo, snap, `echo port=$CORRAL_PORT_4173`, func(c *SessionConfig) {
		c.Network = NetHost
		c.Ports = []Port{{Inside: 4173}}
	})
	_, out := waitExit(t, s)
	eps := s.Endpoints()
	if len(eps) != 1 || !strings.Contains(out, "port="+strings.TrimPrefix(eps[0].Host, "127.0.0.1:")) {
		t.Errorf("endpoints %v, output:\n%s", eps, out)
	}
}

func TestSessionFreezeStopsAndThawResumes(t *testing.T) {
	repo, snap := sessionFixture(t)
	s := testSession(t, repo, snap, `i=0; echo spinning; while :; do i=$((i+1)); done`)
	waitOutput(t, s, "spinning")
	time.Sleep(100 * time.Millisecond)
	if err := s.Freeze(); err != nil {
		t.Fatal(err)
	}
	st1, _ := s.Stats()
	time.Sleep(300 * time.Millisecond)
	st2, _ := s.Stats()
	if st2.CPUUsage != st1.CPUUsage {
		t.Errorf("frozen session used CPU: %v -> %v", st1.CPUUsage, st2.CPUUsage)
	}
	if err := s.Thaw(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	st3, _ := s.Stats()
	if st3.CPUUsage-st2.CPUUsage < 50*time.Millisecond {
		t.Errorf("thawed session did not resume: %v -> %v", st2.CPUUsage, st3.CPUUsage)
	}
}

func TestSessionForkBombHitsPidsLimit(t *testing.T) {
	repo, snap := sessionFixture(t)
	s := testSession(t, repo, snap, `(for i in $(seq 200); do sleep 30 & done) 2>/tmp/err; echo spawned; read line < /tmp/err; echo "first: $line"`,
		func(c *SessionConfig) { c.Limits = Limits{Pids: 32} })
	waitOutput(t, s, "first:")
	out, _ := s.Output().Since(0)
	if !strings.Contains(strings.ToLower(string(out)), "fork") {
		t.Errorf("no fork failure reported:\n%s", out)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Pids > 32 {
		t.Errorf("pids = %d, limit 32", st.Pids)
	}
}

func TestSessionMemoryHogIsOOMKilled(t *testing.T) {
	repo, snap := sessionFixture(t)
	s := testSession(t, repo, snap, `head -c 600M /dev/zero | tail; echo hog-exit=$?`,
		func(c *SessionConfig) { c.Limits = Limits{Memory: 64 << 20} })
	_, out := waitExit(t, s)
	if !strings.Contains(out, "hog-exit=137") {
		t.Errorf("hog was not SIGKILLed:\n%s", out)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.OOMKills < 1 {
		t.Errorf("OOMKills = %d, want ≥ 1", st.OOMKills)
	}
}

func TestSessionSignalsAreForwarded(t *testing.T) {
	repo, snap := sessionFixture(t)
	s := testSession(t, repo, snap, `trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done`)
	waitOutput(t, s, "ready")
	if err := s.Signal(unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st, out := waitExit(t, s)
	if st.Code != 7 || !strings.Contains(out, "got-term") {
		t.Errorf("exit %d, output:\n%s", st.Code, out)
	}
}

func TestSessionRecordingIsAsciicast(t *testing.T) {
	repo, snap := sessionFixture(t)
	s := testSession(t, repo, snap, `printf 'héllo wörld\n'`)
	waitExit(t, s)
	s.rec.Flush()
	f, err := os.Open(s.RecordingPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan()
	var hdr asciicastHeader
	if err := json.Unmarshal(sc.Bytes(), &hdr); err != nil || hdr.Version != 2 || hdr.Width != 120 {
		t.Fatalf("header %q: %v", sc.Text(), err)
	}
	var text strings.Builder
	for sc.Scan() {
		var ev []any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || len(ev) != 3 {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		text.WriteString(ev[2].(string))
	}
	if !strings.Contains(text.String(), "héllo wörld") {
		t.Errorf("recording text = %q", text.String())
	}
}

func TestSessionCaptureMatchesFullDiff(t *testing.T) {
	repo, snap := sessionFixture(t)
	s := testSession(t, repo, snap, `
echo new > added.txt
echo more >> README.md
rm docs/a.md
rm -rf src/lib
mv docs/b.md docs/c.md
mkdir -p moved && mv src moved/src2
chmod +x moved/src2/app.go
ln -sf docs/c.md link
ln -s README.md newlink
mkdir build && echo junk > build/out && echo ignored
`)
	st, out := waitExit(t, s)
	if st.Code != 0 {
		t.Fatalf("exit %d:\n%s", st.Code, out)
	}
	cs, err := s.Capture()
	if err != nil {
		t.Fatal(err)
	}
	base := mountView(t, snap.Layers)
	merged := mountView(t, append([]string{s.Upper()}, snap.Layers...))
	full, err := DiffTrees(base, merged, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The full diff does not know .gitignore; capture drops untracked ignored files.
	var fullTracked Changeset
	for _, c := range full {
		if !strings.HasPrefix(c.Path, "build/") {
			fullTracked = append(fullTracked, c)
		}
	}
	if got, want := sessionChanges(cs), sessionChanges(fullTracked); got != want {
		t.Errorf("capture:\n%s\nfull diff:\n%s", got, want)
	}
	want := "added added.txt\nmodified README.md\ndeleted docs/a.md\ndeleted docs/b.md\nadded docs/c.md\nmodified link\nadded moved/src2/app.go\nadded newlink\ndeleted src/app.go\ndeleted src/lib/util.go\n"
	if got := sessionChanges(cs); got != sortLines(want) {
		t.Errorf("capture:\n%s\nwant:\n%s", got, sortLines(want))
	}
}

func TestSessionBadInputLeavesNothing(t *testing.T) {
	repo, snap := sessionFixture(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	cases := map[string]SessionConfig{
		"duplicate port": {ID: "bad-dup", Ports: []Port{{Inside: 4173}, {Inside: 4173}}},
		"port range":     {ID: "bad-range", Ports: []Port{{Inside: 70000}}},
		"host port busy": {ID: "bad-busy", Ports: []Port{{Inside: 4173, Host: busyPort}}},
		"bad id":         {ID: "Bad/ID"},
		"bind in repo":   {ID: "bad-bind", Binds: []Bind{{Path: repo.WorkTree}}},
		"missing bind":   {ID: "bad-missing", Binds: []Bind{{Path: "/nonexistent/corral"}}},
		"env missing":    {ID: "bad-env", EnvFiles: []string{"nope.env"}},
		"no command":     {ID: "bad-cmd", Command: []string{}},
		"network":        {ID: "bad-net", Network: "bridge"},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			cfg.Repo, cfg.Snapshot = repo, snap
			if cfg.Command == nil {
				cfg.Command = []string{"true"}
			}
			s, err := StartSession(cfg)
			if err == nil {
				s.Destroy(false)
				t.Fatalf("started; want an error")
			}
			if !strings.Contains(err.Error(), "session") {
				t.Errorf("error does not say where: %v", err)
			}
			if _, statErr := os.Stat(sessionDir(repo, cfg.ID)); statErr == nil {
				t.Errorf("session dir left behind after: %v", err)
			}
			mi, _ := os.ReadFile("/proc/self/mountinfo")
			if strings.Contains(string(mi), repo.StateDir+"/w/") {
				t.Errorf("mount left behind after: %v", err)
			}
		})
	}
	if _, err := StartSession(SessionConfig{ID: "bad-cmd2", Repo: repo, Snapshot: snap, Command: []string{"no-such-agent"}}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("unknown command: %v", err)
	}
	if _, err := os.Stat(sessionDir(repo, "bad-cmd2")); err == nil {
		t.Errorf("session dir left after an agent that cannot start")
	}
	// An id is never reused.
	s := testSession(t, repo, snap, "true")
	waitExit(t, s)
	if _, err := StartSession(SessionConfig{ID: s.ID(), Repo: repo, Snapshot: snap, Command: []string{"true"}}); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Errorf("reused id: %v", err)
	}
}

func TestSessionDestroyKeepsLayerOnRequest(t *testing.T) {
	repo, snap := sessionFixture(t)
	s, err := StartSession(SessionConfig{ID: fmt.Sprintf("keep-%d", os.Getpid()), Repo: repo, Snapshot: snap,
		// Written aside and renamed: the test waits for the name, and must not find it empty.
		Command: []string{"/bin/sh", "-c", "echo work > result.tmp && mv result.tmp result.txt; sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { DiscardSession(repo, s.ID()) })
	waitFile(t, filepath.Join(s.Upper(), "result.txt"))
	if err := s.Destroy(true); err != nil {
		t.Fatal(err)
	}
	assertSessionGone(t, s)
	if data, err := os.ReadFile(filepath.Join(s.Upper(), "result.txt")); err != nil || string(data) != "work\n" {
		t.Errorf("kept layer lost the work: %q %v", data, err)
	}
	metas, _ := ListSessions(repo)
	if len(metas) != 1 || metas[0].ID != s.ID() || metas[0].Commit != snap.Commit {
		t.Errorf("ListSessions = %+v", metas)
	}
}

func TestReapAfterCrash(t *testing.T) {
	repo, snap := sessionFixture(t)
	// A crashed supervisor leaves a cgroup and a session dir behind; simulate both.
	id := fmt.Sprintf("crashed-%d", os.Getpid())
	cg, err := NewCgroup("corral/"+FleetKey(repo)+"/"+id, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cg.Delete(); DiscardSession(repo, id) })
	os.MkdirAll(filepath.Join(sessionDir(repo, id), "u"), 0o755)
	// A spare init's group left by another (crashed) supervisor process.
	deadSpare, err := NewCgroup(CgroupPrefix(repo)+"pool-1-1", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deadSpare.Delete() })
	// This process's pool and a session started from it stay.
	pool := NewInitPool(repo, 1)
	t.Cleanup(pool.Close)
	live := testSession(t, repo, snap, "sleep 30")
	pooled := testSession(t, repo, snap, "sleep 30", func(c *SessionConfig) { c.Pool = pool })
	rep, err := Reap(repo, func(sid string) bool { return sid == live.ID() || sid == pooled.ID() })
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rep.Cgroups, " "); got != CgroupPrefix(repo)+id+" "+CgroupPrefix(repo)+"pool-1-1" {
		t.Errorf("reaped cgroups %q, want %s and pool-1-1", got, id)
	}
	if !pooled.Running() {
		t.Errorf("reap killed a live session started from a spare")
	}
	if len(rep.Layers) != 1 || rep.Layers[0] != id {
		t.Errorf("stale layers %v", rep.Layers)
	}
	if !live.Running() {
		t.Errorf("reap killed a live session")
	}
	if _, err := os.Stat(filepath.Join(sessionDir(repo, id), "u")); err != nil {
		t.Errorf("reap removed a private layer: %v", err)
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 400; i++ {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}

// testServerScript answers every HTTP request on 127.0.0.1:4173 with name, using
// only the shell and the python3 the host has.
func testServerScript(name string) string {
	return fmt.Sprintf(`mkdir -p /tmp/www && echo %s > /tmp/www/index.html && cd /tmp/www && echo listening && exec python3 -m http.server 4173 --bind 127.0.0.1`, name)
}

func httpGet(t *testing.T, hostport string) string {
	t.Helper()
	var lastErr error
	for i := 0; i < 100; i++ {
		resp, err := http.Get("http://" + hostport + "/")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return string(body)
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("GET %s: %v", hostport, lastErr)
	return ""
}

func sessionChanges(cs Changeset) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s %s\n", c.Kind, c.Path)
	}
	return sortLines(b.String())
}

func sortLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// treeDigest summarizes every path, mode, size and mtime under the given dirs.
func treeDigest(t *testing.T, dirs ...string) string {
	t.Helper()
	var b strings.Builder
	for _, d := range dirs {
		filepath.Walk(d, func(p string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%s %v %d %d\n", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
			return nil
		})
	}
	return b.String()
}

func TestSessionFromWarmPool(t *testing.T) {
	repo, snap := sessionFixture(t)
	pool := NewInitPool(repo, 2)
	var spares []int
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		pool.mu.Lock()
		n := len(pool.spares)
		if n == 2 {
			for _, b := range pool.spares {
				spares = append(spares, b.cmd.Process.Pid)
			}
		}
		pool.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(spares) != 2 {
		t.Fatalf("pool never filled")
	}
	for i := 0; i < 3; i++ {
		s := testSession(t, repo, snap, `cat README.md; hostname; echo port-ok`, func(c *SessionConfig) { c.Pool = pool })
		_, out := waitExit(t, s)
		if !strings.Contains(out, "hello") || !strings.Contains(out, "corral-"+s.ID()) {
			t.Errorf("session %d from the pool:\n%s", i, out)
		}
		if i == 0 && s.Pid() != spares[0] {
			t.Errorf("first session did not take the first spare: pid %d, spares %v", s.Pid(), spares)
		}
	}
	time.Sleep(200 * time.Millisecond) // let the pool refill, so Close has spares to end
	pool.mu.Lock()
	var live []int
	for _, b := range pool.spares {
		live = append(live, b.cmd.Process.Pid)
	}
	pool.mu.Unlock()
	pool.Close()
	pool.mu.Lock()
	left := len(pool.spares)
	pool.mu.Unlock()
	if left != 0 || len(live) == 0 {
		t.Errorf("%d spares left after Close, %d before", left, len(live))
	}
	for _, pid := range live {
		if unix.Kill(pid, 0) == nil {
			t.Errorf("spare %d alive after Close", pid)
		}
	}
}

func TestSessionInitReapsZombies(t *testing.T) {
	repo, snap := sessionFixture(t)
	// Orphans re-parent to the init (PID 1), which must reap them.
	s := testSession(t, repo, snap, `for i in 1 2 3 4 5; do (sleep 0.05 &) ; done; sleep 0.5; echo pid1=$(cat /proc/1/comm); echo zombies=$(grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l)`)
	_, out := waitExit(t, s)
	if !strings.Contains(out, "zombies=0") || !strings.Contains(out, "pid1=") {
		t.Errorf("output:\n%s", out)
	}
}

func TestSessionResize(t *testing.T) {
	repo, snap := sessionFixture(t)
	s := testSession(t, repo, snap, `tty; stty size; echo ready; read line; stty size`)
	waitOutput(t, s, "ready")
	if err := s.Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("go\n"))
	_, out := waitExit(t, s)
	if !strings.Contains(out, "/dev/console") || !strings.Contains(out, "40 120") || !strings.Contains(out, "30 100") {
		t.Errorf("sizes before and after resize:\n%s", out)
	}
}

func TestInvokingUserUnderSudo(t *testing.T) {
	requireRoot(t)
	t.Setenv("SUDO_UID", "65534")
	u, err := InvokingUser()
	if err != nil {
		t.Fatal(err)
	}
	if u.UID != 65534 || u.Name != "nobody" {
		t.Errorf("under sudo the agent runs as %+v, want nobody", u)
	}
}

func TestSessionUnusableCgroupsIsAClearError(t *testing.T) {
	repo, snap := sessionFixture(t)
	saved := cgroupMount
	cgroupMount = t.TempDir() // a host with no cgroup hierarchy mounted
	defer func() { cgroupMount = saved }()
	_, err := StartSession(SessionConfig{ID: "nocg", Repo: repo, Snapshot: snap, Command: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "session nocg") || !strings.Contains(err.Error(), "cgroup") {
		t.Fatalf("err = %v", err)
	}
	if _, statErr := os.Stat(sessionDir(repo, "nocg")); statErr == nil {
		t.Errorf("session dir left behind")
	}
}
