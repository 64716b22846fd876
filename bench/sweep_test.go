package bench

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

func TestParseSweepRates(t *testing.T) {
	f := func(in string, want []float64) {
		t.Helper()
		got, err := ParseSweepRates(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseSweepRates(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	f("1k,5k,20k,100k,closed", []float64{1000, 5000, 20000, 100000, 0})
	f("250, 1.5k ,2M", []float64{250, 1500, 2e6})
	for _, bad := range []string{"", "0", "-5k", "fast", "5x", "k"} {
		if got, err := ParseSweepRates(bad); err == nil {
			t.Errorf("ParseSweepRates(%q) = %v, want an error", bad, got)
		}
	}
}

func TestFormatRate(t *testing.T) {
	f := func(v float64, want string) {
		t.Helper()
		if got := FormatRate(v); got != want {
			t.Errorf("FormatRate(%v) = %q, want %q", v, got, want)
		}
		if v > 0 && !strings.Contains(want, ".") {
			if back, err := ParseSweepRates(want); err != nil || back[0] != v {
				t.Errorf("ParseSweepRates(%q) = %v, %v; want %v", want, back, err, v)
			}
		}
	}
	f(0, "closed")
	f(250, "250")
	f(1000, "1k")
	f(100000, "100k")
	f(1500, "1.5k")
	f(3e6, "3M")
	f(1181500, "1.18M")
}

// The schedule in requests per second: a rate of spans in batches of a shape's size.
func TestBatchRate(t *testing.T) {
	for _, c := range []struct {
		spans float64
		shape otlpgen.Shape
		want  float64
	}{{5000, otlpgen.Small, 50}, {1000, otlpgen.Semconv, 1}, {20000, otlpgen.Semconv, 20}, {0, otlpgen.Small, 0}} {
		if got := batchRate(c.spans, c.shape); got != c.want {
			t.Errorf("batchRate(%v, %d spans) = %v, want %v", c.spans, c.shape.Spans, got, c.want)
		}
	}
	// A phase of a rate sends rate x duration requests, at least one; the closed loop is bound
	// by the duration instead.
	if n, until := loadCount(50, 10*time.Second); n != 500 || until != 0 {
		t.Errorf("loadCount(50/s, 10s) = %d, %v", n, until)
	}
	if n, until := loadCount(1, 300*time.Millisecond); n != 1 || until != 0 {
		t.Errorf("loadCount(1/s, 300ms) = %d, %v", n, until)
	}
	if n, until := loadCount(0, time.Second); n < 1<<40 || until != time.Second {
		t.Errorf("loadCount(closed, 1s) = %d, %v", n, until)
	}
}

func TestPercentile(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0, time.Millisecond}, {0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		if got := Percentile(lat, c.p); got != c.want {
			t.Errorf("Percentile(1..100 ms, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := Percentile(nil, 0.99); got != 0 {
		t.Errorf("Percentile(nil) = %v", got)
	}
	if got := Percentile(lat[:1], 0.99); got != time.Millisecond {
		t.Errorf("Percentile of one = %v", got)
	}
}

// The tables: idle, then per shape a row per intake and rate, a peer's CPU with its ratio to
// otlpgate's, the closed loop with the rate it reached, a cell without a figure as "-" with its
// error below.
func TestWriteSweep(t *testing.T) {
	cell := func(target, intake string, rate float64, spans int64, cpu, wall, p50, p99 time.Duration, rss int64) SweepCell {
		return SweepCell{AnchorCell: AnchorCell{Target: target, Intake: intake, Compression: "none", Spans: spans, CPU: cpu,
			Wall: wall, P50: p50, P99: p99, PeakRSS: rss << 20, Sent: int(spans / 100)}, Shape: "small", Rate: rate}
	}
	r := &SweepResult{
		Config: SweepConfig{Shapes: []SweepShape{{"small", otlpgen.Small}}, Intakes: []string{"grpc"}, Rates: []float64{5000, 0},
			Duration: 10 * time.Second, Warmup: 2 * time.Second, MaxInFlight: 8, Idle: time.Minute, Floors: []string{AnchorRelayCopy}},
		Targets: []string{"otlpgate", "otelcol-batch", AnchorRelayCopy},
		Idle: []SweepIdle{{Target: "otlpgate", CPU: 30 * time.Millisecond, Wall: time.Minute, Wakeups: 600, Threads: 9, RSS: 20 << 20},
			{Target: "otelcol-batch", Err: "exited"}},
		Cells: []SweepCell{
			cell("otlpgate", "grpc", 5000, 50000, 200*time.Millisecond, 10*time.Second, 1500*time.Microsecond, 4*time.Millisecond, 25),
			cell("otelcol-batch", "grpc", 5000, 50000, 500*time.Millisecond, 10*time.Second, 201*time.Millisecond, 260*time.Millisecond, 90),
			cell("otlpgate", "grpc", 0, 4000000, 4*time.Second, 10*time.Second, 800*time.Microsecond, 3*time.Millisecond, 40),
			cell(AnchorRelayCopy, "grpc", 5000, 50000, 150*time.Millisecond, 10*time.Second, 900*time.Microsecond, 2*time.Millisecond, 9),
		},
	}
	r.Cells = append(r.Cells, SweepCell{AnchorCell: AnchorCell{Target: "otelcol-batch", Intake: "grpc", Err: "bench: 127.0.0.1:1 never listened"}, Shape: "small"})
	var b bytes.Buffer
	WriteSweep(&b, r)
	want := `floor: tcp-relay-copy, a TCP relay from the load to the sink (each byte read into a 256 KiB buffer and written out) on the same load: no proxy that forwards these requests one by one costs less at that rate

| idle, no traffic, 1m0s | CPU | share of a core | wake-ups/s | threads | peak RSS MiB |
| --- | --- | --- | --- | --- | --- |
| otlpgate | 30.0 ms | 0.050% | 10.0 | 9 | 20 |
| otelcol-batch | - | - | - | - | - |

small batches (100 spans a request)

| intake | spans/s | otlpgate CPU-µs/span | otelcol-batch (x otlpgate) | tcp-relay-copy (x otlpgate) | otlpgate p50 / p99 ms | otelcol-batch p50 / p99 ms | tcp-relay-copy p50 / p99 ms | peak RSS MiB (otlpgate / otelcol-batch / tcp-relay-copy) |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
| OTLP/gRPC | 5k | 4.00 | 10.00 (2.5x) | 3.00 (0.8x) | 1.50 / 4.00 | 201.00 / 260.00 | 0.90 / 2.00 | 25 / 90 / 9 |
| OTLP/gRPC | closed | 1.00 (400k/s) | - | - | 0.80 / 3.00 | - | - | 40 / - / - |

otelcol-batch small grpc closed: bench: 127.0.0.1:1 never listened

idle otelcol-batch: exited
`
	got := b.String()
	if _, rest, ok := strings.Cut(got, "\n"); !ok || rest != want || !strings.HasPrefix(got, "sweep: each rate an open loop (closed: 8 requests in flight back to back) for 10s after 2s warm-up") {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
