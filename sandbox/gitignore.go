package sandbox

import (
	"path"
	"strings"
)

// ignorePattern is one line of a .gitignore or info/exclude file, as gitignore(5)
// (git 2.39) reads it.
type ignorePattern struct {
	glob     string // wildmatch pattern, without "!", leading "/" or trailing "/"
	negate   bool   // "!pat": re-include what an earlier pattern ignored
	dirOnly  bool   // "pat/": matches directories only
	basename bool   // no "/" inside: matches the last element at any depth
}

// parseIgnore reads the patterns of one ignore file, in file order.
func parseIgnore(data []byte) []ignorePattern {
	var out []ignorePattern
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		line = trimTrailingSpaces(line)
		if line == "" || line[0] == '#' {
			continue
		}
		var p ignorePattern
		if line[0] == '!' {
			p.negate, line = true, line[1:]
		}
		if strings.HasSuffix(line, "/") {
			p.dirOnly, line = true, strings.TrimSuffix(line, "/")
		}
		// A slash at the start or in the middle anchors the pattern to the ignore
		// file's directory; otherwise it matches a name at any depth below it.
		p.basename = !strings.Contains(line, "/")
		line = strings.TrimPrefix(line, "/")
		if line == "" {
			continue
		}
		p.glob = line
		out = append(out, p)
	}
	return out
}

// trimTrailingSpaces drops trailing spaces unless the last one is backslash-escaped.
func trimTrailingSpaces(s string) string {
	for strings.HasSuffix(s, " ") {
		t := s[:len(s)-1]
		if strings.HasSuffix(t, "\\") && !strings.HasSuffix(t, "\\\\") {
			return t[:len(t)-1] + " "
		}
		s = t
	}
	return s
}

// matches reports whether the pattern matches rel, a path relative to the directory
// of the ignore file that holds the pattern.
func (p ignorePattern) matches(rel string, isDir bool) bool {
	if p.dirOnly && !isDir {
		return false
	}
	if p.basename {
		return wildmatch(p.glob, path.Base(rel))
	}
	return wildmatch(p.glob, rel)
}

// ignoreMatcher decides which untracked paths git would not show. It reads one
// .gitignore per directory, lazily, and only for directories that are not themselves
// ignored: git never reads below an ignored directory, so nothing there can be
// re-included.
type ignoreMatcher struct {
	read    func(dir string) ([]byte, error) // dir/.gitignore of the new tree; nil when none
	exclude []ignorePattern                  // .git/info/exclude: lowest precedence
	dirs    map[string]*ignoreDir
}

type ignoreDir struct {
	patterns []ignorePattern
	ignored  bool
}

func newIgnoreMatcher(exclude []byte, read func(dir string) ([]byte, error)) *ignoreMatcher {
	return &ignoreMatcher{read: read, exclude: parseIgnore(exclude), dirs: map[string]*ignoreDir{}}
}

// ignored reports whether git would ignore the untracked path p (slash-separated,
// relative to the workspace root).
func (m *ignoreMatcher) ignored(p string, isDir bool) (bool, error) {
	parent := parentDir(p)
	st, err := m.dir(parent)
	if err != nil {
		return false, err
	}
	return st.ignored || m.match(p, isDir, parent), nil
}

// dir returns the state of directory d ("" is the root), loading its parents first.
func (m *ignoreMatcher) dir(d string) (*ignoreDir, error) {
	if st, ok := m.dirs[d]; ok {
		return st, nil
	}
	st := &ignoreDir{}
	if d != "" {
		parent, err := m.dir(parentDir(d))
		if err != nil {
			return nil, err
		}
		st.ignored = parent.ignored || m.match(d, true, parentDir(d))
	}
	if !st.ignored {
		data, err := m.read(d)
		if err != nil {
			return nil, err
		}
		st.patterns = parseIgnore(data)
	}
	m.dirs[d] = st
	return st, nil
}

// match applies the patterns that govern p, from the most specific (the .gitignore of
// p's own directory, last line first) to info/exclude: the first hit decides.
func (m *ignoreMatcher) match(p string, isDir bool, dir string) bool {
	for d := dir; ; d = parentDir(d) {
		rel := p
		if d != "" {
			rel = p[len(d)+1:]
		}
		if hit, neg := lastMatch(m.dirs[d].patterns, rel, isDir); hit {
			return !neg
		}
		if d == "" {
			break
		}
	}
	hit, neg := lastMatch(m.exclude, p, isDir)
	return hit && !neg
}

