package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestDiffTreesStreamsContent checks files larger than one read buffer that differ
// only in their last byte, and equal ones.
func TestDiffTreesStreamsContent(t *testing.T) {
	base, next := t.TempDir(), t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 10000)
	changed := bytes.Clone(big)
	changed[len(changed)-1] = 'X'
	for dir, files := range map[string]map[string][]byte{
		base: {"same.bin": big, "diff.bin": big, "gone.bin": big},
		next: {"same.bin": big, "diff.bin": changed, "new.bin": big},
	} {
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cs, err := DiffTrees(base, next, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := changeSummary(cs)
	want := []string{"M diff.bin 644", "D gone.bin 644", "A new.bin 644"}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}
