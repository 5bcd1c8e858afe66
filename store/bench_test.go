package store

import (
	"runtime"
	"testing"
	"time"

	"corral/supervisor"
)

// BenchmarkEventsPerSecond appends 10 events per Update from 8 goroutines, the shape of
// a busy fleet: group commit folds concurrent Updates into shared transactions.
func BenchmarkEventsPerSecond(b *testing.B) {
	benchEvents(b, 8, 10)
}

// BenchmarkSingleEventUpdate is the unbatched worst case: one goroutine, one event per
// Update, so every Update pays for its own commit.
func BenchmarkSingleEventUpdate(b *testing.B) {
	benchEvents(b, 1, 1)
}

func benchEvents(b *testing.B, goroutines, perUpdate int) {
	db := openTest(b)
	data := []byte(`{"path":"cart/a.go","class":"content"}`)
	fn := func(tx supervisor.Tx) error {
		for range perUpdate {
			tx.Emit(supervisor.Event{Kind: supervisor.EvPublishRejected, Task: "checkout", Session: "checkout-2", Data: data})
		}
		return nil
	}
	groups, updates := db.groups.Load(), db.updates.Load()
	b.ResetTimer()
	start := time.Now()
	if goroutines == 1 {
		for range b.N {
			if _, err := db.Update(fn); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		// RunParallel starts parallelism × GOMAXPROCS goroutines.
		b.SetParallelism((goroutines + gomaxprocs() - 1) / gomaxprocs())
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := db.Update(fn); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*perUpdate)/elapsed.Seconds(), "events/s")
	if g := db.groups.Load() - groups; g > 0 {
		b.ReportMetric(float64(db.updates.Load()-updates)/float64(g), "updates/commit")
	}
}

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
