package client

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
)

// framer is a destination that frames every batch as an OTEP stream destination does, and
// keeps what the framing refused and the v1 bodies the frames carried.
type framer struct {
	mu      sync.Mutex
	refused int
	bodies  []byte
}

func (f *framer) Name() string { return "framer" }

func (f *framer) Enqueue(b *pipeline.Batch) error {
	fr, err := newFrame(7, b.Payload)
	if err != nil {
		f.mu.Lock()
		f.refused++
		f.mu.Unlock()
		b.Done(false)
		return nil
	}
	bufs, err := newFrameCodec().Marshal(fr)
	fr.unref()
	if err != nil {
		panic(err)
	}
	otep := bufs.Materialize()
	bufs.Free()
	// What a gateway does with it: scan it fully and take the entries back.
	if _, err := fastpath.ScanRequest(b.Signal, otep, fastpath.LayoutOTEP, fastpath.DepthFull); err != nil {
		panic(fmt.Sprintf("framed batch does not scan: %v", err))
	}
	v1, id, err := fastpath.AppendV1(nil, otep)
	if err != nil || id != 7 {
		panic(fmt.Sprintf("framed batch does not convert back: id %d, %v", id, err))
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, v1...)
	f.mu.Unlock()
	b.Done(true)
	return nil
}

// oneItemBody is a small v1 body of sig with one item, distinct per seed.
func oneItemBody(t *testing.T, sig fastpath.Signal, seed uint64) []byte {
	t.Helper()
	var m interface{ MarshalVT() ([]byte, error) }
	switch sig {
	case fastpath.Traces:
		return traceBody(fmt.Sprint("s", seed), 1, int(seed%50))
	case fastpath.Metrics:
		m = &colmetricsv1.ExportMetricsServiceRequest{ResourceMetrics: []*metricsv1.ResourceMetrics{{ScopeMetrics: []*metricsv1.ScopeMetrics{{
			Metrics: []*metricsv1.Metric{{Name: "m", Data: &metricsv1.Metric_Sum{Sum: &metricsv1.Sum{
				DataPoints: []*metricsv1.NumberDataPoint{{TimeUnixNano: seed}}}}}}}}}}}
	default:
		m = &collogsv1.ExportLogsServiceRequest{ResourceLogs: []*logsv1.ResourceLogs{{ScopeLogs: []*logsv1.ScopeLogs{{
			LogRecords: []*logsv1.LogRecord{{TimeUnixNano: seed}}}}}}}
	}
	b, err := m.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Invariant: no batch holds bytes a destination refuses for the batch as a whole. For every
// signal and both intake layouts, requests carrying odd top-level fields (v1 field 2 among
// them, which OTEP framing must refuse) are mixed with clean ones, scanned as the gRPC intake
// scans them, and admitted: every sealed batch frames, the frame scans at full depth on the
// far side, and the frames carry exactly the entries sent.
func TestBatchesFrame(t *testing.T) {
	tails := [][]byte{
		nil,
		{0x12, 0x00},                   // field 2, empty bytes
		{0x10, 0x01},                   // field 2, varint
		{0x28, 0x07},                   // field 5, varint
		{0x31, 1, 2, 3, 4, 5, 6, 7, 8}, // field 6, fixed64
		{0x3a, 0x03, 'a', 'b', 'c'},    // field 7, bytes
		{0x80, 0x80, 0x40, 0x01},       // field 2^17, varint
	}
	for sig := range fastpath.NumSignals {
		for _, layout := range []fastpath.Layout{fastpath.LayoutV1, fastpath.LayoutOTEP} {
			t.Run(fmt.Sprintf("%v/%v", sig, layout), func(t *testing.T) {
				fr := &framer{}
				cfg := pipeline.DefaultConfig()
				cfg.BatchMaxAge = time.Hour
				cfg.Eager = false
				cfg.BatchMaxItems = 5
				p, err := pipeline.New(cfg, []pipeline.Destination{fr})
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				var want []byte
				for i := range 40 {
					body := oneItemBody(t, sig, uint64(i))
					tail := tails[i%len(tails)]
					req := append(append([]byte(nil), body...), tail...)
					if layout == fastpath.LayoutOTEP {
						if len(tail) > 0 && tail[0]>>3 == 2 {
							continue // field 2 holds entries in OTEP
						}
						otep, err := fastpath.AppendOTEP(nil, uint64(i+1), body)
						if err != nil {
							t.Fatal(err)
						}
						req = append(otep, tail...)
					}
					sc, err := fastpath.ScanRequest(sig, req, layout, fastpath.DepthFull)
					if err != nil {
						t.Fatalf("request %d: %v", i, err)
					}
					if _, err := p.Admit(pipeline.Request{Signal: sig, Body: req, Items: sc.Items, Layout: layout}); err != nil {
						t.Fatalf("request %d: %v", i, err)
					}
					want = append(want, body...)
				}
				p.Flush()
				fr.mu.Lock()
				defer fr.mu.Unlock()
				if fr.refused != 0 {
					t.Fatalf("the framing refused %d batches", fr.refused)
				}
				if !bytes.Equal(fr.bodies, want) {
					t.Fatalf("frames carried %d bytes, want exactly the %d bytes of the entries", len(fr.bodies), len(want))
				}
			})
		}
	}
}
