package supervisor

import (
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"corral/policies"
	"corral/sandbox"
	"corral/supervisor/gateway"
)

// Spend is what model calls cost: a session's, a task's over its attempts, or the
// fleet's.
type Spend struct {
	Calls      int     `json:"calls"`
	Input      int64   `json:"input"`
	Output     int64   `json:"output"`
	CacheRead  int64   `json:"cache_read"`
	CacheWrite int64   `json:"cache_write"`
	Cost       float64 `json:"cost"`
}

// Tokens is the total over every category.
func (s Spend) Tokens() int64 { return s.Input + s.Output + s.CacheRead + s.CacheWrite }

func (s *Spend) add(c ModelCall) {
	s.Calls++
	s.Input += c.Input
	s.Output += c.Output
	s.CacheRead += c.CacheRead
	s.CacheWrite += c.CacheWrite
	s.Cost += c.Cost
}

// gatewayInbox carries the gateway's news to the loop without making a model call
// wait on it: the gateway appends and kicks, the loop drains.
type gatewayInbox struct {
	mu      sync.Mutex
	calls   []gateway.Call
	refused [][2]string // session, host
	samples []probeSample
	trip    quotaTrip
	tripped bool // a call since the last drain crossed the hard threshold: all are held
}

// quotaTrip is what the gateway's goroutines know of the quota: how much of the window
// is left below its hard threshold, as of the loop's last look less the calls since.
// The call that crosses it holds every session's next request at once; the loop then
// pauses the sessions one by one, lowest priority first, and lifts that fleet-wide
// hold. Without it, requests made before the loop had looked would have gone out
// past the threshold.
type quotaTrip struct {
	armed     bool
	metric    string
	remaining float64   // tokens or cost
	hard      float64   // for utilisation
	reset     time.Time // the end of the window these figures are for
}

// crossedBy counts a call and reports whether it reaches the hard threshold.
func (t *quotaTrip) crossedBy(c gateway.Call, prices map[string]policies.Price) bool {
	if !t.armed || (!t.reset.IsZero() && !c.Start.Before(t.reset)) {
		return false // a new window: the loop decides
	}
	switch t.metric {
	case policies.QuotaTokens:
		t.remaining -= float64(c.Tokens())
	case policies.QuotaCost:
		price, _ := policies.PriceFor(prices, c.Model)
		t.remaining -= price.Cost(c.Input, c.Output, c.CacheRead, c.CacheWrite)
	case policies.QuotaUtilization:
		return c.Limits.Utilization >= t.hard
	}
	return t.remaining <= 0
}

// rearmQuotaTrip sets the trip from the quota as the loop now sees it, counting the
// calls reported since the drain, and lifts the fleet-wide hold unless one of those
// calls crossed the threshold (the next drain acts on it). It runs on the loop after
// the quota is checked.
func (s *Supervisor) rearmQuotaTrip() {
	in := &s.gwInbox
	in.mu.Lock()
	defer in.mu.Unlock()
	in.trip = quotaTrip{}
	if q := s.quota; q != nil && !q.onFallback && q.level != policies.QuotaHard {
		in.trip = quotaTrip{armed: true, metric: q.q.Metric, hard: q.q.Hard, reset: q.reset,
			remaining: q.q.Hard*q.q.Limit - q.used}
		for _, c := range in.calls {
			in.tripped = in.trip.crossedBy(c, s.cfg.Gateway.Prices) || in.tripped
		}
	}
	if in.tripped {
		s.gw.HoldAll()
		return
	}
	s.gw.ReleaseAll()
}

// openGateway starts the model gateway the plan's [gateway] describes, with the
// upstreams' keys read from the host environment now.
func (s *Supervisor) openGateway() error {
	p := s.cfg.Gateway
	if p == nil {
		return nil
	}
	var ups []gateway.Upstream
	for _, u := range p.Upstreams {
		ups = append(ups, gateway.Upstream{Kind: u.Kind, URL: u.URL, Key: envKey(u.KeyEnv)})
	}
	gw, err := gateway.New(gateway.Config{
		Upstreams: ups, Allow: p.Allow, Transport: s.cfg.GatewayTransport, Now: s.now,
		OnCall: func(c gateway.Call) {
			in := &s.gwInbox
			in.mu.Lock()
			in.calls = append(in.calls, c)
			if in.trip.crossedBy(c, p.Prices) {
				in.tripped = true
				s.gw.HoldAll() // before this call's answer has reached its session
			}
			in.mu.Unlock()
			s.kick()
		},
		OnRefused: func(session, host string) {
			s.gwInbox.mu.Lock()
			s.gwInbox.refused = append(s.gwInbox.refused, [2]string{session, host})
			s.gwInbox.mu.Unlock()
			s.kick()
		},
	})
	if err != nil {
		return fmt.Errorf("supervisor: %w", err)
	}
	s.gw = gw
	if p.Quota != nil {
		s.quota = newQuotaState(*p.Quota)
	}
	return s.loadSpend()
}

func envKey(name string) string {
	if name == "" {
		return ""
	}
	return os.Getenv(name)
}

