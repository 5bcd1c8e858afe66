package sandbox

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
	"unicode/utf8"
)

// Ring keeps the last bytes an agent wrote to its terminal, for live panes. Writers
// never block on readers: a reader that falls behind by more than the ring's size
// simply misses the oldest bytes.
type Ring struct {
	mu      sync.Mutex
	buf     []byte
	total   int64 // bytes ever written; the offset of the next byte
	changed chan struct{}
}

// NewRing makes a ring holding up to size bytes.
func NewRing(size int) *Ring {
	if size <= 0 {
		size = 1 << 20
	}
	return &Ring{buf: make([]byte, 0, size), changed: make(chan struct{})}
}

// Write appends p, dropping the oldest bytes beyond the ring's size.
func (r *Ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	capa := cap(r.buf)
	if len(p) >= capa {
		r.buf = append(r.buf[:0], p[len(p)-capa:]...)
	} else if over := len(r.buf) + len(p) - capa; over > 0 {
		r.buf = append(r.buf[:copy(r.buf, r.buf[over:])], p...)
	} else {
		r.buf = append(r.buf, p...)
	}
	r.total += int64(n)
	close(r.changed)
	r.changed = make(chan struct{})
	return n, nil
}

// Since returns the bytes written at or after offset that are still held, and the
// offset to ask from next time. An offset older than the ring returns what is left.
func (r *Ring) Since(offset int64) ([]byte, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.total - int64(len(r.buf))
	if offset < start {
		offset = start
	}
	if offset > r.total {
		offset = r.total
	}
	out := append([]byte(nil), r.buf[offset-start:]...)
	return out, r.total
}

// Changed returns a channel closed at the next write: a pane waits on it instead of
// polling.
func (r *Ring) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// Recorder writes a terminal stream as an asciicast v2 file, which `asciinema play`
// plays: a JSON header line, then one [seconds, "o", text] line per chunk.
type Recorder struct {
	mu     sync.Mutex
	path   string
	header []byte
	f      *os.File
	w      *bufio.Writer
	start  time.Time
	carry  []byte // an incomplete UTF-8 sequence held back from the previous chunk
	err    error
	limit  int64 // bytes of output recorded at most (0: DefaultRecordingLimit, <0: none)
	n      int64 // bytes of output recorded
	full   bool  // the limit was reached: the rest of the output is not recorded
}

// DefaultRecordingLimit bounds one session's recording: an agent printing without
// end (a log tailed in a loop) must not fill the disk. Replay shows a note where the
// recording stopped.
const DefaultRecordingLimit = 256 << 20

// Limit sets how many bytes of output the recording keeps (0: the default, <0: no
// limit).
func (r *Recorder) Limit(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limit = n
}

// asciicastHeader is the first line of an asciicast v2 file.
type asciicastHeader struct {
	Version   int               `json:"version"`
	Width     int               `json:"width"`
	Height    int               `json:"height"`
	Timestamp int64             `json:"timestamp"`
	Title     string            `json:"title,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
}

// NewRecorder records to path. The file is created at the first event, off the path
// that starts a session (creating a file on a busy disk costs a millisecond).
func NewRecorder(path string, width, height int, title string) *Recorder {
	r := &Recorder{path: path, start: time.Now()}
	r.header, _ = json.Marshal(asciicastHeader{Version: 2, Width: width, Height: height,
		Timestamp: r.start.Unix(), Title: title, Env: map[string]string{"TERM": "xterm-256color", "SHELL": "/bin/sh"}})
	return r
}

// open creates the file and writes the header; the caller holds r.mu.
func (r *Recorder) open() bool {
	if r.w != nil || r.err != nil {
		return r.err == nil
	}
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		r.err = fmt.Errorf("recording %s: %w", r.path, err)
		return false
	}
	r.f, r.w = f, bufio.NewWriterSize(f, 64<<10)
	r.w.Write(append(r.header, '\n'))
	return true
}

// Write records one output chunk. JSON strings must be valid UTF-8, and a pty read
// can end inside a multi-byte character, so the tail of an unfinished one waits for the
// next chunk.
func (r *Recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	data := append(r.carry, p...)
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	r.carry = append([]byte(nil), data[cut:]...)
	if cut > 0 && !r.full {
		limit := r.limit
		if limit == 0 {
			limit = DefaultRecordingLimit
		}
		if limit > 0 && r.n+int64(cut) > limit {
			r.full, r.carry = true, nil
			r.event("o", fmt.Sprintf("\r\n[corral: recording stopped after %d bytes of output; the session went on]\r\n", r.n))
			return len(p), nil
		}
		r.n += int64(cut)
		r.event("o", string(data[:cut]))
	}
	return len(p), nil
}

// Resize records a terminal size change.
func (r *Recorder) Resize(cols, rows int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.event("r", fmt.Sprintf("%dx%d", cols, rows))
}

func (r *Recorder) event(kind, data string) {
	if !r.open() {
		return
	}
	line, _ := json.Marshal([]any{time.Since(r.start).Seconds(), kind, data})
	if _, err := r.w.Write(append(line, '\n')); err != nil {
		r.err = err
	}
}

// Flush pushes buffered events to disk so a live replay can read them.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.open() {
		return r.err
	}
	if err := r.w.Flush(); err != nil && r.err == nil {
		r.err = err
	}
	return r.err
}

// Close writes what is left, including an unfinished character, and closes the file.
func (r *Recorder) Close() error {
	r.mu.Lock()
	if len(r.carry) > 0 {
		r.event("o", string(r.carry))
		r.carry = nil
	}
	r.mu.Unlock()
	err := r.Flush()
	if r.f != nil {
		if cerr := r.f.Close(); err == nil {
			err = cerr
		}
	}
	return err
}
