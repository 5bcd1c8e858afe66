package supervisor_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"corral/supervisor"
)

func TestPlanWorkspaceKeys(t *testing.T) {
	repo := newPlanRepo(t, planShopFiles)
	parse := func(fleet string) (*supervisor.Plan, error) {
		data := []byte("[fleet]\n" + fleet + "\n[[task]]\nid = \"x\"\nagent = \"true\"\n")
		return supervisor.ParsePlanBytes(filepath.Join(repo, "p.toml"), data, supervisor.WithHostLimits(planHostCPU, planHostMemory))
	}
	p, err := parse("handoffs = \"admit\"\nneeds_input_after = \"3s\"")
	if err != nil {
		t.Fatal(err)
	}
	var cfg supervisor.Config
	p.Workspace.Apply(&cfg)
	if cfg.Handoffs != supervisor.HandoffAdmit || cfg.NeedsInputAfter != 3*time.Second {
		t.Errorf("config from the plan: handoffs %q, needs input after %v", cfg.Handoffs, cfg.NeedsInputAfter)
	}
	p, err = parse("needs_input_after = \"0s\"")
	if err != nil {
		t.Fatal(err)
	}
	cfg = supervisor.Config{}
	p.Workspace.Apply(&cfg)
	if cfg.NeedsInputAfter >= 0 {
		t.Errorf("needs_input_after = 0s: %v, want detection off (<0)", cfg.NeedsInputAfter)
	}
	_, err = parse("handoffs = \"maybe\"\nneeds_input_after = \"-1s\"")
	for _, want := range []string{"p.toml:2: fleet.handoffs", "p.toml:3: fleet.needs_input_after"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad workspace keys: %v, want %q", err, want)
		}
	}
}
