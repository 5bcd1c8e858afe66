package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"corral/sandbox"
	"corral/supervisor"
	"corral/tui"
)

// castOutput is a recorded terminal read up to a point: the replay cursor, or the
// end for a session that has ended.
type castOutput struct {
	c   *sandbox.Cast
	end func() (int64, error) // the output offset shown up to
}

// castAt reads a recording up to the replay cursor.
func castAt(b *replayBackend, c *sandbox.Cast, zero time.Time) *castOutput {
	return &castOutput{c: c, end: func() (int64, error) { return c.OutputAt(b.Cursor().Sub(zero).Seconds()) }}
}

// castEnded reads a whole recording: the terminal as its session ended.
func castEnded(c *sandbox.Cast) *castOutput {
	return &castOutput{c: c, end: func() (int64, error) { return c.Output, nil }}
}

// screenWindow bounds what an emulator is fed to show one screen at a seek: several
// screenfuls of text with its colours. Feeding a VT emulator costs ~1 ms per KiB of
// scrolling output, so a seek reads from the last screen clear within this window
// (exact), else this window's tail (exact for line-oriented agents, whose screen is
// their last lines).
const screenWindow = 24 << 10

// usagePoints is how many samples per session a replayed snapshot carries: what the
// budgets pane's sparklines draw.
const usagePoints = 8

// Since returns the output between offset and the end shown. An offset further back
// than a screen's worth starts at the nearest keyframe (a screen clear) instead: an
// emulator fed from there shows the same screen.
func (o *castOutput) Since(offset int64) ([]byte, int64) {
	end, err := o.end()
	if err != nil || offset >= end {
		return nil, end
	}
	if k := o.c.Keyframe(end, screenWindow); offset < k {
		offset = k
	}
	data, _ := o.c.Read(offset, end)
	// A line-printing agent's screen is its last lines: feed only those (the pane is
	// never taller than the recorded terminal, whose rows bound what is visible).
	data, _ = sandbox.LastLines(data, max(o.c.Height, 50)+2)
	return data, end
}

func (o *castOutput) Changed() <-chan struct{} { return nil }

// playSession writes one session's recorded terminal to w in real time (times speed),
// from at on, as `asciinema play` would: the screen as it stood at that point is drawn
// at once, then the rest plays with its pauses (each cut to maxIdle).
func playSession(ctx context.Context, w io.Writer, h *supervisor.History, id string, speed float64, at string) error {
	const maxIdle = 2.0
	rec, ok := h.Session(id)
	if !ok {
		var ids []string
		for _, s := range h.Sessions {
			ids = append(ids, s.ID)
		}
		return badInput("--session %s: no such session in this run (sessions: %s)", id, strings.Join(ids, ", "))
	}
	c, err := sandbox.OpenCast(rec.Recording)
	if err != nil {
		return fmt.Errorf("session %s: %w (corral gc may have removed an old run's recordings)", id, err)
	}
	defer c.Close()
	from := 0.0
	if at != "" {
		zero := time.Unix(0, 0)
		t, err := tui.ParseReplayTime(at, zero, zero.Add(time.Duration(c.Duration*float64(time.Second))), zero)
		if err != nil {
			return badInput("--at: %v", err)
		}
		from = t.Sub(zero).Seconds()
	}
	if from > 0 {
		end, err := c.OutputAt(from)
		if err != nil {
			return err
		}
		screen, err := c.Read(c.Keyframe(end, screenWindow), end)
		if err != nil {
			return err
		}
		w.Write(screen)
	}
	prev := from
	return c.Each(func(e sandbox.CastEvent) bool {
		if e.Time <= from || e.Kind != "o" {
			return true
		}
		gap := min(e.Time-prev, maxIdle) / speed
		prev = e.Time
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Duration(gap * float64(time.Second))):
		}
		_, err := io.WriteString(w, e.Data)
		return err == nil
	})
}
