package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCapture runs real operations in a real overlay and checks Capture against the
// hand-written changeset and against DiffTrees of read-only views of the same layers.
func TestCapture(t *testing.T) {
	src := []string{"D src/a.go 644", "D src/b.go 644", "D src/sub/c.go 644", "D src/sub/deep/d.go 644"}
	cases := []struct {
		name    string
		script  string
		exclude []string
		want    []string
	}{
		{"write new file", "echo new > new.txt; mkdir -p nd/sub; echo x > nd/sub/f.txt",
			nil, []string{"A nd/sub/f.txt 644", "A new.txt 644"}},
		{"modify", "echo more >> src/b.go; echo v3 > src/a.go",
			nil, []string{"M src/a.go 644", "M src/b.go 644"}},
		{"delete", "rm keep.txt", nil, []string{"D keep.txt 644"}},
		{"recursive delete", "rm -rf src", nil, src},
		{"file rename", "mv keep.txt kept.txt", nil, []string{"D keep.txt 644", "A kept.txt 644"}},
		{"dir rename", "mv src lib", nil, append([]string{"A lib/a.go 644", "A lib/b.go 644",
			"A lib/sub/c.go 644", "A lib/sub/deep/d.go 644"}, src...)},
		{"nested rename into another dir", "mv src/sub docs/moved", nil, []string{
			"A docs/moved/c.go 644", "A docs/moved/deep/d.go 644", "D src/sub/c.go 644", "D src/sub/deep/d.go 644"}},
		{"rename child then parent", "mv src/sub src/sub2; mv src lib", nil, append([]string{"A lib/a.go 644",
			"A lib/b.go 644", "A lib/sub2/c.go 644", "A lib/sub2/deep/d.go 644"}, src...)},
		{"rename then modify inside", "mv src lib; echo z >> lib/sub/c.go; echo n > lib/new.go", nil,
			append([]string{"A lib/a.go 644", "A lib/b.go 644", "A lib/new.go 644", "A lib/sub/c.go 644",
				"A lib/sub/deep/d.go 644"}, src...)},
		{"rename then delete inside", "mv src lib; rm lib/b.go; rm -rf lib/sub/deep", nil,
			append([]string{"A lib/a.go 644", "A lib/sub/c.go 644"}, src...)},
		{"rename into a new dir", "mkdir n; mv src/sub n/", nil, []string{
			"A n/sub/c.go 644", "A n/sub/deep/d.go 644", "D src/sub/c.go 644", "D src/sub/deep/d.go 644"}},
		{"rename and back", "mv src tmp; mv tmp src", nil, []string{}},
		{"rename then recreate", "mv docs d2; mkdir docs; echo n > docs/guide.md", nil, []string{
			"A d2/api.md 644", "A d2/guide.md 644", "D docs/api.md 644", "M docs/guide.md 644"}},
		{"rename a lower opaque dir", "mv opq o2", nil, []string{"A o2/new.txt 644", "D opq/new.txt 644"}},
		{"dir replaced by dir", "rm -rf docs; mkdir docs; echo n > docs/new.md; echo guide > docs/guide.md",
			nil, []string{"D docs/api.md 644", "A docs/new.md 644"}},
		{"dir replaced by file", "rm -rf docs; echo f > docs", nil,
			[]string{"A docs 644", "D docs/api.md 644", "D docs/guide.md 644"}},
		{"file replaced by dir", "rm keep.txt; mkdir keep.txt; echo x > keep.txt/inner", nil,
			[]string{"D keep.txt 644", "A keep.txt/inner 644"}},
		{"chmod +x", "chmod +x keep.txt; chmod -x run.sh", nil,
			[]string{"M keep.txt 644>755", "M run.sh 755>644"}},
		{"chmod keeping the exec bit", "chmod 600 keep.txt; chmod 700 run.sh", nil, []string{}},
		{"touch and open for write", "touch README.md; : >> keep.txt; chown 1:1 src/b.go; printf 'guide\\n' > docs/guide.md",
			nil, []string{}},
		{"symlinks", "ln -s keep.txt newlink; ln -sfn docs link; rm link2; rm keep.txt; ln -s run.sh keep.txt",
			nil, []string{"M keep.txt 644>l", "M link l", "D link2 l", "A newlink l"}},
		{"same symlink again", "rm link; ln -s README.md link", nil, []string{}},
		{".git excluded", "echo x > .git/newfile; echo y >> .git/info/exclude; rm .git/HEAD", nil, []string{}},
		{"env paths excluded", "echo x >> env/tool.cfg; echo y > env/new.cfg; echo z > tool.lock; echo k > kept",
			[]string{"env", "tool.lock"}, []string{"A kept 644"}},
		{"env dir deleted", "rm -rf env", []string{"env/"}, []string{}},
		{"gitignored", "echo x > app.log; echo k > keep.log; mkdir -p build; echo o > build/out.o; " +
			"echo z >> ignored-tracked.txt; echo s > a.secret; mkdir gen; printf '*\\n' > gen/.gitignore; echo 1 > gen/x",
			nil, []string{"M ignored-tracked.txt 644", "A keep.log 644"}},
		{"gitignore edited in the session", "echo '*.txt' >> .gitignore; echo n > new.txt; echo m > keep.txt", nil,
			[]string{"M .gitignore 644", "M keep.txt 644"}},
		{"second layer paths", "rm l2only.txt; rm -rf l2dir; echo back > gone.txt; echo z > opq/old1.txt; rm docs/api.md",
			nil, []string{"D docs/api.md 644", "A gone.txt 644", "D l2dir/x.txt 644", "D l2only.txt 644", "A opq/old1.txt 644"}},
		{"rename a dir merged from both layers", "mv docs d2", nil, []string{
			"A d2/api.md 644", "A d2/guide.md 644", "D docs/api.md 644", "D docs/guide.md 644"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newOverlayFixture(t, captureBase, captureSecond)
			f.session(c.script)
			got, err := Capture(CaptureOptions{Upper: f.upper, Lowers: f.lowers, Exclude: c.exclude})
			if err != nil {
				t.Fatal(err)
			}
			base, next := f.views()
			ref, err := DiffTrees(base, next, c.exclude)
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(c.want)
			slices.SortFunc(want, func(a, b string) int { return cmpSummaryPath(a[2:], b[2:]) })
			if g := changeSummary(got); !slices.Equal(g, want) {
				t.Errorf("Capture:\n got %q\nwant %q", g, want)
			}
			if g, r := changeSummary(got), changeSummary(ref); !slices.Equal(g, r) {
				t.Errorf("Capture and DiffTrees differ:\n   capture %q\n difftrees %q", g, r)
			}
			checkSources(t, got, next)
		})
	}
}

