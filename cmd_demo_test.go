package main

import (
	"os"
	"strings"
	"testing"
)

// TestDemoHeadless runs the demo's whole story as CI does: ten scripted agents, the
// script playing the human, exit 0, and nothing left mounted.
func TestDemoHeadless(t *testing.T) {
	requireRoot(t)
	code, out, errOut := runMain("demo", "--headless")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"paused slow", "resumed slow", "preview-a answers", "preview-b answers", "was rejected", "the story held"} {
		if !strings.Contains(out, want) {
			t.Errorf("the story lacks %q:\n%s", want, out)
		}
	}
	mounts, _ := os.ReadFile("/proc/mounts")
	if strings.Contains(string(mounts), "corral-demo-") {
		t.Fatalf("the demo left mounts behind:\n%s", mounts)
	}
}
