package supervisor

import (
	"errors"
	"fmt"
	"testing"
)

func batchOf(n int) []laneHead {
	hs := make([]laneHead, n)
	for i := range hs {
		hs[i] = laneHead{Publish: int64(i + 1), Commit: fmt.Sprintf("c%d", i+1)}
	}
	return hs
}

// Every position of the first bad publish in batches of 2 to 33 is found, with no
// more probes than ceil(log2(n)), and only heads inside the batch are probed.
func TestBisectionFindsFirstRed(t *testing.T) {
	for n := 2; n <= 33; n++ {
		limit := 0
		for 1<<limit < n {
			limit++
		}
		for bad := 1; bad <= n; bad++ {
			b := newBisection(batchOf(n))
			probes := 0
			for {
				i, done := b.next()
				if done {
					break
				}
				if i < 0 || i >= n-1 {
					t.Fatalf("n=%d bad=%d: probed index %d (the newest is known red)", n, bad, i)
				}
				probes++
				b.record(i, i+1 >= bad) // publishes from #bad on are red
			}
			if got := b.culprit().Publish; got != int64(bad) {
				t.Errorf("n=%d: culprit #%d, want #%d", n, got, bad)
			}
			if probes > limit {
				t.Errorf("n=%d bad=%d: %d probes, want at most %d", n, bad, probes, limit)
			}
		}
	}
}

// The example: 8 publishes, #5 breaks the suite.
func TestBisectionBatchOfEight(t *testing.T) {
	b := newBisection(batchOf(8))
	var probed []int64
	for {
		i, done := b.next()
		if done {
			break
		}
		probed = append(probed, b.heads[i].Publish)
		b.record(i, b.heads[i].Publish >= 5)
	}
	if c := b.culprit(); c.Publish != 5 || c.Commit != "c5" {
		t.Fatalf("culprit %+v, want publish 5", c)
	}
	if fmt.Sprint(probed) != "[4 6 5]" {
		t.Errorf("probed %v, want [4 6 5]", probed)
	}
}

// A single-publish batch needs no probe; stale results outside the range are ignored.
func TestBisectionEdges(t *testing.T) {
	b := newBisection(batchOf(1))
	if i, done := b.next(); !done || i != 0 {
		t.Fatalf("batch of one: next = %d, %v", i, done)
	}
	b = newBisection(batchOf(4))
	b.record(3, false) // the newest is red by construction; a contrary result is stale
	b.record(-1, true)
	if b.lo != -1 || b.hi != 3 {
		t.Fatalf("range moved on stale results: lo=%d hi=%d", b.lo, b.hi)
	}
}

func TestJudgeRuns(t *testing.T) {
	seq := func(results ...bool) func() (bool, error) {
		i := 0
		return func() (bool, error) { r := results[i]; i++; return r, nil }
	}
	for _, c := range []struct {
		name    string
		reruns  int
		results []bool
		want    string
		runs    int
	}{
		{"green first time", 1, []bool{true}, LaneGreen, 1},
		{"red twice", 1, []bool{false, false}, LaneRed, 2},
		{"flips", 1, []bool{false, true}, LaneFlaky, 2},
		{"no reruns", 0, []bool{false}, LaneRed, 1},
		{"flips on the third", 2, []bool{false, false, true}, LaneFlaky, 3},
		{"red three times", 2, []bool{false, false, false}, LaneRed, 3},
	} {
		got, runs, err := judgeRuns(c.reruns, seq(c.results...))
		if got != c.want || runs != c.runs || err != nil {
			t.Errorf("%s: %s after %d runs (%v), want %s after %d", c.name, got, runs, err, c.want, c.runs)
		}
	}
	boom := errors.New("no sandbox")
	if got, runs, err := judgeRuns(1, func() (bool, error) { return false, boom }); got != LaneError || runs != 1 || !errors.Is(err, boom) {
		t.Errorf("infrastructure failure: %s after %d runs (%v), want error after 1", got, runs, err)
	}
}
