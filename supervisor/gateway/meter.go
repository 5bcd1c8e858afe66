package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Call is one metered model call: who made it, what it cost in tokens by category
// (priced differently, so kept apart), how long it took and what the provider said
// about its rate limits.
type Call struct {
	Session  string    `json:"session"`
	Upstream string    `json:"upstream"` // kind
	Path     string    `json:"path"`
	Model    string    `json:"model"`
	Status   int       `json:"status"`
	Streamed bool      `json:"streamed"`
	Start    time.Time `json:"start"`
	// Input counts uncached input tokens; CacheRead and CacheWrite the input tokens
	// read from and written to the provider's prompt cache. (OpenAI reports cached
	// tokens inside its input count; the gateway moves them to CacheRead.)
	Input      int64         `json:"input"`
	Output     int64         `json:"output"`
	CacheRead  int64         `json:"cache_read"`
	CacheWrite int64         `json:"cache_write"`
	FirstByte  time.Duration `json:"first_byte"` // until the response's headers
	Latency    time.Duration `json:"latency"`    // until its end
	Limits     RateLimits    `json:"limits"`
}

// Tokens is the call's total token count.
func (c Call) Tokens() int64 { return c.Input + c.Output + c.CacheRead + c.CacheWrite }

type meterKey struct{}

// meter follows one call's response as it passes through, without holding it up.
type meter struct {
	g     *Gateway
	call  Call
	start time.Time
	once  sync.Once
	usage usageAcc
}

// meterResponse wraps the upstream's response body so its usage is read as the bytes
// go by to the session: an SSE stream line by line, a JSON body once it has ended.
func meterResponse(resp *http.Response) error {
	m, _ := resp.Request.Context().Value(meterKey{}).(*meter)
	if m == nil {
		return nil
	}
	m.call.Status = resp.StatusCode
	m.call.FirstByte = time.Since(m.start)
	m.call.Limits = parseRateLimits(resp.Header, m.g.cfg.Now())
	m.usage.kind = m.call.Upstream
	ct := resp.Header.Get("Content-Type")
	var sink io.Writer
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		m.call.Streamed = true
		sink = &sseScanner{onData: m.usage.event}
	default:
		sink = &jsonTail{limit: 16 << 20}
	}
	resp.Body = &meteredBody{rc: resp.Body, sink: sink, m: m, left: resp.ContentLength}
	return nil
}

// meteredBody tees what is read into the meter's parser and reports the call at its
// end or Close, whichever comes first.
type meteredBody struct {
	rc   io.ReadCloser
	sink io.Writer
	m    *meter
	left int64 // bytes to come when the length is known, else -1
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.sink.Write(p[:n])
	}
	if b.left >= 0 {
		b.left -= int64(n)
	}
	// A body of known length ends with its last byte: report the call before that
	// byte is passed on, so whatever the call decides (a quota hold) is in place
	// before the session can send its next request.
	if err == io.EOF || b.left == 0 {
		b.finish()
	}
	return n, err
}

func (b *meteredBody) Close() error {
	err := b.rc.Close()
	b.finish()
	return err
}

func (b *meteredBody) finish() {
	b.m.once.Do(func() {
		if j, ok := b.sink.(*jsonTail); ok && !j.over {
			b.m.usage.event(j.buf.Bytes())
		}
		c := b.m.call
		c.Latency = time.Since(b.m.start)
		u := b.m.usage
		c.Model, c.Input, c.Output, c.CacheRead, c.CacheWrite = u.model, u.input(), u.output, u.cacheRead(), u.cacheWrite
		if b.m.g.cfg.OnCall != nil {
			b.m.g.cfg.OnCall(c)
		}
	})
}

// jsonTail keeps a non-streamed body, up to limit, to read its usage at the end.
type jsonTail struct {
	buf   bytes.Buffer
	limit int
	over  bool
}

func (j *jsonTail) Write(p []byte) (int, error) {
	if !j.over {
		if j.buf.Len()+len(p) > j.limit {
			j.over, j.buf = true, bytes.Buffer{}
		} else {
			j.buf.Write(p)
		}
	}
	return len(p), nil
}

