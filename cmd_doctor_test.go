package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"corral/sandbox"
)

func TestDoctorJSON(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: doctor mounts a scratch overlay and creates namespaces")
	}
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"doctor", "--json"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s\nstdout:\n%s", code, stderr.String(), stdout.String())
	}
	var r sandbox.HostReport
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("output is not a HostReport: %v\n%s", err, stdout.String())
	}
	if !r.CanRun || len(r.Items) == 0 || r.Isolation == "" {
		t.Errorf("report: can_run=%v items=%d isolation=%q", r.CanRun, len(r.Items), r.Isolation)
	}
	if it, ok := r.Item("overlayfs"); !ok || !it.OK {
		t.Errorf("overlayfs item = %+v, %v", it, ok)
	}
}

func TestDoctorTable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: doctor mounts a scratch overlay and creates namespaces")
	}
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"doctor"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"✓ overlayfs", "net namespace", "cgroup freeze", "\nisolation: "} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestDoctorTableShowsCosts(t *testing.T) {
	r := sandbox.HostReport{Isolation: "degraded: sessions run with copy-on-write workspaces, but with shared host network",
		Items: []sandbox.ProbeItem{
			{Name: "overlayfs", OK: true, Need: sandbox.NeedRequired, Detail: "mounted a scratch overlay"},
			{Name: "net namespace", Need: sandbox.NeedIsolation, Detail: "new net namespace: operation not permitted",
				Cost: "no net namespace: sessions share the host network"},
		}}
	var b bytes.Buffer
	if err := writeDoctorTable(&b, r); err != nil {
		t.Fatal(err)
	}
	want := "✓ overlayfs      mounted a scratch overlay\n" +
		"✗ net namespace  new net namespace: operation not permitted\n" +
		"                 ↳ no net namespace: sessions share the host network\n" +
		"\nisolation: degraded: sessions run with copy-on-write workspaces, but with shared host network\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestDoctorBadInput(t *testing.T) {
	for _, args := range [][]string{{"doctor", "--bogus"}, {"doctor", "extra"}} {
		var stdout, stderr bytes.Buffer
		if code := Main(args, &stdout, &stderr); code != exitBadInput {
			t.Errorf("Main(%q) = %d, want %d; stderr: %s", args, code, exitBadInput, stderr.String())
		}
		if stdout.Len() != 0 {
			t.Errorf("Main(%q) wrote to stdout: %s", args, stdout.String())
		}
	}
}
