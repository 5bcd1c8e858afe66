package supervisor

// The lane's decisions, kept free of sandboxes and stores so they can be tested with
// an oracle and reused by the benchmark's simulation: how a result with re-runs is
// judged, and how a red batch is bisected down to the publish that turned it red.

// LaneError is the outcome of a run the lane could not carry out (the sandbox did not
// start): it says nothing about the commit, so it blames no one and narrows nothing.
const LaneError = "error"

// judgeRuns runs a test once and, while it fails, up to reruns more times. A failure
// that later passes is flaky — reported, never blamed; only a test that failed every
// time is red. run returns ok=false for a failure and err for a run that did not happen.
func judgeRuns(reruns int, run func() (ok bool, err error)) (outcome string, runs int, err error) {
	failed := false
	for runs < reruns+1 {
		ok, err := run()
		runs++
		if err != nil {
			return LaneError, runs, err
		}
		switch {
		case ok && failed:
			return LaneFlaky, runs, nil
		case ok:
			return LaneGreen, runs, nil
		}
		failed = true
	}
	return LaneRed, runs, nil
}

// laneHead is one publish's commit on the head, in the order they landed.
type laneHead struct {
	Publish int64
	Commit  string
}

// bisection finds the first red head of a batch whose newest head is red and whose
// predecessor (the head before heads[0], verified green) is green: each probe halves
// the range between the newest known-green and the oldest known-red head, so a batch
// of n costs about log2(n) extra runs instead of n.
type bisection struct {
	heads []laneHead
	lo    int // newest head known green; -1: the verified head before the batch
	hi    int // oldest head known red
}

func newBisection(heads []laneHead) *bisection {
	return &bisection{heads: heads, lo: -1, hi: len(heads) - 1}
}

// next returns the index of the head to test, or done when the culprit is known.
func (b *bisection) next() (i int, done bool) {
	if b.hi-b.lo <= 1 {
		return b.hi, true
	}
	return b.lo + (b.hi-b.lo)/2, false
}

// record takes a probe's result; a flaky head counts as green (it passed once).
func (b *bisection) record(i int, red bool) {
	switch {
	case i <= b.lo || i >= b.hi:
		// Outside the open range: nothing to learn (a late or repeated result).
	case red:
		b.hi = i
	default:
		b.lo = i
	}
}

// culprit is the first red head: the publish that turned the head red.
func (b *bisection) culprit() laneHead { return b.heads[b.hi] }
