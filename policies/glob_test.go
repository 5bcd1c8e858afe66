package policies

import "testing"

func TestMatchGlob(t *testing.T) {
	cases := []struct {
		glob, path string
		want       bool
	}{
		{"pricing/**", "pricing/a.go", true},
		{"pricing/**", "pricing/x/y.go", true},
		{"pricing/**", "pricing", false},
		{"pricing/**", "other/pricing/a.go", false},
		{"**/*.go", "a.go", true},
		{"**/*.go", "x/y/a.go", true},
		{"*.md", "docs/readme.md", true},
		{"*.md", "readme.md", true},
		{"docs/*.md", "docs/a/b.md", false},
		{"docs/**/index.md", "docs/index.md", true},
		{"docs/**/index.md", "docs/a/b/index.md", true},
		{"/src/main.go", "src/main.go", true},
		{"src/[ab].go", "src/c.go", false},
	}
	for _, c := range cases {
		if got := MatchGlob(c.glob, c.path); got != c.want {
			t.Errorf("MatchGlob(%q, %q) = %v, want %v", c.glob, c.path, got, c.want)
		}
	}
}
