package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/charmbracelet/x/vt"

	"corral/sandbox"
	"corral/store"
	"corral/supervisor"
)

// benchReplay is `corral bench replay`: build a long run synthetically — a real SQLite
// store with N sessions' events and usage, and a real asciicast recording per session
// — then seek to random times and measure what a seek costs the replay TUI: the
// fleet's state at that time, its snapshot for the panes, and the selected session's
// screen (recording read from its keyframe and fed to a VT emulator).
func benchReplay(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench replay", stderr)
	sessions := fs.Int("sessions", 50, "sessions in the run")
	events := fs.Int("events", 100000, "events in the run")
	hours := fs.Float64("hours", 3, "length of the run and of each recording")
	seeks := fs.Int("seeks", 300, "random seeks to measure")
	scratch := fs.String("scratch", defaultScratch(), "directory for the generated run")
	keep := fs.Bool("keep", false, "keep the generated run (prints its directory)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := os.MkdirAll(*scratch, 0o755); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(*scratch, "corral-bench-replay-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintf(stdout, "run kept in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	t0 := time.Now()
	repo, dbPath, err := synthRun(dir, synthSpec{sessions: *sessions, events: *events, length: time.Duration(*hours * float64(time.Hour))})
	if err != nil {
		return err
	}
	var castBytes int64
	filepath.Walk(filepath.Join(repo.StateDir, "rec"), func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			castBytes += fi.Size()
		}
		return nil
	})
	fmt.Fprintf(stdout, "generated: %d sessions, %d events, %.1f h, recordings %s, in %s\n",
		*sessions, *events, *hours, bytesSI(castBytes), time.Since(t0).Round(time.Millisecond))
	return measureSeeks(stdout, repo, dbPath, *seeks)
}

// measureSeeks opens a run read-only as `corral replay` does and seeks at random.
func measureSeeks(out io.Writer, repo sandbox.Repo, dbPath string, n int) error {
	defer replayGC()() // as corral replay runs
	t0 := time.Now()
	db, err := store.OpenReadOnly(dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	var h *supervisor.History
	if err := db.View(func(r supervisor.Reader) error {
		h, err = supervisor.LoadHistory(r)
		return err
	}); err != nil {
		return err
	}
	load := time.Since(t0)
	b := newReplayBackend(repo, db, h)
	defer b.Close()
	start, end := b.Bounds()
	rng := rand.New(rand.NewPCG(1, 2))
	var fold, snap, screen, total, index []time.Duration
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(rng.Int64N(int64(end.Sub(start)) + 1)))
		s0 := time.Now()
		m := h.At(at)
		fold = append(fold, time.Since(s0))

		s1 := time.Now()
		b.Seek(at)
		if _, err := b.Snapshot(); err != nil {
			return err
		}
		snap = append(snap, time.Since(s1))
		if len(m.State.Sessions) == 0 {
			continue
		}
		// The session pane shows one session: the selected task's.
		id := m.State.Sessions[rng.IntN(len(m.State.Sessions))].ID
		s2 := time.Now()
		b.mu.Lock()
		_, opened := b.casts[id]
		b.mu.Unlock()
		o, ok := b.Output(id)
		if !opened {
			index = append(index, time.Since(s2))
			s2 = time.Now()
		}
		if ok {
			data, _ := o.Since(0)
			// The generated recordings hold no terminal queries (ESC[6n…), so the
			// emulator's reply pipe needs no reader; reading it while Close runs is a
			// data race inside charmbracelet/x/vt v0.1.0.
			emu := vt.NewEmulator(100, 30)
			emu.Write(data)
			_ = emu.Render()
			emu.Close()
		}
		screen = append(screen, time.Since(s2))
		total = append(total, snap[len(snap)-1]+screen[len(screen)-1])
	}
	p := func(ds []time.Duration, q float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	fmt.Fprintf(out, "open run (read-only) and build checkpoints: %s\n", load.Round(time.Millisecond))
	fmt.Fprintf(out, "%-44s %10s %10s\n", "seek to a random time", "p50", "p99")
	for _, r := range []struct {
		name string
		ds   []time.Duration
	}{
		{"fleet state at T (checkpoint + fold)", fold},
		{"panes' snapshot at T (state, usage, records)", snap},
		{"session screen at T (keyframe → VT)", screen},
		{"whole seek (snapshot + screen)", total},
		{"first view of a recording (index it)", index},
	} {
		fmt.Fprintf(out, "%-44s %10s %10s\n", r.name, ms(p(r.ds, 0.5)), ms(p(r.ds, 0.99)))
	}
	goal := 200 * time.Millisecond
	p99 := p(total, 0.99)
	verdict := "MET"
	if p99 > goal {
		verdict = "NOT MET"
	}
	fmt.Fprintf(out, "goal: whole seek p99 ≤ %s over %d events: %s (p99 %s, %.0f× under the goal)\n",
		ms(goal), len(h.Events), verdict, ms(p99), float64(goal)/float64(max(p99, time.Microsecond)))
	return nil
}

