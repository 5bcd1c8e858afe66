package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkGatewayAddedLatency alternates the same small non-streamed call made
// directly to a loopback upstream and through the gateway, and reports the added p50
// (goal: at most 2 ms per request).
func BenchmarkGatewayAddedLatency(b *testing.B) {
	h := newHarness(b, nil)
	direct := h.upSrv.URL + "/v1/messages"
	via := h.env()["ANTHROPIC_BASE_URL"] + "/v1/messages"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	call := func(u string) time.Duration {
		t0 := time.Now()
		resp, err := client.Post(u, "application/json", strings.NewReader(`{"model":"m"}`))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(t0)
	}
	call(direct)
	call(via)
	var d, g []time.Duration
	b.ResetTimer()
	for range b.N {
		d = append(d, call(direct))
		g = append(g, call(via))
	}
	b.StopTimer()
	pd, pg := p50(d), p50(g)
	b.ReportMetric(float64(pd.Microseconds())/1000, "direct-p50-ms")
	b.ReportMetric(float64(pg.Microseconds())/1000, "gateway-p50-ms")
	b.ReportMetric(float64((pg-pd).Microseconds())/1000, "added-p50-ms")
}

func p50(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkGatewayStreamThroughput streams a 32 MiB SSE response (content deltas,
// usage at the start and the end, as Anthropic sends) directly and through the
// gateway, and reports the gateway's throughput as a share of direct (goal: ≥ 0.90).
func BenchmarkGatewayStreamThroughput(b *testing.B) {
	const size = 32 << 20
	var stream bytes.Buffer
	stream.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n")
	delta := fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", strings.Repeat("tokens ", 60))
	for stream.Len() < size {
		stream.WriteString(delta)
	}
	stream.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":99}}\n\n")
	body := stream.Bytes()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	defer up.Close()
	h := newHarness(b, nil)
	if err := h.gw.SetUpstream(Upstream{Kind: Anthropic, URL: up.URL}); err != nil {
		b.Fatal(err)
	}
	// Keep-alive connections, as an agent's SDK uses: the next fetch reuses both the
	// session's connection and the gateway's upstream one.
	client := &http.Client{Transport: &http.Transport{}}
	fetch := func(u string) time.Duration {
		t0 := time.Now()
		resp, err := client.Post(u, "application/json", strings.NewReader(`{"stream":true}`))
		if err != nil {
			b.Fatal(err)
		}
		n, cerr := io.Copy(io.Discard, resp.Body)
		if cerr != nil {
			b.Log(cerr)
		}
		resp.Body.Close()
		if n != int64(len(body)) {
			b.Fatalf("read %d bytes of %d", n, len(body))
		}
		return time.Since(t0)
	}
	var d, g time.Duration
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for range b.N {
		d += fetch(up.URL + "/v1/messages")
		g += fetch(h.env()["ANTHROPIC_BASE_URL"] + "/v1/messages")
	}
	b.StopTimer()
	mib := float64(len(body)*b.N) / (1 << 20)
	b.ReportMetric(mib/d.Seconds(), "direct-MiB/s")
	b.ReportMetric(mib/g.Seconds(), "gateway-MiB/s")
	b.ReportMetric(d.Seconds()/g.Seconds(), "gateway/direct")
	if c := h.lastCall(b); c.Output != 99 {
		b.Errorf("streamed call metered %+v", c)
	}
}

// BenchmarkGatewayPacedStream streams as a provider does: one event at a time, each
// flushed, at 1000 events/s (a fast model emits well under that). This is the
// throughput an agent sees; the gateway's share of direct should be ≥ 0.90.
func BenchmarkGatewayPacedStream(b *testing.B) {
	const events = 300
	delta := []byte(fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", strings.Repeat("tok ", 20)))
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n")
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for range events {
			<-tick.C
			w.Write(delta)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":300}}\n\n")
	}))
	defer up.Close()
	h := newHarness(b, nil)
	if err := h.gw.SetUpstream(Upstream{Kind: Anthropic, URL: up.URL}); err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	fetch := func(u string) (time.Duration, int64) {
		t0 := time.Now()
		resp, err := client.Post(u, "application/json", strings.NewReader(`{"stream":true}`))
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(t0), n
	}
	var d, g time.Duration
	var bytesD, bytesG int64
	for range b.N {
		t, n := fetch(up.URL + "/v1/messages")
		d, bytesD = d+t, bytesD+n
		t, n = fetch(h.env()["ANTHROPIC_BASE_URL"] + "/v1/messages")
		g, bytesG = g+t, bytesG+n
	}
	if bytesD != bytesG {
		b.Fatalf("direct read %d bytes, gateway %d", bytesD, bytesG)
	}
	b.ReportMetric(float64(bytesD)/(1<<10)/d.Seconds(), "direct-KiB/s")
	b.ReportMetric(float64(bytesG)/(1<<10)/g.Seconds(), "gateway-KiB/s")
	b.ReportMetric(d.Seconds()/g.Seconds(), "gateway/direct")
}
