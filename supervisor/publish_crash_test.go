package supervisor_test

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"corral/sandbox"
	"corral/supervisor"
)

// TestPublishCrashLeavesHeadBeforeOrAfter kills a publishing process with SIGKILL at
// random points, many times. Each time the head must be a valid commit whose history
// is a prefix of the publishes in the order they were made — every one the process
// reported, and at most the one in flight beyond — and the repository must pass fsck.
func TestPublishCrashLeavesHeadBeforeOrAfter(t *testing.T) {
	files := map[string]string{}
	for i := 0; i < 400; i++ {
		files[fmt.Sprintf("d%d/f%d.txt", i%10, i)] = fmt.Sprintf("file %d\n", i)
	}
	r := newPubRepo(t, files)
	self, _ := os.Executable()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	next := 0 // publishes are numbered across kills, so the head's history is checkable
	for kill := 0; kill < 12; kill++ {
		cmd := exec.Command(self, "-test.run=^TestPublishCrashHelper$")
		// The helper is killed, so its own TempDir would never be removed: it writes
		// into one of ours.
		cmd.Env = append(os.Environ(), "CORRAL_CRASH_REPO="+r.dir, fmt.Sprintf("CORRAL_CRASH_FROM=%d", next),
			"CORRAL_CRASH_LAYER="+t.TempDir())
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		reported := map[string]int{}
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		deadline := time.After(time.Duration(20+rng.Intn(200)) * time.Millisecond)
	wait:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break wait
				}
				var n int
				var head string
				if _, err := fmt.Sscanf(l, "landed %d %s", &n, &head); err == nil {
					reported[head] = n
				}
			case <-deadline:
				cmd.Process.Signal(syscall.SIGKILL)
				break wait
			}
		}
		for range lines {
		}
		cmd.Wait()
		// The head's history must be publishes 0..k-1 in order, every reported one in it.
		subjects := strings.Fields(run(t, r.dir, "git", "log", "--reverse", "--format=%(trailers:key=Corral-Session,valueonly)", r.base+"..corral/head"))
		for i, s := range subjects {
			if s != fmt.Sprintf("p-%d", i) {
				t.Fatalf("kill %d: head history %v is not a prefix of the publishes", kill, subjects)
			}
		}
		for head, n := range reported {
			if n >= len(subjects) {
				t.Fatalf("kill %d: publish %d was reported landed (%s) but the head has only %d", kill, n, head, len(subjects))
			}
		}
		next = len(subjects)
		run(t, r.dir, "git", "fsck", "--strict", "--no-dangling", "--no-progress")
	}
	t.Logf("%d publishes landed across 12 kills", next)
}

// TestPublishCrashHelper is the process the crash test kills: it publishes numbered
// changesets one after another and reports each that landed.
func TestPublishCrashHelper(t *testing.T) {
	dir := os.Getenv("CORRAL_CRASH_REPO")
	if dir == "" {
		t.Skip("the crash test's helper process")
	}
	var from int
	fmt.Sscan(os.Getenv("CORRAL_CRASH_FROM"), &from)
	repo, err := sandbox.OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	pub := &supervisor.GitPublisher{Repo: repo, HeadRef: "corral/head"}
	layer := os.Getenv("CORRAL_CRASH_LAYER")
	for n := from; n < from+1000; n++ {
		var cs sandbox.Changeset
		for k := 0; k < 10; k++ {
			p := fmt.Sprintf("d%d/f%d.txt", k, (n*10+k)%400)
			src := fmt.Sprintf("%s/%d-%d", layer, n, k)
			os.WriteFile(src, []byte(fmt.Sprintf("publish %d\n", n)), 0o644)
			cs = append(cs, sandbox.Change{Path: p, Kind: sandbox.Modified, Mode: 0o644, Source: src})
		}
		head := strings.TrimSpace(runQuiet(dir, "git", "rev-parse", "corral/head"))
		res, err := pub.Publish(supervisor.PublishRequest{Task: supervisor.Task{ID: "p"},
			Session: supervisor.Session{ID: fmt.Sprintf("p-%d", n), Base: head}, Changes: cs})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("landed %d %s\n", n, res.NewHead)
	}
}

func runQuiet(dir, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, _ := cmd.Output()
	return string(out)
}
