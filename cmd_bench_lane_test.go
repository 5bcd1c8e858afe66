package main

import (
	"os"
	"strings"
	"testing"
)

// bench lane runs its workload both ways and prints the comparison.
func TestBenchLaneRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the lane runs tests in real sandboxes")
	}
	code, out, errOut := runMain("bench", "lane", "--tasks", "6", "--fail-every", "3", "--test-time", "50ms",
		"--agent-time", "10ms", "--scratch", t.TempDir())
	if code != exitOK || !strings.Contains(out, "batch+bisect") || !strings.Contains(out, "every head") ||
		!strings.Contains(out, "fewer lane runs per publish") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}
