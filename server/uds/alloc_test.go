//go:build !race

package uds

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// TestStatsRecordAllocs proves that a STATS_RECORD goes from the bytes of a read through the
// frame splitter, the payload decoder and the registry into every view's aggregate (count, sum,
// distribution, last value, with tags and attachments) without allocating, once its series
// exist, timeout bookkeeping included.
func TestStatsRecordAllocs(t *testing.T) {
	c, record := statsConn(t)
	// noteRead is what OnTraffic adds when timeouts are on.
	allocs := testing.AllocsPerRun(1000, func() {
		c.feed(record)
		c.noteRead(1)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per STATS_RECORD", allocs)
	}
	// The record really was aggregated each time: the capture's own, statsConn's, the warm-up
	// run and 1000 measured runs.
	v := c.proc.mu.views["example.com/requests_count"]
	for _, s := range v.mu.series {
		if s.count != 1003 {
			t.Fatalf("count %d, want 1003", s.count)
		}
	}
}

// TestTraceExportAllocs proves that a TRACE_EXPORT goes from the bytes of a read through the
// frame splitter, the span converter and its encoder to the data path without allocating, once
// a converter has seen an export of its size (the captured one: three spans with attributes,
// stack traces and a status).
func TestTraceExportAllocs(t *testing.T) {
	c, frame, spans := traceConn(t, "trace_export.bin")
	if spans != 3 {
		t.Fatalf("%d spans in the capture's last export, want 3", spans)
	}
	accepted := itemsCounters[0][consumeAccepted]
	before, dropped := counter(accepted), counter(spansDropped)
	c.feed(frame) // warm-up: the converter's slices and arena grow to the export's size
	allocs := testing.AllocsPerRun(1000, func() {
		c.feed(frame)
		c.noteRead(1)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per TRACE_EXPORT", allocs)
	}
	// The warm-up, the run AllocsPerRun adds and 1000 measured runs, every span handed over.
	if got := counter(accepted) - before; got != 1002*3 {
		t.Fatalf("%v spans accepted, want %d", got, 1002*3)
	}
	if counter(spansDropped) != dropped {
		t.Fatal("spans dropped")
	}
}

// TestNetEngineReadAllocs proves that with -uds.engine=net a TRACE_EXPORT goes from the socket
// through the connection's read loop (a read, the Splitter, the converter, the timeouts'
// stamp) to the data path without allocating, counted over the whole process: the client's
// write and the server's goroutine both.
func TestNetEngineReadAllocs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Listen = socketPath(t)
	cfg.Engine = EngineNet
	cfg.IdleTimeout, cfg.ReadTimeout = time.Minute, time.Minute
	sink := &testkit.Discard{}
	srv, err := New(cfg, sink, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	data := readFile(t, "trace_export.bin")
	frame := bytes.Clone(lastFrame(t, data))
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: cfg.Listen, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The capture as sent (its process's init first), then the export once more: the
	// converter has grown to its size.
	send := func(b []byte, want int64) {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		for i := 0; sink.Items() < want; i++ {
			if i == 10_000_000 {
				t.Fatalf("%d items arrived, want %d", sink.Items(), want)
			}
			runtime.Gosched()
		}
	}
	send(data, 1)
	base := sink.Items()
	send(frame, base+3)
	n := sink.Items()
	allocs := testing.AllocsPerRun(500, func() {
		n += 3
		send(frame, n)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per TRACE_EXPORT over the socket", allocs)
	}
	if got := sink.Items(); got != base+3*502 {
		t.Fatalf("%d spans arrived after the capture, want %d", got-base, 3*502)
	}
}
