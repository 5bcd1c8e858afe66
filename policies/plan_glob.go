package policies

import (
	"fmt"
	"path"
	"strings"
)

// ValidIntent reports why glob cannot be an intent (see MatchGlob for how intents
// match), or nil. A malformed glob would silently match nothing at run time, so a
// plan check rejects it up front.
func ValidIntent(glob string) error {
	if strings.TrimSpace(glob) == "" {
		return fmt.Errorf("glob %q: empty", glob)
	}
	for _, seg := range strings.Split(glob, "/") {
		if seg == ".." {
			return fmt.Errorf("glob %q: must stay inside the repo (no ..)", glob)
		}
		// path.Match reports a malformed pattern only when matching reaches the bad
		// part, so match against a name that makes it scan the whole segment.
		if _, err := path.Match(seg, strings.Repeat("x", len(seg)+1)); err != nil {
			return fmt.Errorf("glob %q: bad pattern %q (unclosed [ or trailing \\)", glob, seg)
		}
	}
	return nil
}
