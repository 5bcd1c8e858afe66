package tui

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current views")

// TestGoldenViews pins what a person sees at the smallest and a large terminal, for
// the default focus and each side pane focused on the narrow screen.
func TestGoldenViews(t *testing.T) {
	cases := []struct {
		name string
		w, h int
		keys []string
	}{
		{"80x24-tasks", 80, 24, nil},
		{"80x24-publishes", 80, 24, []string{"tab", "tab"}},
		{"80x24-inbox", 80, 24, []string{"tab", "tab", "tab"}},
		{"80x24-leases", 80, 24, []string{"tab", "tab", "tab", "tab"}},
		{"80x24-budgets", 80, 24, []string{"tab", "tab", "tab", "tab", "tab"}},
		{"80x24-timeline", 80, 24, []string{"tab", "tab", "tab", "tab", "tab", "tab"}},
		{"80x24-help", 80, 24, []string{"?"}},
		{"250x70-all", 250, 70, []string{"j", "j", "j", "j", "j", "j", "j"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, f := newTestModel(t, c.w, c.h)
			press(m, c.keys...)
			if s := m.tasks.selected(); s != nil && s.Session != "" {
				r := f.outputs[s.Session]
				if r != nil {
					data, next := r.Since(0)
					m.Update(outputMsg{session: s.Session, data: data, next: next})
				}
			}
			checkGolden(t, c.name, stripANSI(m.render()))
		})
	}
}

// checkGolden compares a rendered view with testdata/NAME.golden (-update rewrites it).
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		os.WriteFile(path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("view differs from %s (run with -update if the change is meant):\n%s", path, got)
	}
}