// gatewayService is how a session reaches the gateway: a listener of its own, inside
// its netns (or on the host's loopback in host networking), served by the gateway
// under the session's id.
func (s *Supervisor) gatewayService(session string) []sandbox.Service {
	if s.gw == nil {
		return nil
	}
	return []sandbox.Service{{
		Name:  "gateway",
		Serve: func(ln net.Listener) { s.gw.Serve(session, ln) },
		Env:   s.gw.Env,
	}}
}

// loadSpend rebuilds spend and the quota window from the calls already recorded, so a
// restarted supervisor counts what the fleet spent before it.
func (s *Supervisor) loadSpend() error {
	var calls []ModelCall
	if err := s.store.View(func(r Reader) error {
		var err error
		calls, err = r.ModelCalls("")
		return err
	}); err != nil {
		return fmt.Errorf("supervisor: load model calls: %w", err)
	}
	for _, c := range calls {
		s.account(c)
	}
	return nil
}

// account adds a call to the spend of its session, task and fleet, and to the quota.
func (s *Supervisor) account(c ModelCall) {
	ss := s.spendSession[c.Session]
	ss.add(c)
	s.spendSession[c.Session] = ss
	ts := s.spendTask[c.Task]
	ts.add(c)
	s.spendTask[c.Task] = ts
	s.spendFleet.add(c)
	if s.quota != nil {
		s.quota.add(c, s.now())
	}
}

// testHookDrain, when a test sets it, runs before each drain: a loop busy elsewhere.
var testHookDrain func()

// drainGateway records what the gateway reported since the last step, then applies
// the budget and quota rules. It runs on the loop.
func (s *Supervisor) drainGateway() {
	if s.gw == nil {
		return
	}
	if testHookDrain != nil {
		testHookDrain()
	}
	s.gwInbox.mu.Lock()
	calls, refused, samples := s.gwInbox.calls, s.gwInbox.refused, s.gwInbox.samples
	s.gwInbox.calls, s.gwInbox.refused, s.gwInbox.samples = nil, nil, nil
	s.gwInbox.tripped = false // the calls taken include the one that tripped
	s.gwInbox.mu.Unlock()
	for _, r := range refused {
		s.commit(func(tx Tx) error {
			tx.Emit(Event{Kind: EvEgressRefused, Task: s.sessionTask[r[0]], Session: r[0], Data: jsonData(map[string]string{
				"host": r[1], "reason": r[1] + " is not in gateway.allow"})})
			return nil
		})
	}
	for _, p := range samples {
		s.onProbeSample(p)
	}
	if len(calls) > 0 {
		s.recordCalls(calls)
	}
	s.checkQuota()
	s.rearmQuotaTrip()
}

// recordCalls prices and stores metered calls with their model.call events, and
// pauses any task they took over its budget.
func (s *Supervisor) recordCalls(calls []gateway.Call) {
	recs := make([]ModelCall, 0, len(calls))
	for _, c := range calls {
		price, _ := policies.PriceFor(s.cfg.Gateway.Prices, c.Model)
		mc := ModelCall{Session: c.Session, Task: s.sessionTask[c.Session], Time: c.Start, Upstream: c.Upstream,
			Model: c.Model, Status: c.Status, Streamed: c.Streamed, Input: c.Input, Output: c.Output,
			CacheRead: c.CacheRead, CacheWrite: c.CacheWrite, Latency: c.Latency,
			Cost:      price.Cost(c.Input, c.Output, c.CacheRead, c.CacheWrite),
			Remaining: c.Limits.TokensRemaining, Reset: c.Limits.Reset, Utilization: c.Limits.Utilization, Limits: c.Limits.Raw}
		recs = append(recs, mc)
		s.account(mc)
	}
	_, err := s.commit(func(tx Tx) error {
		for _, mc := range recs {
			tx.Emit(Event{Kind: EvModelCall, Task: mc.Task, Session: mc.Session, Data: jsonData(map[string]any{
				"model": mc.Model, "upstream": mc.Upstream, "status": mc.Status, "streamed": mc.Streamed,
				"input": mc.Input, "output": mc.Output, "cache_read": mc.CacheRead, "cache_write": mc.CacheWrite,
				"cost": mc.Cost, "latency_ms": float64(mc.Latency.Microseconds()) / 1000})})
		}
		return tx.AddModelCalls(recs...)
	})
	if err != nil {
		s.log.Error("record model calls", "err", err)
	}
	for _, mc := range recs {
		s.checkBudget(mc.Task)
	}
}

// checkBudget pauses a task's live session once its spend is over the task's budget
// and sends the task to the inbox, unless the user resumed it past its budget.
func (s *Supervisor) checkBudget(task string) {
	t := s.tasks[task]
	if t == nil {
		return
	}
	sp := s.spendTask[task]
	over, why := policies.Budget{Tokens: t.BudgetTokens, Cost: t.BudgetCost}.Exceeded(sp.Tokens(), sp.Cost)
	ls := s.liveOf(task)
	if !over || ls == nil || ls.budgetWaived || ls.rec.State != SessionRunning {
		return
	}
	reason := "over budget: " + why
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvBudgetExceeded, Task: task, Session: ls.rec.ID, Data: jsonData(map[string]any{
			"reason": reason, "tokens": sp.Tokens(), "cost": sp.Cost, "budget_tokens": t.BudgetTokens, "budget_cost": t.BudgetCost})})
		return nil
	})
	s.pauseFor(ls, TaskInbox, reason)
}