// cmpSummaryPath orders changeSummary lines by their path, as a Changeset is ordered.
func cmpSummaryPath(a, b string) int {
	for i := range a {
		if a[i] == ' ' {
			a = a[:i]
			break
		}
	}
	for i := range b {
		if b[i] == ' ' {
			b = b[:i]
			break
		}
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestCaptureNoUpper checks the error names what is missing.
func TestCaptureNoUpper(t *testing.T) {
	if _, err := Capture(CaptureOptions{}); err == nil {
		t.Fatal("Capture without an upper dir: no error")
	}
	if _, err := Capture(CaptureOptions{Upper: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Fatal("Capture of a missing upper dir: no error")
	}
}

// BenchmarkCapture500 prices Capture against DiffTrees, the full walk a user would
// otherwise pay, on 500 changed files in a tree of 4000, side by side in one run.
func BenchmarkCapture500(b *testing.B) {
	base := map[string]string{}
	for d := 0; d < 40; d++ {
		for i := 0; i < 100; i++ {
			base[fmt.Sprintf("pkg%02d/file%03d.go", d, i)] = fmt.Sprintf("package pkg%02d // %d\n%s", d, i, benchFiller)
		}
	}
	f := newOverlayFixture(b, base, map[string]string{})
	mountTestOverlay(b, f.merged, f.lowers, f.upper, f.work)
	for n := 0; n < 500; n++ {
		p := filepath.Join(f.merged, fmt.Sprintf("pkg%02d/file%03d.go", n%40, n/40*7%100))
		if err := os.WriteFile(p, []byte(fmt.Sprintf("changed %d\n", n)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := unix.Unmount(f.merged, 0); err != nil {
		b.Fatal(err)
	}
	baseView, next := f.views()
	var perOp [2]float64
	b.Run("Capture", func(b *testing.B) {
		for b.Loop() {
			cs, err := Capture(CaptureOptions{Upper: f.upper, Lowers: f.lowers})
			if err != nil || len(cs) == 0 {
				b.Fatal(len(cs), err)
			}
		}
		perOp[0] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("DiffTrees", func(b *testing.B) {
		for b.Loop() {
			cs, err := DiffTrees(baseView, next, nil)
			if err != nil || len(cs) == 0 {
				b.Fatal(len(cs), err)
			}
		}
		perOp[1] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	if perOp[0] > 0 {
		b.Logf("Capture %.2f ms, DiffTrees %.2f ms: %.0fx faster", perOp[0]/1e6, perOp[1]/1e6, perOp[1]/perOp[0])
	}
}

const benchFiller = "// Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.\n"
