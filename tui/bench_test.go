package tui

import (
	"fmt"
	"sort"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"corral/themes"
)

// BenchmarkFrame100Sessions renders frames of a 250×70 screen while 100 sessions
// stream output and every event batch marks the fleet dirty: each op is one frame
// (a snapshot applied, the shown session's new output, the whole View). The p99 is
// what the issue's ≤10 ms goal is about; the clock caps frames at frameRate a second.
func BenchmarkFrame100Sessions(b *testing.B) {
	th, _ := themes.Load("dark", "")
	f := newFakeFleet()
	snap := f.snap
	snap.Tasks = nil
	for i := range 100 {
		id := fmt.Sprintf("agent-%03d", i)
		sess := id + "-1"
		snap.Tasks = append(snap.Tasks, TaskRow{ID: id, State: "running", Session: sess, Attempt: 1, Base: "7d3fc38",
			CPUPercent: float64(i % 100), Memory: uint64(i) << 20, CPULimit: 0.5, MemLimit: 256 << 20, Since: t0})
		for j := range 60 {
			snap.Usage[sess] = append(snap.Usage[sess], UsagePoint{CPUPercent: float64((i + j) % 100), Memory: uint64(j) << 20})
		}
	}
	m := New(f, Options{Theme: th})
	m.Update(tea.WindowSizeMsg{Width: 250, Height: 70})
	line := []byte("\x1b[32mPASS\x1b[0m ok  example.com/shop/pricing 0.012s\r\n")
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		snap.Tasks[i%100].CPUPercent = float64(i % 97)
		m.Update(snapshotMsg{tag: m.applied + 1, snap: snap})
		m.Update(outputMsg{session: m.session.sessionID, from: m.outFrom, data: line, next: m.outFrom + int64(len(line))})
		_ = m.View()
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms/frame")
	b.ReportMetric(frameRate, "max-frames/s")
}
