package client

import (
	"bytes"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// FuzzFrame: for any body, the frame accepts exactly what fastpath.AppendOTEP accepts, and
// its buffers hold exactly AppendOTEP's bytes, whichever path (views or copy) it takes.
func FuzzFrame(f *testing.F) {
	gen := otlpgen.New(1)
	small, _ := gen.Spans(otlpgen.Shape{Spans: 3, Attrs: 4}).MarshalVT()
	f.Add(uint64(1), small)
	f.Add(uint64(1<<40), traceBody("f", 3, 1500))
	f.Add(uint64(7), traceBody("f", 5, 20))
	f.Add(uint64(2), append([]byte{0x18, 0x01}, traceBody("u", 1, 1200)...))
	f.Add(uint64(3), []byte{0x0b, 0x0c}) // a group at the top level
	f.Add(uint64(4), []byte{0x12, 0x00}) // field 2
	f.Fuzz(func(t *testing.T, id uint64, body []byte) {
		if id == 0 {
			id = 1 // ids start at 1
		}
		want, werr := fastpath.AppendOTEP(nil, id, body)
		p := payloadOf(body, 2048)
		defer p.Release()
		fr, err := newFrame(id, p)
		if (err == nil) != (werr == nil) {
			t.Fatalf("frame error %v, AppendOTEP error %v", err, werr)
		}
		if err != nil {
			if p.Refs() != 1 {
				t.Fatalf("refused frame kept a reference")
			}
			return
		}
		bufs, err := newFrameCodec().Marshal(fr)
		fr.unref()
		if err != nil {
			t.Fatal(err)
		}
		got := bufs.Materialize()
		bufs.Free()
		if !bytes.Equal(got, want) {
			t.Fatalf("frame bytes differ from AppendOTEP (copy=%v)", fr.copy)
		}
		if p.Refs() != 1 {
			t.Fatalf("payload refs %d after the frame was freed", p.Refs())
		}
	})
}

// FuzzRejectedItems: the partial success reader never fails on any response and, on every
// response that decodes, reports the count and message the generated decoder reads.
func FuzzRejectedItems(f *testing.F) {
	for _, m := range []interface{ MarshalVT() ([]byte, error) }{
		&coltracev1.ExportTraceServiceResponse{},
		&coltracev1.ExportTraceServiceResponse{PartialSuccess: &coltracev1.ExportTracePartialSuccess{RejectedSpans: 12, ErrorMessage: "bad spans"}},
		&collogsv1.ExportLogsServiceResponse{PartialSuccess: &collogsv1.ExportLogsPartialSuccess{RejectedLogRecords: 1 << 40}},
	} {
		b, err := m.MarshalVT()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x02, 0x08, 0x05, 0x0a, 0x00})                  // two partial_success fields: merged
	f.Add([]byte{0x0a, 0x03, 0x12, 0x01, 'a', 0x0a, 0x02, 0x08, 0x05}) // the message of the first, the count of the second
	f.Fuzz(func(t *testing.T, b []byte) {
		got := readPartialSuccess(b)
		var resp coltracev1.ExportTraceServiceResponse
		if err := resp.UnmarshalVT(b); err != nil {
			return
		}
		if want := resp.GetPartialSuccess().GetRejectedSpans(); got.rejected != want {
			t.Fatalf("rejected %d, decoder says %d", got.rejected, want)
		}
		if want := resp.GetPartialSuccess().GetErrorMessage(); string(got.message) != want {
			t.Fatalf("error message %q, decoder says %q", got.message, want)
		}
	})
}

// FuzzParseDest: any -dest value is either refused with an error or yields a valid Config.
func FuzzParseDest(f *testing.F) {
	f.Add("name=gw,endpoint=10.0.0.5:4317,protocol=otep,mode=stream,streams=4,window=64")
	f.Add("name=backend,endpoint=collector:4317,protocol=v1,mode=unary,concurrency=8,compression=zstd")
	f.Add("name=x,endpoint=h:1,queue-bytes=64MiB,retry.initial=1s,header=a:b,tls-ca=/x")
	f.Add("name=h,endpoint=https://h:4318/p,protocol=http,compression=gzip,logs-path=/l,header=x-k:v")
	f.Fuzz(func(t *testing.T, spec string) {
		c, err := ParseDest(spec, DefaultConfig())
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseDest returned an invalid config: %v", err)
		}
	})
}
