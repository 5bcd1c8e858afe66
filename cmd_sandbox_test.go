package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"corral/sandbox"
)

// TestMain lets the test binary serve as the sandbox init when it re-executes itself.
func TestMain(m *testing.M) {
	if sandbox.IsInit() {
		sandbox.InitMain()
		return
	}
	// Tests that must kill a whole corral process run this binary as corral; inside a
	// sandbox it is bound at /.corral/bin/corral and agents call it by that name.
	if os.Getenv("CORRAL_TEST_MAIN") == "1" || filepath.Base(os.Args[0]) == "corral" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: real overlay mounts, namespaces and cgroups (CI runs as root)")
	}
}

// gitRepo makes a real repository with one commit.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("sh", "-c", "git init -q -b main && git add -A && git commit -q -m init")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git: %v\n%s", err, out)
	}
	return dir
}

func runMain(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := Main(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestSandboxRunPrintsChangeset(t *testing.T) {
	requireRoot(t)
	repo := gitRepo(t, map[string]string{"a.txt": "a\n", "d/x": "x\n"})
	code, out, errOut := runMain("sandbox", "run", "--repo", repo, "-q", "--", "echo new > n.txt; rm d/x; echo more >> a.txt; exit 3")
	if code != 3 {
		t.Fatalf("exit %d, want the agent's 3; stderr:\n%s\nstdout:\n%s", code, errOut, out)
	}
	for _, want := range []string{"exited 3", "modified  a.txt", "deleted   d/x", "added     n.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(repo, "a.txt")); string(data) != "a\n" {
		t.Errorf("the work tree changed: %q", data)
	}
	code, out, _ = runMain("sandbox", "ls", "--repo", repo)
	if code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("sandbox ls after a run without --keep: exit %d\n%s", code, out)
	}
}

func TestSandboxRunKeepAndDiscard(t *testing.T) {
	requireRoot(t)
	repo := gitRepo(t, map[string]string{"a.txt": "a\n"})
	code, out, errOut := runMain("sandbox", "run", "--repo", repo, "--id", "kept-1", "--keep", "-q", "--", "echo work > w.txt")
	if code != 0 || !strings.Contains(out, "private layer kept") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if _, out, _ = runMain("sandbox", "ls", "--repo", repo); !strings.Contains(out, "kept-1") {
		t.Errorf("ls does not list the kept session:\n%s", out)
	}
	if code, _, errOut = runMain("sandbox", "run", "--repo", repo, "--id", "kept-1", "--", "true"); code == 0 || !strings.Contains(errOut, "already used") {
		t.Errorf("reusing an id: exit %d, %s", code, errOut)
	}
	if code, out, errOut = runMain("sandbox", "discard", "--repo", repo, "kept-1"); code != 0 {
		t.Fatalf("discard: exit %d %s %s", code, out, errOut)
	}
	if code, out, _ = runMain("sandbox", "gc", "--repo", repo, "--keep", "0"); code != 0 || !strings.Contains(out, "removed 1 snapshot") {
		t.Errorf("gc: exit %d: %s", code, out)
	}
}

func TestSandboxRunBadInput(t *testing.T) {
	requireRoot(t)
	repo := gitRepo(t, map[string]string{"a.txt": "a\n"})
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	missing := filepath.Join(t.TempDir(), "nope")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing repo", []string{"--repo", missing}, exitBadInput, missing},
		{"not a repo", []string{"--repo", t.TempDir()}, exitBadInput, "not a git repository"},
		{"unknown revision", []string{"--repo", repo, "--rev", "no-such-branch"}, exitBadInput, `revision "no-such-branch": unknown revision`},
		{"port leased twice", []string{"--repo", repo, "--port", "4173", "--port", "4173"}, exitBadInput, "port 4173: already leased"},
		{"host port busy", []string{"--repo", repo, "--port", busyPort + ":4173"}, exitBadInput, "host port " + busyPort + " already in use"},
		{"bad port", []string{"--repo", repo, "--port", "http"}, exitBadInput, "want PORT or HOST:PORT"},
		{"bad memory", []string{"--repo", repo, "--mem", "lots"}, exitBadInput, `size "lots"`},
		{"unknown flag", []string{"--repo", repo, "--bogus"}, exitBadInput, "bogus"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append(append([]string{"sandbox", "run"}, c.args...), "--", "true")
			code, out, errOut := runMain(args...)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d naming %q (stdout %q)", code, errOut, c.code, c.want, out)
			}
		})
	}
	// Nothing was left behind: no session layer, no mount.
	if entries, _ := os.ReadDir(filepath.Join(repo, ".git", "corral", "w")); len(entries) != 0 {
		t.Errorf("session dirs left behind: %v", entries)
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), repo) {
		t.Errorf("a mount under %s was left behind", repo)
	}
}

// TestBenchSandboxSmall runs the benchmark end to end at toy scale: it must measure
// every figure and print each ratio.
func TestBenchSandboxSmall(t *testing.T) {
	requireRoot(t)
	files := map[string]string{}
	for i := 0; i < 60; i++ {
		files[filepath.Join("pkg", strconv.Itoa(i%6), strconv.Itoa(i)+".go")] = "package p\n"
	}
	repo := gitRepo(t, files)
	code, out, errOut := runMain("bench", "sandbox", "--repo", repo, "--scratch", t.TempDir(),
		"--sessions", "1,3", "--worktrees-max", "1", "--changed", "20", "--snapshot-changed", "5", "--pool", "1")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"cold start", "ready ratio", "capture of 20 changed files", "snapshot of a revision changing 5 files", "goals:", "ready session p50 ≤ 20 ms (n=3)"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
}
