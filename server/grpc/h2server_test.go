package grpcserver

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/internal/admission"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// transports are the values of -grpc.transport, for tests that run on both.
var transports = []string{TransportGRPCGo, TransportOwn}

const tracesPath = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// A v1 call answers the same on both transports, success or refusal: the same status code,
// message and details (RetryInfo), and the same bytes at the destination. grpc-go is the
// oracle: each case's answer on it is the answer otlpgate's own transport must give.
func TestTransportsAnswerAlike(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("s3cret\n"), 0o600)
	body := traceBody(t, 5, 4)
	large := traceBody(t, 9, 20000) // megabytes: many DATA frames, several windows
	bearer := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer s3cret")
	type result struct {
		st    *status.Status
		resp  []byte // the response message as marshalled
		bytes []byte // what reached the destination
	}
	cases := []struct {
		name string
		cfg  func(*Config)
		call func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error
	}{
		{"valid", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(body).raw(), resp)
		}},
		{"empty", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(nil).raw(), resp)
		}},
		{"gzip", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(body).raw(), resp, grpc.UseCompressor(codec.Gzip))
		}},
		{"too-large-inflated", func(c *Config) { c.MaxRecvMsgSize = 64 << 10 }, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(bytes.Repeat(body, 200)).raw(), resp, grpc.UseCompressor(codec.Gzip))
		}},
		{"zstd", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(large).raw(), resp, grpc.UseCompressor(codec.Zstd))
		}},
		{"large", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(large).raw(), resp)
		}},
		{"metrics-typed", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			_, err := colmetricsv1.NewMetricsServiceClient(e.conn).Export(bearer, &colmetricsv1.ExportMetricsServiceRequest{})
			return err
		}},
		{"garbage", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes([]byte{0x0a, 0x50, 0x01}).raw(), resp)
		}},
		{"partial", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			bad := append(traceBody(t, 6, 2), 0x0a, 0x06, 0x12, 0x04, 0x12, 0x02, 0x0a, 0x05)
			return e.raw.Invoke(bearer, tracesPath, rawBytes(bad).raw(), resp)
		}},
		{"no-token", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(context.Background(), tracesPath, rawBytes(body).raw(), resp)
		}},
		{"wrong-token", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer wrong")
			return e.raw.Invoke(ctx, tracesPath, rawBytes(body).raw(), resp)
		}},
		{"too-large", func(c *Config) { c.MaxRecvMsgSize = 1 << 10 }, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(large).raw(), resp)
		}},
		{"unknown-service", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, "/no.such.Service/Export", rawBytes(body).raw(), resp)
		}},
		{"unknown-method", nil, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, "/opentelemetry.proto.collector.trace.v1.TraceService/Import", rawBytes(body).raw(), resp)
		}},
		{"busy", func(c *Config) {
			c.Limiter = admission.NewLimiter(admission.LimiterConfig{MaxBytes: 4 << 20, MaxDecodes: 2, Wait: 30 * time.Millisecond})
			c.MaxRecvMsgSize = 4 << 20
			if !c.Limiter.AcquireBytes(admission.IntakeGRPC, 4<<20, nil) {
				panic("cannot fill the limiter")
			}
		}, func(t *testing.T, e *env, resp *coltracev1.ExportTraceServiceResponse) error {
			return e.raw.Invoke(bearer, tracesPath, rawBytes(body).raw(), resp)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]result
			for i, tr := range transports {
				sc := DefaultConfig()
				sc.Transport = tr
				sc.AuthTokenFile = tok
				if tc.cfg != nil {
					tc.cfg(&sc)
				}
				e := start(t, testPipelineConfig(), sc, nil)
				var resp coltracev1.ExportTraceServiceResponse
				got[i].st = status.Convert(tc.call(t, e, &resp))
				got[i].resp, _ = resp.MarshalVT()
				e.p.Flush()
				batches, _ := totals(e.rec)
				got[i].bytes = bytes.Join(batches, nil)
			}
			if !proto.Equal(got[0].st.Proto(), got[1].st.Proto()) {
				t.Fatalf("grpc-go answered %v %q %v, otlpgate %v %q %v", got[0].st.Code(), got[0].st.Message(), got[0].st.Details(),
					got[1].st.Code(), got[1].st.Message(), got[1].st.Details())
			}
			if !bytes.Equal(got[0].resp, got[1].resp) {
				t.Fatalf("response: grpc-go %x, otlpgate %x", got[0].resp, got[1].resp)
			}
			if !bytes.Equal(got[0].bytes, got[1].bytes) {
				t.Fatalf("destination: grpc-go %d bytes, otlpgate %d bytes", len(got[0].bytes), len(got[1].bytes))
			}
			t.Logf("%v %q, response %x, %d bytes delivered", got[1].st.Code(), got[1].st.Message(), got[1].resp, len(got[1].bytes))
		})
	}
}
