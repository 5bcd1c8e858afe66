package supervisor

import (
	"testing"
	"time"
)

// SlowLoop makes the loop take d before each look at the gateway's news, as a loop
// busy with other work would (a publish, a rebase's merges), until the test ends.
// Call it before the supervisor runs.
func SlowLoop(t testing.TB, d time.Duration) {
	testHookDrain = func() { time.Sleep(d) }
	t.Cleanup(func() { testHookDrain = nil })
}

// AdvanceHead applies a publish outcome's head move as the loop does.
func (s *Supervisor) AdvanceHead(res PublishResult) {
	s.call(func() { s.advanceHead(res) })
}
