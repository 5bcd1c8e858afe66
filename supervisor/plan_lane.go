package supervisor

// decodeLane reads the integration lane's keys of [fleet] into f.Lane. They steer what
// happens to a test command's result, so each needs fleet.test.
func (d *planDecoder) decodeLane(table map[string]any, f *Fleet) {
	l := DefaultLane()
	var set []string
	oneOf := func(key string, dst *string, allowed ...string) {
		if v, ok := table[key]; ok {
			set = append(set, key)
			if s, ok := d.oneOf("fleet."+key, v, allowed...); ok {
				*dst = s
			}
		}
	}
	oneOf("gating", &l.Gating, GatingPost, GatingPre)
	oneOf("on_red", &l.OnRed, OnRedRepair, OnRedRevert, OnRedHold)
	oneOf("narrow", &l.Narrow, NarrowStop, NarrowPaths)
	if v, ok := table["test_reruns"]; ok {
		set = append(set, "test_reruns")
		if n, ok := d.integer("fleet.test_reruns", v); ok && (n < 0 || n > 10) {
			d.problem("fleet.test_reruns", "%d: want 0 to 10 re-runs of a red result", n)
		} else if ok {
			l.Reruns = int(n)
		}
	}
	if v, ok := table["test_parallel"]; ok {
		set = append(set, "test_parallel")
		if n, ok := d.integer("fleet.test_parallel", v); ok && (n < 1 || n > 64) {
			d.problem("fleet.test_parallel", "%d: want 1 to 64 candidates tested at once", n)
		} else if ok {
			l.Parallel = int(n)
		}
	}
	if v, ok := table["test_timeout"]; ok {
		set = append(set, "test_timeout")
		if t, ok := d.duration("fleet.test_timeout", v); ok && t < 0 {
			d.problem("fleet.test_timeout", "%v: want 0 (none) or more", t)
		} else if ok {
			l.Timeout = t
		}
	}
	if v, ok := table["test_cpu"]; ok {
		set = append(set, "test_cpu")
		if n, ok := d.number("fleet.test_cpu", v); ok && n <= 0 {
			d.problem("fleet.test_cpu", "%v cores: want more than 0 (leave test_cpu out for no limit)", n)
		} else if ok {
			l.CPU = n
		}
	}
	if v, ok := table["test_memory"]; ok {
		set = append(set, "test_memory")
		if n, ok := d.size("fleet.test_memory", v); ok && n == 0 {
			d.problem("fleet.test_memory", "0 bytes: want more than 0 (leave test_memory out for no limit)")
		} else if ok {
			l.Memory = n
		}
	}
	if v, ok := table["test_every_head"]; ok {
		set = append(set, "test_every_head")
		if b, ok := v.(bool); ok {
			l.EveryHead = b
		} else {
			d.problem("fleet.test_every_head", "want true or false, got %s", planDescribe(v))
		}
	}
	if f.Test == "" {
		for _, k := range set {
			d.problem("fleet."+k, "needs fleet.test: the lane has no test command to run")
		}
	}
	f.Lane = l
}
