package sandbox

import (
	"bytes"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// ignoreFixture is one set of ignore files; every case path below is created as a file
// so that git sees the same directories the matcher is asked about.
var ignoreFixture = map[string]string{
	".gitignore": strings.Join([]string{
		"# a comment, then a blank line",
		"",
		"*.log",
		"!keep.log",
		"build/",
		"/rootonly.txt",
		"docs/*.tmp",
		"**/cache",
		"logs/**",
		"a/**/z.txt",
		"[abc]x.bin",
		"?q.dat",
		`trail\ `,
		"spaces.txt   ",
		`\#hash`,
		`\!bang`,
		"out",
		"!out/keep.txt",
		"v[[:digit:]].txt",
		"[!a]n.txt",
		"!x.tmp2",
	}, "\n"),
	"sub/.gitignore":       "!important.log\nlocal.txt\n/anchored.txt\ndeep/\n",
	"sub/inner/.gitignore": "*.md\n!README.md\n",
	".git/info/exclude":    "secret.env\n*.tmp2\n",
}

// TestGitignoreMatchesGit checks the matcher against git check-ignore (git 2.39) on a
// real repository, and both against the expectation written here.
func TestGitignoreMatchesGit(t *testing.T) {
	cases := []struct {
		path    string
		ignored bool
	}{
		{"app.log", true},
		{"keep.log", false},
		{"sub/keep.log", false},
		{"sub/important.log", false},
		{"sub/other.log", true},
		{"build/x.c", true},
		{"src/build/y.c", true},
		{"notdir/build", false},
		{"rootonly.txt", true},
		{"sub/rootonly.txt", false},
		{"docs/a.tmp", true},
		{"docs/x/a.tmp", false},
		{"cache/f", true},
		{"x/y/cache/f", true},
		{"logs/a/b", true},
		{"a/z.txt", true},
		{"a/b/z.txt", true},
		{"a/b/c/z.txt", true},
		{"b/a/z.txt", false},
		{"ax.bin", true},
		{"dx.bin", false},
		{"1q.dat", true},
		{"12q.dat", false},
		{"trail ", true},
		{"trail", false},
		{"spaces.txt", true},
		{"#hash", true},
		{"!bang", true},
		{"out/keep.txt", true}, // a parent dir is excluded: no re-include
		{"sub/local.txt", true},
		{"sub/x/local.txt", true},
		{"sub/anchored.txt", true},
		{"sub/x/anchored.txt", false},
		{"anchored.txt", false},
		{"sub/deep/f", true},
		{"sub/inner/a.md", true},
		{"sub/inner/README.md", false},
		{"sub/inner/x/b.md", true},
		{"secret.env", true},
		{"sub/secret.env", true},
		{"x.tmp2", false}, // .gitignore beats info/exclude
		{"y.tmp2", true},
		{"v1.txt", true},
		{"va.txt", false},
		{"bn.txt", true},
		{"an.txt", false},
	}
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	writeTree(t, dir, ignoreFixture)
	var stdin bytes.Buffer
	for _, c := range cases {
		writeTree(t, dir, map[string]string{c.path: "x"})
		stdin.WriteString(c.path + "\x00")
	}
	cmd := exec.Command("git", "check-ignore", "--no-index", "--stdin", "-z")
	cmd.Dir, cmd.Stdin = dir, &stdin
	out, err := cmd.Output()
	if err != nil && cmd.ProcessState.ExitCode() != 1 { // 1: nothing ignored
		t.Fatalf("git check-ignore: %v", err)
	}
	byGit := map[string]bool{}
	for _, p := range strings.Split(string(out), "\x00") {
		byGit[p] = p != ""
	}

	m := newIgnoreMatcher([]byte(ignoreFixture[".git/info/exclude"]), func(d string) ([]byte, error) {
		return readRegularFile(filepath.Join(dir, filepath.FromSlash(d), ".gitignore"))
	})
	for _, c := range cases {
		got, err := m.ignored(c.path, false)
		if err != nil {
			t.Fatalf("%q: %v", c.path, err)
		}
		if byGit[c.path] != c.ignored {
			t.Errorf("%q: git says ignored=%v, the table says %v", c.path, byGit[c.path], c.ignored)
		}
		if got != byGit[c.path] {
			t.Errorf("%q: matcher says ignored=%v, git says %v", c.path, got, byGit[c.path])
		}
	}
}

// TestGitignoreWildmatch pins the glob corner cases that the fixture above does not
// reach through whole paths.
func TestGitignoreWildmatch(t *testing.T) {
	cases := []struct {
		pat, text string
		want      bool
	}{
		{"*", "a/b", false},
		{"**", "a/b", true},
		{"a/**", "a/b/c", true},
		{"a/**", "a", false},
		{"**/b", "b", true},
		{"**/b", "a/x/b", true},
		{"a/**/b", "a/b", true},
		{"a**b", "a/b", false}, // "**" not between slashes is a plain "*"
		{"a?c", "a/c", false},
		{"[a-c]", "b", true},
		{"[]]", "]", true},
		{`\*`, "*", true},
		{`\*`, "a", false},
		{"[a-", "a", false},
	}
	for _, c := range cases {
		if got := wildmatch(c.pat, c.text); got != c.want {
			t.Errorf("wildmatch(%q, %q) = %v, want %v", c.pat, c.text, got, c.want)
		}
	}
}

// TestGitignoreDirOnly checks that "dir/" patterns see directories but not files.
func TestGitignoreDirOnly(t *testing.T) {
	m := newIgnoreMatcher(nil, func(d string) ([]byte, error) {
		if d == "" {
			return []byte("tmp/\n"), nil
		}
		return nil, nil
	})
	for p, want := range map[string]bool{"tmp": false, "a/tmp": false, "tmp/x": true, "a/tmp/x": true} {
		if got, _ := m.ignored(p, false); got != want {
			t.Errorf("%s: ignored=%v, want %v", p, got, want)
		}
	}
	if got, _ := m.ignored(path.Join("a", "tmp"), true); !got {
		t.Errorf("a/tmp as a dir: not ignored")
	}
}
