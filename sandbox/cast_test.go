package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// writeCast records chunks with the Recorder's own format at given times.
func writeCast(t *testing.T, chunks []CastEvent) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rec.cast")
	var b bytes.Buffer
	b.WriteString(`{"version":2,"width":80,"height":24,"timestamp":1}` + "\n")
	for _, c := range chunks {
		line, _ := json.Marshal([]any{c.Time, c.Kind, c.Data})
		b.Write(append(line, '\n'))
	}
	b.WriteString(`[99999, "o", "half a li`) // a live recording's unfinished line
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCastIndex checks the index against a straight read: output by a time, the
// bytes between two offsets, and keyframes at screen clears, across many marks.
func TestCastIndex(t *testing.T) {
	var chunks []CastEvent
	var all []byte
	var outAt []int64 // output bytes after chunk i
	for i := 0; i < 3000; i++ {
		d := fmt.Sprintf("line %d é \x1b[1m✓\x1b[0m\r\n", i)
		if i%500 == 250 {
			d = "\x1b[2J\x1b[H" + d
		}
		kind := "o"
		if i%97 == 3 {
			kind, d = "r", "100x30"
		}
		chunks = append(chunks, CastEvent{Time: float64(i) * 0.1, Kind: kind, Data: d})
		if kind == "o" {
			all = append(all, d...)
		}
		outAt = append(outAt, int64(len(all)))
	}
	c, err := OpenCast(writeCast(t, chunks))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Output != int64(len(all)) || c.Events != len(chunks) || c.Width != 80 {
		t.Fatalf("cast: output %d events %d width %d, want %d %d 80", c.Output, c.Events, c.Width, len(all), len(chunks))
	}
	if len(c.marks) < 100 {
		t.Errorf("only %d marks over 300 s", len(c.marks))
	}
	for _, i := range []int{0, 1, 9, 10, 11, 777, 1500, 2999} {
		got, err := c.OutputAt(float64(i)*0.1 + 0.01)
		if err != nil || got != outAt[i] {
			t.Errorf("output at chunk %d: %d (%v), want %d", i, got, err, outAt[i])
		}
	}
	if got, _ := c.OutputAt(-1); got != 0 {
		t.Errorf("output before the start: %d", got)
	}
	for _, r := range [][2]int64{{0, 10}, {5, 70000}, {33333, 33334}, {int64(len(all)) - 5, int64(len(all)) + 100}} {
		got, err := c.Read(r[0], r[1])
		want := all[r[0]:min(r[1], int64(len(all)))]
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("read %v: %d bytes (%v), want %d", r, len(got), err, len(want))
		}
	}
	clear := int64(bytes.Index(all, []byte("\x1b[2J")))
	if k := c.Keyframe(clear+100, 1<<20); k != clear {
		t.Errorf("keyframe after the first clear: %d, want %d", k, clear)
	}
	if k := c.Keyframe(clear-1, 1<<20); k != 0 {
		t.Errorf("keyframe before any clear: %d, want the start", k)
	}
	if k := c.Keyframe(clear+5000, 1000); k != clear+4000 {
		t.Errorf("keyframe with the clear out of the window: %d, want the window's start %d", k, clear+4000)
	}
}

func TestCastRejectsOtherFiles(t *testing.T) {
	for _, content := range []string{"", "not json\n", `{"version":1,"width":80,"height":24}` + "\n"} {
		p := filepath.Join(t.TempDir(), "x.cast")
		os.WriteFile(p, []byte(content), 0o600)
		if _, err := OpenCast(p); err == nil {
			t.Errorf("OpenCast(%q) accepted it", content)
		}
	}
}

// TestRecorderCastRoundTrip writes through the Recorder and reads it back indexed.
func TestRecorderCastRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.cast")
	r := NewRecorder(path, 100, 30, "s-1")
	want := []byte{}
	for i := 0; i < 50; i++ {
		chunk := []byte(fmt.Sprintf("chunk %d ✓\r\n", i))
		// Split inside the multi-byte character on purpose.
		r.Write(chunk[:9])
		r.Write(chunk[9:])
		want = append(want, chunk...)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := OpenCast(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.Read(0, c.Output)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("round trip: %q (%v), want %q", got, err, want)
	}
}

func TestLastLines(t *testing.T) {
	var b bytes.Buffer
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, "\x1b[1mline\x1b[0m %d\r\n", i)
	}
	b.WriteString("\x1b[32mgreen\r\nstill\r\nlast \x1b[K")
	got, ok := LastLines(b.Bytes(), 2)
	if want := "\x1b[0m\x1b[32mstill\r\nlast \x1b[K"; !ok || string(got) != want {
		t.Errorf("LastLines: %q (%v), want %q: the last lines, the colour in force first", got, ok, want)
	}
	moves := []byte("a\r\nb\r\n\x1b[2;3Hc\r\n")
	if got, ok := LastLines(moves, 1); ok || !bytes.Equal(got, moves) {
		t.Errorf("cursor addressing trimmed: %q %v", got, ok)
	}
	if got, ok := LastLines([]byte("x\r\ny"), 5); !ok || string(got) != "x\r\ny" {
		t.Errorf("short output changed: %q", got)
	}
}

// TestRecorderLimit: past its limit a recording keeps a note and nothing more.
func TestRecorderLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.cast")
	r := NewRecorder(path, 80, 24, "s-1")
	r.Limit(1000)
	line := []byte(fmt.Sprintf("%099d\n", 7))
	for i := 0; i < 50; i++ {
		r.Write(line)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := OpenCast(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, _ := c.Read(0, c.Output)
	if !bytes.HasPrefix(got, bytes.Repeat(line, 10)) || !bytes.Contains(got, []byte("recording stopped after 1000 bytes")) || c.Events != 11 {
		t.Errorf("limited recording: %d events, %q", c.Events, got)
	}
}