// sseScanner splits a server-sent event stream into lines as bytes arrive and hands
// the payload of each `data:` line that may carry usage or the model to onData.
type sseScanner struct {
	line      []byte
	onData    func([]byte)
	haveModel bool
}

func (s *sseScanner) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(s.line)+len(p) <= 1<<20 { // a line longer than this carries no usage
				s.line = append(s.line, p...)
			}
			break
		}
		s.line = append(s.line, p[:i]...)
		s.handle(bytes.TrimRight(s.line, "\r"))
		s.line = s.line[:0]
		p = p[i+1:]
	}
	return n, nil
}

var (
	dataPrefix = []byte("data:")
	usageKey   = []byte(`"usage"`)
	usageNull  = []byte(`"usage":null`)
	modelKey   = []byte(`"model"`)
)

func (s *sseScanner) handle(line []byte) {
	if !bytes.HasPrefix(line, dataPrefix) {
		return
	}
	data := bytes.TrimSpace(line[len(dataPrefix):])
	// Most lines are content deltas: parsing each would cost throughput for nothing.
	// (OpenAI chunks asked to include usage carry "usage":null until the last.)
	hasUsage := bytes.Contains(data, usageKey) && !bytes.Contains(data, usageNull)
	if hasUsage || (!s.haveModel && bytes.Contains(data, modelKey)) {
		s.haveModel = true
		s.onData(data)
	}
}

// usageJSON is the union of the usage objects of Anthropic Messages, OpenAI Chat
// Completions and OpenAI Responses.
type usageJSON struct {
	InputTokens      *int64 `json:"input_tokens"`
	OutputTokens     *int64 `json:"output_tokens"`
	CacheCreation    *int64 `json:"cache_creation_input_tokens"`
	CacheRead        *int64 `json:"cache_read_input_tokens"`
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
	PromptDetails    *struct {
		Cached *int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputDetails *struct {
		Cached *int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// payloadJSON is the union of the bodies and stream events that carry usage:
// a whole message or completion, Anthropic's message_start (message.usage) and
// message_delta (usage), an OpenAI chunk (usage on the last), and the Responses
// API's response.completed (response.usage).
type payloadJSON struct {
	Model    string       `json:"model"`
	Usage    *usageJSON   `json:"usage"`
	Message  *payloadJSON `json:"message"`
	Response *payloadJSON `json:"response"`
}

// usageAcc accumulates what a response reports. Stream events repeat counts
// cumulatively (message_delta's output_tokens is the total so far), so a later value
// replaces an earlier one rather than adding to it.
type usageAcc struct {
	kind                           string
	model                          string
	rawInput, output, cached       int64
	cacheWrite, cacheReadAnthropic int64
}

func (u *usageAcc) event(data []byte) {
	var p payloadJSON
	if json.Unmarshal(data, &p) != nil {
		return
	}
	u.apply(&p)
	if p.Message != nil {
		u.apply(p.Message)
	}
	if p.Response != nil {
		u.apply(p.Response)
	}
}

func (u *usageAcc) apply(p *payloadJSON) {
	if p.Model != "" && u.model == "" {
		u.model = p.Model
	}
	us := p.Usage
	if us == nil {
		return
	}
	set := func(dst *int64, v *int64) {
		if v != nil && *v > 0 {
			*dst = *v
		}
	}
	set(&u.rawInput, us.InputTokens)
	set(&u.rawInput, us.PromptTokens)
	set(&u.output, us.OutputTokens)
	set(&u.output, us.CompletionTokens)
	set(&u.cacheWrite, us.CacheCreation)
	set(&u.cacheReadAnthropic, us.CacheRead)
	if us.PromptDetails != nil {
		set(&u.cached, us.PromptDetails.Cached)
	}
	if us.InputDetails != nil {
		set(&u.cached, us.InputDetails.Cached)
	}
}

// input is the uncached input: Anthropic reports it so; OpenAI counts cached tokens
// inside its input figure.
func (u *usageAcc) input() int64 {
	if u.kind == OpenAI {
		return max(u.rawInput-u.cached, 0)
	}
	return u.rawInput
}

func (u *usageAcc) cacheRead() int64 {
	if u.kind == OpenAI {
		return u.cached
	}
	return u.cacheReadAnthropic
}
