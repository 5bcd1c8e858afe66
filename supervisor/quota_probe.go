package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"corral/supervisor/gateway"
)

// probeSample is one reading of the probe command.
type probeSample struct {
	Utilization float64
	Reset       time.Time
	Err         string
}

// runProbe runs the plan's quota probe every ProbeEvery until ctx ends; each reading
// reaches the loop like the gateway's news.
func (s *Supervisor) runProbe(ctx context.Context) {
	p := s.cfg.Gateway
	if p == nil || p.Probe == "" {
		return
	}
	every := p.ProbeEvery
	if every <= 0 {
		every = time.Minute
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		smp := s.probeOnce(ctx)
		s.gwInbox.mu.Lock()
		s.gwInbox.samples = append(s.gwInbox.samples, smp)
		s.gwInbox.mu.Unlock()
		s.kick()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *Supervisor) probeOnce(ctx context.Context) probeSample {
	p := s.cfg.Gateway
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", p.Probe)
	cmd.Dir = p.Dir
	out, err := cmd.Output()
	if err != nil {
		return probeSample{Err: fmt.Sprintf("probe %q: %v", p.Probe, err)}
	}
	smp, err := parseProbe(string(out), s.now())
	if err != nil {
		return probeSample{Err: fmt.Sprintf("probe %q: %v", p.Probe, err)}
	}
	return smp
}

// parseProbe reads a probe's output: either JSON {"utilization": 0.42, "reset":
// "2026-11-29T15:57:00Z"} or a line "UTILIZATION [RESET]", where utilisation is a
// fraction or a percentage ("42%") and the reset is RFC 3339, Unix seconds, or a
// duration from now ("1h20m").
func parseProbe(out string, now time.Time) (probeSample, error) {
	out = strings.TrimSpace(out)
	if strings.HasPrefix(out, "{") {
		var j struct {
			Utilization *float64 `json:"utilization"`
			Reset       string   `json:"reset"`
		}
		if err := json.Unmarshal([]byte(out), &j); err != nil || j.Utilization == nil {
			return probeSample{}, fmt.Errorf("want {\"utilization\": 0..1, \"reset\": TIME}, got %.80q", out)
		}
		smp := probeSample{Utilization: *j.Utilization}
		if j.Reset != "" {
			t, ok := gateway.ParseReset(j.Reset, now)
			if !ok {
				return probeSample{}, fmt.Errorf("reset %q: want RFC 3339, Unix seconds or a duration", j.Reset)
			}
			smp.Reset = t
		}
		return smp, nil
	}
	f := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if len(f) == 0 {
		return probeSample{}, fmt.Errorf("no output")
	}
	pct := strings.HasSuffix(f[0], "%")
	u, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64)
	if err != nil {
		return probeSample{}, fmt.Errorf("utilisation %q: want a fraction such as 0.42 or a percentage such as 42%%", f[0])
	}
	if pct || u > 1 {
		u /= 100
	}
	smp := probeSample{Utilization: u}
	if len(f) > 1 {
		t, ok := gateway.ParseReset(f[1], now)
		if !ok {
			return probeSample{}, fmt.Errorf("reset %q: want RFC 3339, Unix seconds or a duration", f[1])
		}
		smp.Reset = t
	}
	return smp, nil
}

// onProbeSample records a probe reading; it counts like the gateway's headers.
func (s *Supervisor) onProbeSample(p probeSample) {
	data := map[string]any{"utilization": p.Utilization}
	if p.Err != "" {
		data = map[string]any{"error": p.Err}
	} else {
		if !p.Reset.IsZero() {
			data["reset"] = p.Reset
		}
		if s.quota != nil {
			s.quota.roll(s.now())
			s.quota.observe(p.Utilization, p.Reset)
		}
	}
	s.commit(func(tx Tx) error {
		tx.Emit(Event{Kind: EvQuotaSampled, Data: jsonData(data)})
		return nil
	})
}
