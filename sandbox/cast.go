package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"sync"
)

// Cast is an indexed asciicast v2 recording, for replay: what the terminal had
// received by a time, and the bytes between two output offsets, without reading the
// file from its start. Output offsets count the bytes of the "o" events' text in order,
// as a live Ring counts what the pty wrote.
type Cast struct {
	Path      string
	Width     int
	Height    int
	Timestamp int64   // unix seconds the recording started
	Duration  float64 // seconds to its last event
	Output    int64   // bytes of output in all
	Events    int

	mu     sync.Mutex // the file's offset is shared by scans
	f      *os.File
	marks  []castMark // a mark every castMarkEvery seconds or castMarkBytes of file
	clears []int64    // output offsets where the screen is cleared: keyframes
}

// castMark is a point of the file where reading can start.
type castMark struct {
	at   float64 // time of the event at file
	file int64   // file offset of an event line
	out  int64   // output bytes before it
}

const (
	castMarkEvery = 1.0      // seconds
	castMarkBytes = 32 << 10 // bytes of file
)

// clearSeqs start a fresh screen: an emulator fed from one of them shows what one fed
// from the start would (full-screen programs redraw after them).
var clearSeqs = [][]byte{[]byte("\x1b[2J"), []byte("\x1bc"), []byte("\x1b[?1049h")}

// CastEvent is one line of a recording.
type CastEvent struct {
	Time float64
	Kind string // "o" output, "r" resize, "i" input, "m" marker
	Data string
}

// ErrNotCast says a file is not asciicast v2.
var ErrNotCast = errors.New("not an asciicast v2 recording")

// OpenCast reads a recording's header and indexes it in one pass.
func OpenCast(path string) (*Cast, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	c := &Cast{Path: path, f: f}
	if err := c.index(); err != nil {
		f.Close()
		return nil, fmt.Errorf("recording %s: %w", path, err)
	}
	return c, nil
}

// Close closes the file.
func (c *Cast) Close() error { return c.f.Close() }

// ParseCastHeader checks an asciicast v2 header line.
func ParseCastHeader(line []byte) (width, height int, timestamp int64, err error) {
	var h asciicastHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return 0, 0, 0, fmt.Errorf("%w: header: %v", ErrNotCast, err)
	}
	if h.Version != 2 || h.Width <= 0 || h.Height <= 0 {
		return 0, 0, 0, fmt.Errorf("%w: header has version %d, size %dx%d", ErrNotCast, h.Version, h.Width, h.Height)
	}
	return h.Width, h.Height, h.Timestamp, nil
}

