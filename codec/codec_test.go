package codec

import (
	"bytes"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/encoding"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/internal/otlpgen"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// MinTracked rests on a grpc-go constant it cannot import; this pins the assumption.
func TestMinTrackedMatchesGRPC(t *testing.T) {
	if mem.IsBelowBufferPoolingThreshold(MinTracked) {
		t.Fatalf("mem does not track buffers of %d bytes: raise MinTracked", MinTracked)
	}
	if !mem.IsBelowBufferPoolingThreshold(MinTracked - 1) {
		t.Fatalf("mem tracks buffers of %d bytes: MinTracked can be lower", MinTracked-1)
	}
}

func TestName(t *testing.T) {
	if got := New(nil).Name(); got != "proto" {
		t.Fatalf("Name() = %q", got)
	}
}

func TestMarshalVTIntoPool(t *testing.T) {
	cp := &countingPool{}
	c := New(cp)
	req := otlpgen.New(1).Spans(otlpgen.Small)
	want, _ := req.MarshalVT()
	out, err := c.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || !bytes.Equal(out[0].ReadOnlyData(), want) {
		t.Fatal("marshalled bytes differ from MarshalVT")
	}
	if cp.gets.Load() != 1 || cp.puts.Load() != 0 {
		t.Fatalf("pool gets %d puts %d before Free", cp.gets.Load(), cp.puts.Load())
	}
	data := out[0].ReadOnlyData()
	out.Free()
	if cp.puts.Load() != 1 || &(*cp.returned[0])[0] != &data[0] {
		t.Fatal("the marshal buffer did not go back to the pool it came from")
	}
}

// Even a message of a few bytes travels in a buffer gRPC tracks, so it returns to the pool.
func TestMarshalTinyMessageTracked(t *testing.T) {
	cp := &countingPool{}
	c := New(cp)
	resp := &otepv1.ExportResponse{Id: 7, ResultCode: otepv1.ResultCode_FailedRetryable}
	want, _ := resp.MarshalVT()
	out, err := c.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out[0].ReadOnlyData(), want) {
		t.Fatalf("marshalled %x, want %x", out[0].ReadOnlyData(), want)
	}
	out.Free()
	if cp.gets.Load() != 1 || cp.puts.Load() != 1 {
		t.Fatalf("pool gets %d puts %d, want 1 and 1", cp.gets.Load(), cp.puts.Load())
	}
}

func TestMarshalEmptyMessage(t *testing.T) {
	cp := &countingPool{}
	c := New(cp)
	for _, m := range []any{&coltracev1.ExportTraceServiceRequest{}, &healthpb.HealthCheckRequest{}} {
		out, err := c.Marshal(m)
		if err != nil || out != nil {
			t.Fatalf("%T: %v, %v; want nil, nil", m, out, err)
		}
	}
	if cp.gets.Load() != 0 {
		t.Fatal("empty messages took buffers")
	}
}

func TestUnmarshalVT(t *testing.T) {
	gen := otlpgen.New(2)
	req := gen.Spans(otlpgen.Small)
	enc, _ := req.MarshalVT()
	tests := []struct {
		name  string
		frame int
	}{
		{"one buffer", len(enc)},
		{"16 KiB frames", 16 << 10},
		{"1 KiB frames", 1 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := &countingPool{}
			c := New(cp)
			data := frames(cp, enc, tt.frame)
			// The target already holds another message: the result must replace it, not merge.
			got := gen.Spans(otlpgen.Shape{Spans: 3, Attrs: 2})
			if err := c.Unmarshal(data, got); err != nil {
				t.Fatal(err)
			}
			data.Free()
			if !got.EqualVT(req) {
				t.Fatal("decoded message differs")
			}
			if cp.gets.Load() != cp.puts.Load() {
				t.Fatalf("pool gets %d puts %d: a scratch buffer leaked", cp.gets.Load(), cp.puts.Load())
			}
		})
	}
}

// A message from the vtprotobuf pool is reset with ResetVT, keeping its slice for reuse.
func TestUnmarshalVTPooledMessage(t *testing.T) {
	c := New(MemPool{})
	gen := otlpgen.New(3)
	a, b := gen.Spans(otlpgen.Small), gen.Spans(otlpgen.Small)
	encA, _ := a.MarshalVT()
	encB, _ := b.MarshalVT()
	m := coltracev1.ExportTraceServiceRequestFromVTPool()
	defer m.ReturnToVTPool()
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(encA)}, m); err != nil {
		t.Fatal(err)
	}
	first := &m.ResourceSpans[:1][0]
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(encB)}, m); err != nil {
		t.Fatal(err)
	}
	if !m.EqualVT(b) {
		t.Fatal("second decode differs")
	}
	if &m.ResourceSpans[:1][0] != first {
		t.Fatal("ResetVT was not used: the repeated field was reallocated")
	}
}

func TestUnmarshalErrorsCounted(t *testing.T) {
	c := New(nil)
	before := testutil.ToFloat64(unmarshalErrorsVT)
	bad := mem.BufferSlice{mem.SliceBuffer{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}} // length past the end
	if err := c.Unmarshal(bad, &coltracev1.ExportTraceServiceRequest{}); err == nil {
		t.Fatal("truncated message decoded")
	}
	if got := testutil.ToFloat64(unmarshalErrorsVT) - before; got != 1 {
		t.Fatalf("otlpgate_codec_unmarshal_errors_total{decoder=vtproto} grew by %v, want 1", got)
	}
	before = testutil.ToFloat64(unmarshalErrorsProto)
	if err := c.Unmarshal(bad, &healthpb.HealthCheckRequest{}); err == nil {
		t.Fatal("truncated message decoded")
	}
	if got := testutil.ToFloat64(unmarshalErrorsProto) - before; got != 1 {
		t.Fatalf("otlpgate_codec_unmarshal_errors_total{decoder=proto} grew by %v, want 1", got)
	}
}

// Messages without vtprotobuf methods go through google.golang.org/protobuf, byte for byte.
func TestFallbackProto(t *testing.T) {
	cp := &countingPool{}
	c := New(cp)
	m := &healthpb.HealthCheckRequest{Service: string(bytes.Repeat([]byte("svc."), 600))}
	want, _ := proto.Marshal(m)
	out, err := c.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Materialize(), want) {
		t.Fatal("fallback marshal differs from proto.Marshal")
	}
	out.Free()
	for _, frame := range []int{len(want), 1000} {
		data := frames(cp, want, frame)
		got := &healthpb.HealthCheckRequest{Service: "stale"}
		if err := c.Unmarshal(data, got); err != nil {
			t.Fatal(err)
		}
		data.Free()
		if !proto.Equal(got, m) {
			t.Fatalf("frame %d: fallback unmarshal differs", frame)
		}
	}
	if cp.gets.Load() != cp.puts.Load() {
		t.Fatalf("pool gets %d puts %d", cp.gets.Load(), cp.puts.Load())
	}
}

func TestNotAMessage(t *testing.T) {
	c := New(nil)
	if _, err := c.Marshal(42); !errors.Is(err, errNotMessage) {
		t.Fatalf("Marshal(42): %v", err)
	}
	var n int
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer("x")}, &n); !errors.Is(err, errNotMessage) {
		t.Fatalf("Unmarshal into *int: %v", err)
	}
}

// The codec satisfies the CodecV2 contract gRPC documents: a returned slice whose buffers each
// carry a reference.
var _ encoding.CodecV2 = New(nil)
