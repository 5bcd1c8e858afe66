package supervisor_test

import (
	"path/filepath"
	"testing"
	"time"

	"corral/supervisor"
)

// A plan's lane keys reach the fleet, unset ones take the documented defaults, and a
// task's accept check (its own or the default's) reaches the task.
func TestPlanLaneKeys(t *testing.T) {
	repo := newPlanRepo(t, planShopFiles)
	data := []byte(`[fleet]
base = "main"
test = "go test ./..."
gating = "pre"
on_red = "revert"
test_parallel = 3
test_timeout = "90s"
test_cpu = 1.5
test_memory = "1G"

[defaults]
agent = "true"
accept = "sh check.sh"

[[task]]
id = "a"
prompt = "a"

[[task]]
id = "b"
prompt = "b"
accept = "go vet ./..."
`)
	p, err := supervisor.ParsePlanBytes(filepath.Join(repo, "p.toml"), data, supervisor.WithHostLimits(planHostCPU, planHostMemory))
	if err != nil {
		t.Fatal(err)
	}
	want := supervisor.Lane{Gating: "pre", OnRed: "revert", Narrow: "stop", Reruns: 1, Parallel: 3,
		Timeout: 90 * time.Second, CPU: 1.5, Memory: 1 << 30}
	if p.Fleet.Lane != want || p.Fleet.Test != "go test ./..." {
		t.Errorf("lane = %+v (test %q), want %+v", p.Fleet.Lane, p.Fleet.Test, want)
	}
	if p.Tasks[0].Accept != "sh check.sh" || p.Tasks[1].Accept != "go vet ./..." {
		t.Errorf("accept = %q, %q", p.Tasks[0].Accept, p.Tasks[1].Accept)
	}

	// Without a test command the lane keys mean nothing: each is reported at its line.
	bad := []byte("[fleet]\nbase = \"main\"\ngating = \"pre\"  # want: fleet.gating: needs fleet.test\n[[task]]\nid = \"x\"\nagent = \"true\"\n")
	_, err = supervisor.ParsePlanBytes("p.toml", bad, supervisor.WithPlanDir(repo), supervisor.WithHostLimits(planHostCPU, planHostMemory))
	checkPlanWants(t, "p.toml", bad, err)

	plain, err := supervisor.ParsePlanBytes("p.toml", []byte("[[task]]\nid = \"x\"\nagent = \"true\"\n"),
		supervisor.WithPlanDir(repo), supervisor.WithHostLimits(planHostCPU, planHostMemory))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Fleet.Lane != supervisor.DefaultLane() {
		t.Errorf("default lane = %+v, want %+v", plain.Fleet.Lane, supervisor.DefaultLane())
	}
}
