package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"google.golang.org/grpc"

	"github.com/otlpgate/otlpgate/internal/strictsink"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// sendSpans posts n one-span OTLP/HTTP requests to g, their span ids starting with tag, each
// of which must be answered 200, and returns the span ids.
func sendSpans(t *testing.T, g *gateway, tag byte, n int) []pcommon.SpanID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ids []pcommon.SpanID
	for i := range n {
		id := pcommon.SpanID{tag, byte(i + 1)}
		code, body, err := post(ctx, "http://"+g.http+"/v1/traces", "application/x-protobuf",
			oneSpan(bytes.Repeat([]byte{1}, 16), id[:], i))
		if err != nil || code != 200 {
			t.Fatalf("POST: %d %s %v", code, body, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// arrivedOnce waits until every id reached the upstream whose span counts got returns, then
// checks that each arrived exactly once.
func arrivedOnce(t *testing.T, name string, ids []pcommon.SpanID, got func() map[pcommon.SpanID]int) {
	t.Helper()
	testkit.WaitFor(t, "every span at "+name, func() bool {
		m := got()
		for _, id := range ids {
			if m[id] == 0 {
				return false
			}
		}
		return true
	})
	m := got()
	for _, id := range ids {
		if m[id] != 1 {
			t.Errorf("%s got span %s %d times, want once", name, id, m[id])
		}
	}
}

// Without a protocol key, a destination speaks standard OTLP/gRPC: pointed at a Collector (the
// strict sink, pdata's decoder), every span arrives once and the process stops with nothing
// lost.
func TestBinaryDefaultProtocolIsOTLP(t *testing.T) {
	bin := buildBinary(t)
	sink := startUpstream(t)
	g := startGateway(t, bin, "-dest", "name=gw,endpoint="+sink.Addr(), "-batch.max-age", "5ms")
	waitReady(t, g)
	ids := sendSpans(t, g, 0xd, 10)
	arrivedOnce(t, "the Collector", ids, sink.Spans)
	g.terminate(t)
	if g.exitErr != nil {
		t.Fatalf("exit: %v\n%s", g.exitErr, g.stderr.String())
	}
	if !strings.Contains(g.stderr.String(), "protocol=v1 mode=unary") {
		t.Errorf("the destination did not start as protocol=v1, mode=unary:\n%s", g.stderr.String())
	}
}

// Three destinations whose upstreams do not serve what they are sent: a grpc-go server without
// the OTLP trace service, a Collector asked for OTEP (protocol=otep), and the Collector's
// OTLP/HTTP server under a base path it does not serve (404). With and without the spool,
// every acknowledged span is kept for each: /status.json shows each destination down with an
// error saying what to change, and nothing is counted dropped. Then the first upstream gains the
// service (a Collector comes up on its address) and the file is fixed for the others (SIGHUP):
// every span reaches each upstream exactly once, and the process stops with nothing lost.
func TestBinaryUnservedUpstreamKeepsData(t *testing.T) {
	bin := buildBinary(t)
	for _, spool := range []bool{false, true} {
		t.Run(fmt.Sprintf("spool=%v", spool), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			bareAddr := ln.Addr().String()
			bare := grpc.NewServer() // serves nothing
			bareDone := make(chan struct{})
			go func() { defer close(bareDone); bare.Serve(ln) }()
			t.Cleanup(func() { bare.Stop(); <-bareDone })
			collector := startUpstream(t)
			web := startCollectorHTTP(t)

			path := filepath.Join(t.TempDir(), "destinations")
			write := func(lines ...string) {
				t.Helper()
				if err := os.WriteFile(path+".tmp", []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(path+".tmp", path); err != nil {
					t.Fatal(err)
				}
			}
			const timers = ",retry-initial=20ms,retry-max=200ms"
			bareSpec := "name=bare,endpoint=" + bareAddr + timers
			write(bareSpec,
				"name=otep,endpoint="+collector.Addr()+",protocol=otep"+timers,
				"name=web,endpoint="+web.url+"/otlp"+timers)
			// A replaced destination drains for its share of this before its replacement takes
			// over what it could not deliver.
			args := []string{"-dest.file", path, "-dest.file.poll-interval", "0", "-batch.max-age", "5ms",
				"-status.interval", "100ms", "-shutdown.timeout", "2s"}
			if spool {
				args = append(args, "-spool.dir", filepath.Join(t.TempDir(), "spool"))
			}
			g := startGateway(t, bin, args...)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("otlpgate's log:\n%s", g.stderr.String())
				}
			})
			waitReady(t, g)
			ids := sendSpans(t, g, 0xe, 10)

			want := map[string]string{
				"bare": "does not serve /opentelemetry.proto.collector.trace.v1.TraceService/Export (Unimplemented: unknown service",
				"otep": "protocol=otep is otlpgate's own service",
				"web":  "does not serve POST " + web.url + "/otlp/v1/traces (HTTP 404)",
			}
			var st statusDoc
			testkit.WaitFor(t, "every destination shown down with what to change", func() bool {
				st = fetchStatus(t, g.admin)
				n := 0
				for _, d := range st.Destinations {
					if w, ok := want[d.Name]; ok && d.State == "down" && strings.Contains(d.LastError, w) {
						n++
					}
				}
				return n == len(want)
			})
			for _, d := range st.Destinations {
				t.Logf("%s: %s: %s", d.Name, d.State, d.LastError)
			}
			if n := scrape(t, g.admin, "otlpgate_client_unserved_signals"); n != 3 {
				t.Errorf("otlpgate_client_unserved_signals sums to %v, want 3", n)
			}
			dropped := func() float64 {
				n := scrape(t, g.admin, "otlpgate_client_dropped_items_total") + scrape(t, g.admin, "otlpgate_spool_dropped_records_total")
				if spool {
					// A destination a reload replaced stops reading the spool and gives up what it
					// holds, counted by the client as shutdown_*; its records stay unfinished in the
					// spool for the replacement, which delivers them (checked span by span).
					for _, r := range []string{"shutdown_queued", "shutdown_pending", "shutdown_retry"} {
						n -= scrape(t, g.admin, "otlpgate_client_dropped_items_total", `reason="`+r+`"`)
					}
				}
				return n
			}
			if n := dropped(); n != 0 {
				t.Errorf("%v items or records dropped for upstreams that do not serve them", n)
			}

			// The first upstream gains the service; the file is fixed for the others.
			bare.Stop()
			<-bareDone
			var fixed *strictsink.Sink
			for range 100 { // the port is ours; a busy kernel may take a moment to release it
				if fixed, err = strictsink.Start(bareAddr); err == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(fixed.Close)
			write(bareSpec, "name=otep,endpoint="+collector.Addr()+timers, "name=web,endpoint="+web.url+timers)
			g.cmd.Process.Signal(syscall.SIGHUP)
			arrivedOnce(t, "the upstream that gained the service", ids, fixed.Spans)
			arrivedOnce(t, "the Collector once asked for OTEP", ids, collector.Spans)
			arrivedOnce(t, "the OTLP/HTTP Collector", ids, func() map[pcommon.SpanID]int { m, _ := web.spans(); return m })
			testkit.WaitFor(t, "no destination down", func() bool {
				for _, d := range fetchStatus(t, g.admin).Destinations {
					if d.State == "down" {
						return false
					}
				}
				return scrape(t, g.admin, "otlpgate_client_unserved_signals") == 0
			})
			if n := dropped(); n != 0 {
				t.Errorf("%v items or records dropped", n)
			}
			g.terminate(t)
			if g.exitErr != nil {
				t.Fatalf("exit: %v\n%s", g.exitErr, g.stderr.String())
			}
			if logs := g.stderr.String(); !strings.Contains(logs, "the upstream does not serve what this destination sends") ||
				!strings.Contains(logs, "lost=false") {
				t.Errorf("the log lacks the unserved upstream or the clean stop:\n%s", logs)
			}
		})
	}
}
