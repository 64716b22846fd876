package uds

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// statsConn returns a connection (no socket) that has replayed stats_basic.bin up to its
// VIEW_UNREGISTER, so four views aggregate, and the capture's first STATS_RECORD frame (two
// tags, two attachments, three measurements), already recorded once more to create its series.
func statsConn(tb testing.TB) (*conn, []byte) {
	tb.Helper()
	srv, err := New(DefaultConfig(), &testkit.Discard{}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	data := readFile(tb, "stats_basic.bin")
	// Offsets from testdata/stats_basic.decoded.txt.
	const recordAt, recordEnd, unregisterAt = 579, 724, 795
	c := newConn(srv)
	c.feed(data[:unregisterAt])
	record := bytes.Clone(data[recordAt:recordEnd])
	c.feed(record)
	if c.proc == nil || len(c.proc.mu.views) != 4 {
		tb.Fatal("views not registered")
	}
	return c, record
}

func BenchmarkStatsRecord(b *testing.B) {
	c, record := statsConn(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(record)))
	for b.Loop() {
		c.feed(record)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkStatsRecordBatch hands 100 records per read, as a busy client's socket delivers them.
func BenchmarkStatsRecordBatch(b *testing.B) {
	c, record := statsConn(b)
	batch := bytes.Repeat(record, 100)
	b.ReportAllocs()
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		c.feed(batch)
	}
	b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "msgs/s")
}

// lastFrame returns the last frame of a clean capture and how many frames precede it.
func lastFrame(tb testing.TB, data []byte) []byte {
	tb.Helper()
	s := ocdaemon.NewSplitter(4 << 20)
	s.Feed(data)
	var f ocdaemon.Frame
	off, last := 0, 0
	for s.Next(&f) {
		last = off
		off += f.HeaderLen + len(f.Payload)
	}
	s.Close()
	if off != len(data) {
		tb.Fatal("capture has gaps")
	}
	return data[last:]
}

// traceConn returns a connection that has replayed capture, whose last message is a
// TRACE_EXPORT, and that frame with its span count.
func traceConn(tb testing.TB, capture string) (*conn, []byte, int) {
	tb.Helper()
	srv, err := New(DefaultConfig(), &testkit.Discard{}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	data := readFile(tb, capture)
	c := newConn(srv)
	c.feed(data)
	frame := bytes.Clone(lastFrame(tb, data))
	var conv spanConverter
	if err := conv.convert(frame[bytes.IndexByte(frame, '['):], 0); err != nil {
		tb.Fatal(err)
	}
	return c, frame, len(conv.spans)
}

func BenchmarkTraceExport(b *testing.B) {
	c, frame, spans := traceConn(b, "trace_export.bin")
	before := counter(spansDropped)
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		c.feed(frame)
	}
	if counter(spansDropped) != before {
		b.Fatal("spans dropped")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(b.N*spans)/b.Elapsed().Seconds(), "spans/s")
}

// BenchmarkSocketStatsRecord measures the whole intake on one event loop: a client writes
// STATS_RECORDs over a real unix socket in 64 KiB writes, the loop splits, decodes and aggregates
// them.
func BenchmarkSocketStatsRecord(b *testing.B) {
	_, record := statsConn(b)
	data := readFile(b, "stats_basic.bin")
	h := start(b, func(c *Config) { c.Loops = 1 })
	conn := h.dial()
	defer conn.Close()
	write(b, conn, data[:795], 0) // definitions up to VIEW_UNREGISTER
	perWrite := (64 << 10) / len(record)
	batch := bytes.Repeat(record, perWrite)
	before := counter(messagesByType[ocdaemon.StatsRecord])
	b.ReportAllocs()
	b.SetBytes(int64(len(batch)))
	b.ResetTimer()
	for range b.N {
		write(b, conn, batch, 0)
	}
	want := before + 2 + float64(b.N*perWrite)
	testkit.WaitFor(b, "the records", func() bool { return counter(messagesByType[ocdaemon.StatsRecord]) >= want })
	b.ReportMetric(float64(b.N*perWrite)/b.Elapsed().Seconds(), "msgs/s")
}
