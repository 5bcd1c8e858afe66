package policies

import (
	"path"
	"strings"
)

// MatchGlob reports whether a slash-separated repository path matches an intent glob.
// Globs are path.Match patterns per segment, plus "**" for any number of segments
// ("pricing/**", "**/*.go", "docs/**/index.md"); a glob without a slash and without
// "**" matches at any depth, like a .gitignore name ("*.md").
func MatchGlob(glob, p string) bool {
	glob = strings.TrimPrefix(glob, "/")
	if !strings.Contains(glob, "/") && !strings.Contains(glob, "**") {
		glob = "**/" + glob
	}
	return matchSegments(strings.Split(glob, "/"), strings.Split(p, "/"))
}

func matchSegments(g, p []string) bool {
	for len(g) > 0 {
		if g[0] == "**" {
			// "**" swallows zero or more segments; a trailing one needs at least one.
			if len(g) == 1 {
				return len(p) > 0
			}
			for i := 0; i <= len(p); i++ {
				if matchSegments(g[1:], p[i:]) {
					return true
				}
			}
			return false
		}
		if len(p) == 0 {
			return false
		}
		if ok, err := path.Match(g[0], p[0]); err != nil || !ok {
			return false
		}
		g, p = g[1:], p[1:]
	}
	return len(p) == 0
}