func lastMatch(ps []ignorePattern, rel string, isDir bool) (hit, negate bool) {
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].matches(rel, isDir) {
			return true, ps[i].negate
		}
	}
	return false, false
}

// parentDir is path.Dir with "" for the root.
func parentDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// wildmatch matches text against a git wildmatch pattern with WM_PATHNAME: "*", "?"
// and classes never match "/", while "**" between slashes (or at an end) matches any
// number of directories, including none for "**/". It follows git's wildmatch.c.
func wildmatch(pat, text string) bool { return wildmatchAt(pat, 0, text) }

// wildmatchAt matches text against pat[pi:]; the whole pattern stays in view so that
// a "**" can tell whether it starts a path segment.
func wildmatchAt(pat string, pi int, text string) bool {
	for pi < len(pat) {
		c := pat[pi]
		if c != '*' && len(text) == 0 {
			return false
		}
		switch c {
		case '\\':
			if pi+1 >= len(pat) || text[0] != pat[pi+1] {
				return false
			}
			pi, text = pi+2, text[1:]
		case '?':
			if text[0] == '/' {
				return false
			}
			pi, text = pi+1, text[1:]
		case '[':
			ok, next := matchClass(pat, pi, text[0])
			if !ok || text[0] == '/' {
				return false
			}
			pi, text = next, text[1:]
		case '*':
			return matchStar(pat, pi, text)
		default:
			if text[0] != c {
				return false
			}
			pi, text = pi+1, text[1:]
		}
	}
	return len(text) == 0
}

// matchStar matches text against pat[pi:], which starts with a run of stars.
func matchStar(pat string, pi int, text string) bool {
	start := pi
	for pi < len(pat) && pat[pi] == '*' {
		pi++
	}
	matchSlash := false
	if pi-start >= 2 && (start == 0 || pat[start-1] == '/') && (pi == len(pat) || pat[pi] == '/') {
		if pi < len(pat) && wildmatchAt(pat, pi+1, text) {
			return true // "**/" matching zero directories
		}
		matchSlash = true
	}
	if pi == len(pat) {
		return matchSlash || !strings.Contains(text, "/")
	}
	for i := 0; i <= len(text); i++ {
		if wildmatchAt(pat, pi, text[i:]) {
			return true
		}
		if i < len(text) && text[i] == '/' && !matchSlash {
			return false
		}
	}
	return false
}

// matchClass matches c against the bracket expression at pat[pi] ("[a-z]", "[!x]",
// "[^x]", "[]x]", "[[:alpha:]]", backslash escapes). It returns whether c matched and
// the index after the closing "]"; an unterminated class matches nothing, as in git.
func matchClass(pat string, pi int, c byte) (bool, int) {
	i := pi + 1
	negate := false
	if i < len(pat) && (pat[i] == '!' || pat[i] == '^') {
		negate, i = true, i+1
	}
	matched := false
	first := true
	for ; i < len(pat); i++ {
		ch := pat[i]
		if ch == ']' && !first {
			return matched != negate, i + 1
		}
		first = false
		if ch == '[' && i+1 < len(pat) && pat[i+1] == ':' {
			if end := strings.Index(pat[i+2:], ":]"); end >= 0 {
				if posixClass(pat[i+2:i+2+end], c) {
					matched = true
				}
				i += 2 + end + 1
				continue
			}
		}
		if ch == '\\' && i+1 < len(pat) {
			i++
			ch = pat[i]
		}
		if i+2 < len(pat) && pat[i+1] == '-' && pat[i+2] != ']' {
			hi := pat[i+2]
			if hi == '\\' && i+3 < len(pat) {
				hi, i = pat[i+3], i+1
			}
			if ch <= c && c <= hi {
				matched = true
			}
			i += 2
			continue
		}
		if ch == c {
			matched = true
		}
	}
	return false, len(pat)
}

func posixClass(name string, c byte) bool {
	switch name {
	case "alnum":
		return isAlpha(c) || isDigit(c)
	case "alpha":
		return isAlpha(c)
	case "digit":
		return isDigit(c)
	case "lower":
		return 'a' <= c && c <= 'z'
	case "upper":
		return 'A' <= c && c <= 'Z'
	case "space":
		return c == ' ' || ('\t' <= c && c <= '\r')
	case "punct":
		return c > ' ' && c < 0x7f && !isAlpha(c) && !isDigit(c)
	case "xdigit":
		return isDigit(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
	}
	return false
}

func isAlpha(c byte) bool { return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
