package themes

import (
	"bufio"
	"embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

//go:embed skins/*.theme
var skins embed.FS

// Roles are the semantic names a skin maps to colours; a skin may leave some out and
// gets the dark skin's colour for them.
var Roles = []string{
	"fg", "muted", "title", "border", "border_focus", "selected_fg", "selected_bg", "key",
	"running", "paused", "queued", "done", "failed", "inbox",
	"accepted", "merged", "rejected", "escalated", "empty",
	"gauge", "gauge_over", "warn",
}

// Theme is a named map from semantic role to colour ("#rrggbb" or an ANSI number). A
// NoColor theme has no colours at all: NO_COLOR asked for that.
type Theme struct {
	Name    string
	Colors  map[string]string
	NoColor bool
}

// Color returns the colour of a role, "" when the theme has none (NoColor).
func (t Theme) Color(role string) string {
	if t.NoColor {
		return ""
	}
	return t.Colors[role]
}

// Plain is the theme NO_COLOR gets: structure and emphasis, no colour.
func Plain() Theme { return Theme{Name: "no-color", NoColor: true, Colors: map[string]string{}} }

// Names lists the embedded skins and those in userDir (which may be ""), sorted, with
// "dark" first as the default.
func Names(userDir string) []string {
	seen := map[string]bool{}
	entries, _ := skins.ReadDir("skins")
	for _, e := range entries {
		seen[strings.TrimSuffix(e.Name(), ".theme")] = true
	}
	if userDir != "" {
		files, _ := filepath.Glob(filepath.Join(userDir, "*.theme"))
		for _, f := range files {
			seen[strings.TrimSuffix(filepath.Base(f), ".theme")] = true
		}
	}
	var names []string
	for n := range seen {
		if n != "dark" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return append([]string{"dark"}, names...)
}

// Load returns the named skin: userDir/NAME.theme when it exists (a user's skin
// overrides an embedded one of the same name), else the embedded one. It reads the
// disk, so callers in a UI run it outside their update loop.
func Load(name, userDir string) (Theme, error) {
	base, err := parseEmbedded("dark")
	if err != nil {
		return Theme{}, err
	}
	if name == "" || name == "dark" && userDir == "" {
		return base, nil
	}
	var r io.ReadCloser
	if userDir != "" {
		if f, err := os.Open(filepath.Join(userDir, name+".theme")); err == nil {
			r = f
		}
	}
	if r == nil {
		f, err := skins.Open("skins/" + name + ".theme")
		if err != nil {
			return Theme{}, fmt.Errorf("theme %s: no such skin (have %s)", name, strings.Join(Names(userDir), ", "))
		}
		r = f
	}
	defer r.Close()
	colors, err := parse(name, r)
	if err != nil {
		return Theme{}, err
	}
	for role, c := range base.Colors {
		if _, ok := colors[role]; !ok {
			colors[role] = c
		}
	}
	return Theme{Name: name, Colors: colors}, nil
}

func parseEmbedded(name string) (Theme, error) {
	f, err := skins.Open("skins/" + name + ".theme")
	if err != nil {
		return Theme{}, err
	}
	defer f.Close()
	colors, err := parse(name, f)
	return Theme{Name: name, Colors: colors}, err
}

// parse reads "role = colour" lines; # starts a comment. An unknown role or a
// malformed colour is an error naming the line, so a typo in a user skin is found.
func parse(name string, r io.Reader) (map[string]string, error) {
	known := map[string]bool{}
	for _, role := range Roles {
		known[role] = true
	}
	colors := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if strings.HasPrefix(strings.TrimSpace(sc.Text()), "#") || strings.TrimSpace(line) == "" && !strings.Contains(sc.Text(), "=") {
			continue
		}
		// A colour's own # is not a comment: re-cut on the first "=".
		role, val, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			return nil, fmt.Errorf("theme %s:%d: want role = colour", name, n)
		}
		role = strings.TrimSpace(role)
		val = strings.TrimSpace(val)
		if i := strings.Index(val, " #"); i >= 0 {
			val = strings.TrimSpace(val[:i])
		}
		if !known[role] {
			return nil, fmt.Errorf("theme %s:%d: unknown role %q", name, n, role)
		}
		if !validColor(val) {
			return nil, fmt.Errorf("theme %s:%d: %q is not a colour (#rrggbb or 0-255)", name, n, val)
		}
		colors[role] = val
	}
	return colors, sc.Err()
}

func validColor(s string) bool {
	if strings.HasPrefix(s, "#") {
		if len(s) != 7 {
			return false
		}
		for _, c := range s[1:] {
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
		return true
	}
	var n int
	_, err := fmt.Sscanf(s, "%d", &n)
	return err == nil && n >= 0 && n <= 255 && fmt.Sprint(n) == s
}