func bytesSI(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

type synthSpec struct {
	sessions int
	events   int
	length   time.Duration
}

// synthRun writes a long run into a fresh repository under dir: persistent tasks,
// one session each for the whole run, publishing every few seconds (accepted,
// merged, rejected with conflicts, now and then escalated and approved), paused and
// resumed now and then, sampled once a second, each with an asciicast recording that
// prints a line every half second and clears the screen every few minutes.
func synthRun(dir string, spec synthSpec) (sandbox.Repo, string, error) {
	if err := initBenchRepo(dir); err != nil {
		return sandbox.Repo{}, "", err
	}
	repo, err := sandbox.OpenRepo(dir)
	if err != nil {
		return repo, "", err
	}
	dbPath := fleetDB(repo, "bench")
	os.MkdirAll(filepath.Dir(dbPath), 0o700)
	start := time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)
	db, err := store.Open(dbPath, store.WithNow(func() time.Time { return start }))
	if err != nil {
		return repo, "", err
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(7, 11))
	n := spec.sessions
	perTask := max(spec.events/max(n, 1), 4)
	recDir := filepath.Join(repo.StateDir, "rec", "bench")
	os.MkdirAll(recDir, 0o700)

	type ev struct {
		supervisor.Event
		pub *supervisor.Publish
		con []supervisor.Conflict
	}
	var all []ev
	var tasks []supervisor.Task
	var sessions []supervisor.Session
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("t%02d", i)
		sid := id + "-1"
		t := supervisor.Task{ID: id, Prompt: "synthetic", Agent: "true", Lifetime: supervisor.Persistent,
			Intent: []string{fmt.Sprintf("pkg%02d/**", i)}, CPU: 0.5, Memory: 256 << 20, Network: "private",
			Retries: 2, State: supervisor.TaskDone, Attempts: 1, Created: start, Updated: start.Add(spec.length)}
		tasks = append(tasks, t)
		began := start.Add(time.Duration(i) * 100 * time.Millisecond)
		code := 0
		sessions = append(sessions, supervisor.Session{ID: sid, Task: id, Attempt: 1, Base: "base", State: supervisor.SessionPublished,
			Recording: filepath.Join(recDir, sid+".cast"), Started: began, Ended: start.Add(spec.length), ExitCode: &code})
		all = append(all, ev{Event: supervisor.Event{Time: start, Kind: supervisor.EvTaskQueued, Task: id}})
		all = append(all, ev{Event: supervisor.Event{Time: began, Kind: supervisor.EvSessionStarted, Task: id, Session: sid,
			Data: json.RawMessage(`{"attempt":1}`)}})
		step := spec.length / time.Duration(perTask)
		at := began
		for k := 0; k < perTask-3; k += 2 {
			at = at.Add(step + time.Duration(rng.Int64N(int64(step/4)+1)))
			if at.After(start.Add(spec.length - time.Second)) {
				break
			}
			if rng.IntN(20) == 0 {
				all = append(all, ev{Event: supervisor.Event{Time: at, Kind: supervisor.EvSessionPaused, Task: id, Session: sid}},
					ev{Event: supervisor.Event{Time: at.Add(step), Kind: supervisor.EvSessionResumed, Task: id, Session: sid}})
				continue
			}
			all = append(all, ev{Event: supervisor.Event{Time: at, Kind: supervisor.EvPublishQueued, Task: id, Session: sid}})
			outcome := []string{"accepted", "merged", "rejected", "accepted", "empty"}[rng.IntN(5)]
			p := &supervisor.Publish{Task: id, Session: sid, Outcome: outcome, Base: "base", Head: "h", Paths: []string{fmt.Sprintf("pkg%02d/a.go", i)},
				Time: at.Add(step / 2)}
			var con []supervisor.Conflict
			if outcome == "rejected" {
				con = []supervisor.Conflict{{Path: p.Paths[0], Class: []string{"content", "add-add", "modify-delete"}[rng.IntN(3)]}}
			} else if outcome != "empty" {
				p.NewHead = fmt.Sprintf("%016x%016x%08x", rng.Uint64(), rng.Uint64(), rng.Uint32())
			}
			all = append(all, ev{Event: supervisor.Event{Time: p.Time, Kind: "publish." + outcome, Task: id, Session: sid,
				Data: json.RawMessage(fmt.Sprintf(`{"new_head":%q,"conflicts":%d}`, p.NewHead, len(con)))}, pub: p, con: con})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Time.Before(all[j].Time) })
	end := start.Add(spec.length)
	for i := range tasks {
		all = append(all, ev{Event: supervisor.Event{Time: end, Kind: supervisor.EvTaskDone, Task: tasks[i].ID, Session: sessions[i].ID}})
	}
	if _, err := db.Update(func(tx supervisor.Tx) error {
		if err := tx.PutFleet(supervisor.Fleet{Name: "bench", Repo: dir, BaseRef: "main", Base: "base", HeadRef: "corral/head",
			Head: "base", Admission: supervisor.Admission{MaxRunning: n, CPU: float64(n), Memory: int64(n) << 30}, Created: start}); err != nil {
			return err
		}
		for _, t := range tasks {
			if err := tx.PutTask(t); err != nil {
				return err
			}
		}
		for _, s := range sessions {
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return repo, "", err
	}
	for lo := 0; lo < len(all); lo += 500 {
		batch := all[lo:min(lo+500, len(all))]
		if _, err := db.Update(func(tx supervisor.Tx) error {
			for _, e := range batch {
				if e.pub != nil {
					id, err := tx.AddPublish(*e.pub)
					if err != nil {
						return err
					}
					for k := range e.con {
						e.con[k].Publish = id
					}
					if err := tx.AddConflicts(e.con...); err != nil {
						return err
					}
				}
				tx.Emit(e.Event)
			}
			return nil
		}); err != nil {
			return repo, "", err
		}
	}
	// Usage: one sample a second per session, as telemetry takes them.
	secs := int(spec.length / time.Second)
	for lo := 0; lo < secs; lo += 20 {
		if _, err := db.Update(func(tx supervisor.Tx) error {
			var us []supervisor.Usage
			for s := lo; s < min(lo+20, secs); s++ {
				for _, ss := range sessions {
					us = append(us, supervisor.Usage{Session: ss.ID, Time: start.Add(time.Duration(s) * time.Second),
						CPU: time.Duration(s) * 10 * time.Millisecond, CPUPercent: float64(rng.IntN(100)), Memory: uint64(rng.IntN(200)) << 20})
				}
			}
			return tx.AddUsage(us...)
		}); err != nil {
			return repo, "", err
		}
	}
	for _, s := range sessions {
		if err := synthCast(s.Recording, spec.length, rng); err != nil {
			return repo, "", err
		}
	}
	return repo, dbPath, nil
}

// synthCast writes a recording as the sandbox's Recorder does: a line of output every
// half second, a cleared screen every five minutes.
func synthCast(path string, length time.Duration, rng *rand.Rand) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 256<<10)
	fmt.Fprintf(w, `{"version":2,"width":100,"height":30,"timestamp":%d}`+"\n", time.Now().Unix())
	for t, i := 0.0, 0; t < length.Seconds(); t, i = t+0.5, i+1 {
		data := fmt.Sprintf("\x1b[32mstep %d\x1b[0m: editing pkg/file%03d.go (%d tokens)\r\n", i, rng.IntN(1000), rng.IntN(5000))
		if i%600 == 0 {
			data = "\x1b[2J\x1b[H" + data
		}
		line, _ := json.Marshal([]any{t, "o", data})
		w.Write(append(line, '\n'))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
