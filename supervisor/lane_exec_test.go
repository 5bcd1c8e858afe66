package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The lane keeps its newest recordings and nothing else goes.
func TestPruneOldestKeepsNewest(t *testing.T) {
	dir := t.TempDir()
	base := time.Now().Add(-time.Hour)
	for i := 0; i < 5; i++ {
		p := filepath.Join(dir, fmt.Sprintf("r%d.cast", i))
		os.WriteFile(p, nil, 0o644)
		os.Chtimes(p, base.Add(time.Duration(i)*time.Minute), base.Add(time.Duration(i)*time.Minute))
	}
	os.WriteFile(filepath.Join(dir, "other.out"), nil, 0o644)
	pruneOldest(filepath.Join(dir, "*.cast"), 2)
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	var names []string
	for _, p := range left {
		names = append(names, filepath.Base(p))
	}
	if fmt.Sprint(names) != "[other.out r3.cast r4.cast]" {
		t.Errorf("left %v, want the two newest recordings and the other file", names)
	}
}