// pauseFor holds the session's next model request at the gateway and freezes it,
// recording why; its layer and processes stay as they are.
func (s *Supervisor) pauseFor(ls *liveSession, ts TaskState, reason string) error {
	t := s.tasks[ls.rec.Task]
	s.gw.Hold(ls.rec.ID)
	if err := ls.sb.Freeze(); err != nil {
		s.gw.Release(ls.rec.ID)
		s.log.Error("pause", "session", ls.rec.ID, "err", err)
		return err
	}
	ls.rec.State, t.State, t.Reason, t.Updated = SessionPaused, ts, reason, s.now()
	_, err := s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvSessionPaused, Task: t.ID, Session: ls.rec.ID, Data: jsonData(map[string]string{"reason": reason})})
		if err := tx.PutSession(ls.rec); err != nil {
			return err
		}
		return tx.PutTask(*t)
	})
	return err
}

// resumeFor thaws a session paused by pauseFor and lets its held requests go.
func (s *Supervisor) resumeFor(ls *liveSession, reason string) error {
	t := s.tasks[ls.rec.Task]
	if err := ls.sb.Thaw(); err != nil {
		return err
	}
	s.gw.Release(ls.rec.ID)
	ls.rec.State, t.State, t.Reason, t.Updated = SessionRunning, TaskRunning, "", s.now()
	_, err := s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvSessionResumed, Task: t.ID, Session: ls.rec.ID, Data: jsonData(map[string]string{"reason": reason})})
		if err := tx.PutSession(ls.rec); err != nil {
			return err
		}
		return tx.PutTask(*t)
	})
	return err
}

// UseFallback moves the fleet to the plan's fallback upstreams (fallback_url) when
// the primary's window is exhausted: sessions the quota paused resume at once, and the
// quota no longer pauses until the primary's window resets, when the primaries return.
func (s *Supervisor) UseFallback() error {
	var err error
	s.call(func() { err = s.useFallback() })
	s.kick()
	return err
}

func (s *Supervisor) useFallback() error {
	if s.gw == nil {
		return notApplicable("the plan has no [gateway]")
	}
	var switched []string
	for _, u := range s.cfg.Gateway.Upstreams {
		if u.FallbackURL == "" {
			continue
		}
		if err := s.gw.SetUpstream(gateway.Upstream{Kind: u.Kind, URL: u.FallbackURL, Key: envKey(u.FallbackKeyEnv)}); err != nil {
			return err
		}
		switched = append(switched, u.Kind)
	}
	if len(switched) == 0 {
		return notApplicable("no upstream in the plan has a fallback_url")
	}
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvUpstreamSwitch, Data: jsonData(map[string]any{"to": "fallback", "upstreams": switched})})
		return nil
	})
	if s.quota != nil {
		s.quota.onFallback = true
		s.quota.resumeQ = append(s.quota.resumeQ, s.quota.paused...)
		s.quota.paused = nil
		for len(s.quota.resumeQ) > 0 {
			s.resumeNextQuotaPaused("moved to the fallback upstream")
		}
	}
	return nil
}

// fallbackReady reports whether UseFallback would switch anything now: the plan names
// a fallback upstream the gateway is not already using.
func (s *Supervisor) fallbackReady() bool {
	if s.gw == nil {
		return false
	}
	for _, u := range s.cfg.Gateway.Upstreams {
		if cur, ok := s.gw.Upstream(u.Kind); u.FallbackURL != "" && ok && cur.URL != u.FallbackURL {
			return true
		}
	}
	return false
}

// usePrimaries puts the plan's primary upstreams back after a fallback.
func (s *Supervisor) usePrimaries() {
	for _, u := range s.cfg.Gateway.Upstreams {
		if u.FallbackURL != "" {
			s.gw.SetUpstream(gateway.Upstream{Kind: u.Kind, URL: u.URL, Key: envKey(u.KeyEnv)})
		}
	}
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvUpstreamSwitch, Data: jsonData(map[string]any{"to": "primary"})})
		return nil
	})
}

// spendAt is a point-in-time copy of spend for State.
func (s *Supervisor) spendAt() (fleet Spend, tasks, sessions map[string]Spend) {
	tasks, sessions = make(map[string]Spend, len(s.spendTask)), make(map[string]Spend, len(s.spendSession))
	for k, v := range s.spendTask {
		tasks[k] = v
	}
	for k, v := range s.spendSession {
		sessions[k] = v
	}
	return s.spendFleet, tasks, sessions
}

// SumSpend totals recorded calls for the fleet and per task (for `corral status`).
func SumSpend(calls []ModelCall) (fleet Spend, byTask map[string]Spend) {
	byTask = map[string]Spend{}
	for _, c := range calls {
		fleet.add(c)
		t := byTask[c.Task]
		t.add(c)
		byTask[c.Task] = t
	}
	return fleet, byTask
}
