package themes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestEmbeddedSkinsCoverEveryRole(t *testing.T) {
	for _, name := range []string{"dark", "light", "high-contrast"} {
		th, err := Load(name, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range Roles {
			if th.Color(r) == "" {
				t.Errorf("%s: role %s has no colour", name, r)
			}
		}
	}
}

func TestUserSkinOverridesAndErrorsNameTheLine(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "dark.theme"), []byte("# mine\nrunning = #010203\n"), 0o644)
	th, err := Load("dark", dir)
	if err != nil {
		t.Fatal(err)
	}
	if th.Color("running") != "#010203" || th.Color("done") == "" {
		t.Fatalf("override not applied or base lost: %v", th.Colors)
	}
	os.WriteFile(filepath.Join(dir, "bad.theme"), []byte("runing = #010203\n"), 0o644)
	if _, err := Load("bad", dir); err == nil || err.Error() != `theme bad:1: unknown role "runing"` {
		t.Fatalf("err = %v", err)
	}
	if got := Names(dir); got[0] != "dark" || len(got) != 4 {
		t.Fatalf("names %v", got)
	}
	if Plain().Color("running") != "" {
		t.Fatal("plain has colour")
	}
}

func TestWatchSignalsOncePerBurst(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := Watch(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		os.WriteFile(filepath.Join(dir, "mine.theme"), []byte(fmt.Sprintf("running = %d\n", i)), 0o644)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("no signal for a changed skin")
	}
	cancel()
	for range ch { // closes once ctx ends
	}
}
