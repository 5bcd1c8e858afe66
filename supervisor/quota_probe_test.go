package supervisor

import (
	"testing"
	"time"
)

func TestParseProbe(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := map[string]probeSample{
		"0.42 2026-11-29T15:57:00Z\n": {Utilization: 0.42, Reset: time.Date(2026, 11, 29, 15, 57, 0, 0, time.UTC)},
		"96% 1h30m":                   {Utilization: 0.96, Reset: now.Add(90 * time.Minute)},
		"55":                          {Utilization: 0.55},
		`{"utilization": 0.8, "reset": "1764435600"}`: {Utilization: 0.8, Reset: time.Unix(1764435600, 0)},
		`{"utilization": 0.1}`:                        {Utilization: 0.1},
	}
	for out, want := range cases {
		got, err := parseProbe(out, now)
		if err != nil || got.Utilization != want.Utilization || !got.Reset.Equal(want.Reset) {
			t.Errorf("parseProbe(%q) = %+v, %v; want %+v", out, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "0.5 tomorrow", `{"reset":"1h"}`, `{"utilization":0.5,"reset":"soon"}`} {
		if _, err := parseProbe(bad, now); err == nil {
			t.Errorf("parseProbe(%q) accepted", bad)
		}
	}
}