// ParseCastEvent decodes one event line.
func ParseCastEvent(line []byte) (CastEvent, error) {
	if e, ok := parseCastFast(line); ok {
		return e, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil || len(raw) != 3 {
		return CastEvent{}, fmt.Errorf("%w: event %.60q", ErrNotCast, line)
	}
	var e CastEvent
	if err := json.Unmarshal(raw[0], &e.Time); err != nil {
		return e, fmt.Errorf("%w: event time %.20q", ErrNotCast, raw[0])
	}
	if err := json.Unmarshal(raw[1], &e.Kind); err != nil {
		return e, fmt.Errorf("%w: event kind %.20q", ErrNotCast, raw[1])
	}
	if err := json.Unmarshal(raw[2], &e.Data); err != nil {
		return e, fmt.Errorf("%w: event data %.20q", ErrNotCast, raw[2])
	}
	return e, nil
}

func (c *Cast) index() error {
	r := bufio.NewReaderSize(c.f, 256<<10)
	head, err := r.ReadBytes('\n')
	if err != nil && len(head) == 0 {
		return fmt.Errorf("%w: empty file", ErrNotCast)
	}
	if c.Width, c.Height, c.Timestamp, err = ParseCastHeader(bytes.TrimSpace(head)); err != nil {
		return err
	}
	off := int64(len(head))
	lastMark := castMark{at: -castMarkEvery, file: -castMarkBytes}
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			// Only whole lines count: a live recording's last line may be half written.
			if e, perr := ParseCastEvent(bytes.TrimSpace(line)); perr == nil {
				if e.Time-lastMark.at >= castMarkEvery || off-lastMark.file >= castMarkBytes {
					lastMark = castMark{at: e.Time, file: off, out: c.Output}
					c.marks = append(c.marks, lastMark)
				}
				c.Events++
				c.Duration = max(c.Duration, e.Time)
				if e.Kind == "o" {
					for _, seq := range clearSeqs {
						d := []byte(e.Data)
						for i := bytes.Index(d, seq); i >= 0; {
							c.clears = append(c.clears, c.Output+int64(i))
							j := bytes.Index(d[i+1:], seq)
							if j < 0 {
								break
							}
							i += 1 + j
						}
					}
					c.Output += int64(len(e.Data))
				}
			}
			off += int64(len(line))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	sort.Slice(c.clears, func(i, j int) bool { return c.clears[i] < c.clears[j] })
	return nil
}

// scan reads events from mark m on, calling fn with each event and the output offset
// before it until fn returns false.
func (c *Cast) scan(m castMark, fn func(e CastEvent, out int64) bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.f.Seek(m.file, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReaderSize(c.f, 64<<10)
	out := m.out
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			e, perr := ParseCastEvent(bytes.TrimSpace(line))
			if perr == nil {
				if !fn(e, out) {
					return nil
				}
				if e.Kind == "o" {
					out += int64(len(e.Data))
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// OutputAt returns how many output bytes the terminal had received by sec seconds
// into the recording.
func (c *Cast) OutputAt(sec float64) (int64, error) {
	i := sort.Search(len(c.marks), func(i int) bool { return c.marks[i].at > sec }) - 1
	if i < 0 {
		return 0, nil
	}
	var n int64
	err := c.scan(c.marks[i], func(e CastEvent, out int64) bool {
		if e.Time > sec {
			n = out
			return false
		}
		n = out
		if e.Kind == "o" {
			n += int64(len(e.Data))
		}
		return true
	})
	return n, err
}

// Read returns the output bytes in [from, to).
func (c *Cast) Read(from, to int64) ([]byte, error) {
	if to > c.Output {
		to = c.Output
	}
	if from >= to {
		return nil, nil
	}
	i := sort.Search(len(c.marks), func(i int) bool { return c.marks[i].out > from }) - 1
	if i < 0 {
		i = 0
	}
	buf := make([]byte, 0, to-from)
	err := c.scan(c.marks[i], func(e CastEvent, out int64) bool {
		if out >= to {
			return false
		}
		if e.Kind != "o" {
			return true
		}
		d := e.Data
		end := out + int64(len(d))
		if end <= from {
			return true
		}
		lo, hi := max(from-out, 0), min(to-out, int64(len(d)))
		buf = append(buf, d[lo:hi]...)
		return true
	})
	return buf, err
}

// Keyframe returns where an emulator should start reading to show the screen at
// output offset at, reading at most window bytes: the last screen clear within the
// window, else the start of the window.
func (c *Cast) Keyframe(at, window int64) int64 {
	lo := max(at-window, 0)
	i := sort.Search(len(c.clears), func(i int) bool { return c.clears[i] > at }) - 1
	if i >= 0 && c.clears[i] >= lo {
		return c.clears[i]
	}
	return lo
}

// Each calls fn with every event in order until it returns false.
func (c *Cast) Each(fn func(CastEvent) bool) error {
	if len(c.marks) == 0 {
		return nil
	}
	return c.scan(c.marks[0], func(e CastEvent, _ int64) bool { return fn(e) })
}

// Header returns the recording's header line as asciicast v2 JSON.
func (c *Cast) Header() []byte {
	b, _ := json.Marshal(asciicastHeader{Version: 2, Width: c.Width, Height: c.Height, Timestamp: c.Timestamp,
		Env: map[string]string{"TERM": "xterm-256color", "SHELL": "/bin/sh"}})
	return b
}

// parseCastFast decodes the line shape the Recorder writes, [1.5,"o","text"], with
// one string decode instead of four JSON values: indexing hours of recording is
// mostly this. Anything else takes the general path.
func parseCastFast(line []byte) (CastEvent, bool) {
	if len(line) < 8 || line[0] != '[' || line[len(line)-1] != ']' {
		return CastEvent{}, false
	}
	comma := bytes.IndexByte(line, ',')
	if comma < 2 || len(line) < comma+6 || line[comma+1] != '"' || line[comma+3] != '"' || line[comma+4] != ',' {
		return CastEvent{}, false
	}
	t, err := strconv.ParseFloat(string(line[1:comma]), 64)
	if err != nil {
		return CastEvent{}, false
	}
	e := CastEvent{Time: t, Kind: string(line[comma+2])}
	if err := json.Unmarshal(line[comma+5:len(line)-1], &e.Data); err != nil {
		return CastEvent{}, false
	}
	return e, true
}

// LastLines trims terminal output that only prints lines — text, \r, \n, \t,
// colours (SGR) and erase-in-line, no cursor addressing — to its last n lines: an
// emulator of at most n-1 rows fed the result shows the screen it would show fed the
// whole, because everything before scrolled off. The colours in force at the cut are
// carried over. Output with any other escape is returned whole (ok false).
func LastLines(data []byte, n int) (out []byte, ok bool) {
	cut, lines := -1, 0
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == '\n' {
			lines++
			if lines == n {
				cut = i + 1
				break
			}
		}
	}
	var sgr []byte // the SGR sequences since the last reset, before the cut
	for i := 0; i < len(data); i++ {
		if data[i] != 0x1b {
			continue
		}
		if i+1 >= len(data) || data[i+1] != '[' {
			return data, false
		}
		j := i + 2
		for j < len(data) && (data[j] >= '0' && data[j] <= '9' || data[j] == ';') {
			j++
		}
		if j >= len(data) {
			return data, false // cut mid-sequence: leave it to the emulator
		}
		switch data[j] {
		case 'm':
			if cut >= 0 && i < cut {
				params := data[i+2 : j]
				if len(params) == 0 || params[0] == '0' && (len(params) == 1 || params[1] == ';') {
					sgr = sgr[:0]
				}
				sgr = append(sgr, data[i:j+1]...)
			}
		case 'K':
		default:
			return data, false
		}
		i = j
	}
	if cut < 0 {
		return data, true
	}
	return append(sgr, data[cut:]...), true
}
