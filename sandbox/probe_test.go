package sandbox

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// overlayMounts lists the overlay mounts in /proc/mounts.
func overlayMounts(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 2 && fs[2] == "overlay" {
			out = append(out, sc.Text())
		}
	}
	return out
}

// hostCgroupMode reads the mode from /proc/self/mountinfo alone, as a check on
// Probe's statfs-based answer: v1 and v2 mounts both present means hybrid.
func hostCgroupMode(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var v1, v2, v2AtRoot bool
	for line := range strings.Lines(string(b)) {
		pre, post, _ := strings.Cut(line, " - ")
		pf, fs := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(fs) < 1 {
			continue
		}
		switch fs[0] {
		case "cgroup":
			v1 = true
		case "cgroup2":
			v2 = true
			v2AtRoot = v2AtRoot || pf[4] == "/sys/fs/cgroup"
		}
	}
	switch {
	case v2AtRoot:
		return "v2"
	case v1 && v2:
		return "hybrid"
	case v1:
		return "v1"
	case v2:
		return "v2"
	}
	return "none"
}

func TestProbeThisHost(t *testing.T) {
	requireRoot(t)
	mountsBefore := overlayMounts(t)
	scratchBefore, _ := filepath.Glob(filepath.Join(os.TempDir(), "corral-probe-*"))
	groupsBefore, _ := filepath.Glob("/sys/fs/cgroup/*/corral/probe-*")

	r := Probe()

	for _, name := range []string{"root", "overlayfs", "overlay redirect_dir",
		"mount namespace", "pid namespace", "net namespace", "uts namespace", "ipc namespace",
		"pty", "netlink"} {
		it, ok := r.Item(name)
		if !ok {
			t.Errorf("no %q item", name)
			continue
		}
		if !it.OK {
			t.Errorf("%s: not ok on this host: %s", name, it.Detail)
		}
		if it.Detail == "" {
			t.Errorf("%s: empty detail", name)
		}
	}
	for _, it := range r.Items {
		if it.OK && it.Cost != "" {
			t.Errorf("%s: ok but carries cost %q", it.Name, it.Cost)
		}
		if !it.OK && it.Need != NeedOptional && it.Cost == "" {
			t.Errorf("%s: missing but says nothing of the cost", it.Name)
		}
	}
	if want := hostCgroupMode(t); r.CgroupMode != want {
		t.Errorf("cgroup mode = %q, mountinfo says %q", r.CgroupMode, want)
	}
	if !r.Root || !r.CanRun || r.Level == "none" || !strings.HasPrefix(r.Isolation, r.Level+":") {
		t.Errorf("root=%v can_run=%v level=%q isolation=%q", r.Root, r.CanRun, r.Level, r.Isolation)
	}

	// Probe mounts a real overlay and makes scratch cgroups: none may survive it.
	if after := overlayMounts(t); !reflect.DeepEqual(after, mountsBefore) {
		t.Errorf("overlay mounts changed across Probe:\nbefore %q\nafter  %q", mountsBefore, after)
	}
	for _, m := range overlayMounts(t) {
		if strings.Contains(m, "corral-probe-") {
			t.Errorf("probe overlay left mounted: %s", m)
		}
	}
	if after, _ := filepath.Glob(filepath.Join(os.TempDir(), "corral-probe-*")); len(after) != len(scratchBefore) {
		t.Errorf("scratch dirs left behind: %v", after)
	}
	if after, _ := filepath.Glob("/sys/fs/cgroup/*/corral/probe-*"); len(after) != len(groupsBefore) {
		t.Errorf("scratch cgroups left behind: %v", after)
	}
}

func TestProbeReportJSONRoundTrip(t *testing.T) {
	requireRoot(t)
	r := Probe()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"level"`, `"isolation"`, `"can_run"`, `"cgroup_mode"`, `"items"`, `"name"`, `"ok"`, `"detail"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}
	var back HostReport
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	// loss is internal to the summary and does not travel; compare without it.
	for i := range r.Items {
		r.Items[i].loss = ""
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", back, r)
	}
}

func TestProbeSummarize(t *testing.T) {
	ok := func(name string, need Need) ProbeItem { return ProbeItem{Name: name, OK: true, Need: need} }
	miss := func(name string, need Need, loss string) ProbeItem {
		return ProbeItem{Name: name, Need: need, Cost: "costly", loss: loss}
	}
	for _, tc := range []struct {
		items  []ProbeItem
		level  string
		canRun bool
		says   string
	}{
		{[]ProbeItem{ok("overlayfs", NeedRequired), ok("net namespace", NeedIsolation)}, "full", true, "copy-on-write"},
		{[]ProbeItem{ok("overlayfs", NeedRequired), miss("user namespace", NeedOptional, "")}, "full", true, "namespaces"},
		{[]ProbeItem{ok("overlayfs", NeedRequired), miss("net namespace", NeedIsolation, "shared host network"),
			miss("cgroup freeze", NeedIsolation, "pause by SIGSTOP")}, "degraded", true, "shared host network; pause by SIGSTOP"},
		{[]ProbeItem{miss("overlayfs", NeedRequired, "no overlayfs"), miss("net namespace", NeedIsolation, "x")}, "none", false, "no overlayfs"},
	} {
		level, line, canRun := summarize(tc.items)
		if level != tc.level || canRun != tc.canRun || !strings.HasPrefix(line, level+": ") || !strings.Contains(line, tc.says) {
			t.Errorf("summarize(%v) = %q, %q, %v; want level %q, can run %v, saying %q",
				tc.items, level, line, canRun, tc.level, tc.canRun, tc.says)
		}
	}
}

func TestProbeCgroupItems(t *testing.T) {
	// A host without cgroups: every cgroup item is missing and says what it costs.
	none := CgroupProbe{Mode: CgroupNone, Err: "no hierarchy",
		Memory: CgroupFeature{Err: "no memory controller"}, CPU: CgroupFeature{Err: "no cpu controller"},
		Pids: CgroupFeature{Err: "no pids controller"}, Freeze: CgroupFeature{Err: "no freezer controller"},
		Kill: CgroupFeature{OK: true, Via: "SIGKILL each pid (a fast fork loop may outrun it)"}}
	for _, it := range cgroupItems(none) {
		if it.OK || it.Cost == "" || it.Detail == "" {
			t.Errorf("%s: ok=%v detail=%q cost=%q on a host without cgroups", it.Name, it.OK, it.Detail, it.Cost)
		}
	}
	// A v1-only host freezes through the v1 freezer: doctor warns about its SIGKILL trap.
	v1 := CgroupProbe{Mode: CgroupV1, Memory: CgroupFeature{OK: true, Via: "v1 memory"},
		CPU: CgroupFeature{OK: true, Via: "v1 cpu"}, Pids: CgroupFeature{OK: true, Via: "v1 pids"},
		Freeze: CgroupFeature{OK: true, Via: "v1 freezer"}, Kill: CgroupFeature{OK: true, Via: "v1 freezer + SIGKILL each pid"}}
	for _, it := range cgroupItems(v1) {
		if !it.OK {
			t.Errorf("%s: not ok on a working v1 host: %s", it.Name, it.Detail)
		}
		if it.Name == "cgroup freeze" && !strings.Contains(it.Detail, "ignores SIGKILL") {
			t.Errorf("v1 freeze detail %q does not warn about SIGKILL", it.Detail)
		}
	}
}
