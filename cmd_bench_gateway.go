package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"corral/supervisor/gateway"
)

// benchGateway is `corral bench gateway`: the same calls made directly to a loopback
// upstream and through the model gateway, alternating, for the latency the gateway
// adds per request and the throughput of a streamed response.
func benchGateway(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench gateway", stderr)
	requests := fs.Int("requests", 1000, "small non-streamed calls each way, for the added p50")
	streams := fs.Int("streams", 5, "streamed responses each way")
	events := fs.Int("events", 300, "events per streamed response, one per --pace")
	pace := fs.Duration("pace", time.Millisecond, "time between streamed events (0: as fast as loopback goes)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *requests < 1 || *streams < 1 || *events < 1 {
		return badInput("bench gateway: --requests, --streams and --events want at least 1")
	}
	answer := []byte(`{"model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":21,"output_tokens":17}}`)
	delta := []byte(fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", strings.Repeat("tok ", 20)))
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.RawQuery, "stream") {
			w.Header().Set("Content-Type", "application/json")
			w.Write(answer)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"m\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n")
		var tick <-chan time.Time
		if *pace > 0 {
			t := time.NewTicker(*pace)
			defer t.Stop()
			tick = t.C
		}
		for range *events {
			if tick != nil {
				<-tick
			}
			w.Write(delta)
			w.(http.Flusher).Flush()
		}
	})
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	upSrv := &http.Server{Handler: upstream}
	go upSrv.Serve(upLn)
	defer upSrv.Close()
	var metered atomic.Int64
	gw, err := gateway.New(gateway.Config{
		Upstreams: []gateway.Upstream{{Kind: gateway.Anthropic, URL: "http://" + upLn.Addr().String()}},
		OnCall:    func(gateway.Call) { metered.Add(1) },
	})
	if err != nil {
		return err
	}
	gwLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go gw.Serve("bench-1", gwLn)
	defer gwLn.Close()

	direct := "http://" + upLn.Addr().String() + "/v1/messages"
	via := "http://" + gwLn.Addr().String() + "/anthropic/v1/messages"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	fetch := func(url string) (time.Duration, int64, error) {
		t0 := time.Now()
		resp, err := client.Post(url, "application/json", strings.NewReader(`{"model":"m"}`))
		if err != nil {
			return 0, 0, err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(t0), n, err
	}
	fmt.Fprintf(stdout, "corral bench gateway — loopback upstream, %s\n\n", hostLine())
	var d, g []time.Duration
	for range *requests {
		td, _, err := fetch(direct)
		if err != nil {
			return err
		}
		tg, _, err := fetch(via)
		if err != nil {
			return err
		}
		d, g = append(d, td), append(g, tg)
	}
	pd, pg := pct(d, 50), pct(g, 50)
	added := pg - pd
	var sd, sg time.Duration
	var bytes int64
	for range *streams {
		td, n, err := fetch(direct + "?stream")
		if err != nil {
			return err
		}
		tg, m, err := fetch(via + "?stream")
		if err != nil {
			return err
		}
		if n != m {
			return fmt.Errorf("bench gateway: streamed %d bytes directly but %d through the gateway", n, m)
		}
		sd, sg, bytes = sd+td, sg+tg, bytes+n
	}
	ratio := sd.Seconds() / sg.Seconds()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEASURE\tDIRECT\tGATEWAY\tRESULT\tGOAL")
	fmt.Fprintf(tw, "p50 of %d calls\t%s\t%s\tadded %s\t%s\n", *requests, ms(pd), ms(pg), ms(added), met(added <= 2*time.Millisecond, "≤ 2 ms"))
	fmt.Fprintf(tw, "%d streams × %d events, %s apart\t%.0f KiB/s\t%.0f KiB/s\t%.2f× direct\t%s\n", *streams, *events, *pace,
		float64(bytes)/1024/sd.Seconds(), float64(bytes)/1024/sg.Seconds(), ratio, met(ratio >= 0.9, "≥ 0.90×"))
	tw.Flush()
	fmt.Fprintf(stdout, "\n%d calls metered through the gateway\n", metered.Load())
	return nil
}

func met(ok bool, goal string) string {
	if ok {
		return goal + " met"
	}
	return goal + " NOT met"
}
