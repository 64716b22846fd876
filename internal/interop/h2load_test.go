package interop

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/otlpgate/otlpgate/internal/strictsink"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
)

// h2loadRun is one h2load run of unary trace Export calls, each carrying the same request of
// spans spans (ids first..first+spans-1) with pad bytes of attribute each, in encoding.
type h2loadRun struct {
	encoding      string
	first         uint64
	spans, pad    int
	requests      int
	clients, conc int
}

// grpcBody is the gRPC message of r's request: the 5-byte prefix (compressed flag, length) and
// the request, compressed in r.encoding.
func (r h2loadRun) grpcBody(t testing.TB) []byte {
	t.Helper()
	var spans []*tracev1.Span
	for i := range r.spans {
		id := binary.BigEndian.AppendUint64(nil, r.first+uint64(i))
		spans = append(spans, &tracev1.Span{TraceId: append(make([]byte, 8), id...), SpanId: id, Name: "h2load",
			StartTimeUnixNano: 1, EndTimeUnixNano: 2,
			Attributes: []*commonv1.KeyValue{{Key: "pad", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: strings.Repeat("h", r.pad)}}}}})
	}
	msg, err := (&coltracev1.ExportTraceServiceRequest{ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{{Spans: spans}}}}}).MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	flag := byte(1)
	switch r.encoding {
	case "identity":
		flag = 0
	case "gzip":
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(msg)
		zw.Close()
		msg = b.Bytes()
	case "zstd":
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		msg = enc.EncodeAll(msg, nil)
		enc.Close()
	default:
		t.Fatalf("encoding %q", r.encoding)
	}
	return append(binary.BigEndian.AppendUint32([]byte{flag}, uint32(len(msg))), msg...)
}

// h2loadSummary matches h2load's count of requests.
var h2loadSummary = regexp.MustCompile(`requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)

// h2load drives r at the intake at url and fails the test unless every request was done and
// answered 200.
func h2load(t *testing.T, bin, url string, r h2loadRun) {
	t.Helper()
	body := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(body, r.grpcBody(t), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-n", strconv.Itoa(r.requests), "-c", strconv.Itoa(r.clients), "-m", strconv.Itoa(r.conc),
		"-d", body, "-H", "content-type: application/grpc", "-H", "te: trailers"}
	if r.encoding != "identity" {
		args = append(args, "-H", "grpc-encoding: "+r.encoding)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(args, url+"/opentelemetry.proto.collector.trace.v1.TraceService/Export")...).CombinedOutput()
	m := h2loadSummary.FindStringSubmatch(string(out))
	if err != nil || m == nil {
		t.Fatalf("h2load: %v\n%s", err, out)
	}
	want := strconv.Itoa(r.requests)
	if m[1] != want || m[3] != want || m[4] != want {
		t.Fatalf("h2load: %d requests wanted done and succeeded:\n%s", r.requests, out)
	}
	if !strings.Contains(string(out), "status codes: "+want+" 2xx") {
		t.Fatalf("h2load: not every answer was 200:\n%s", out)
	}
}

// h2load (nghttp2) drives unary trace Export calls at the intake on both transports, plain and
// TLS, over several connections of many concurrent streams: 2,000 small requests in identity,
// gzip and zstd each, and 20 of about 1 MiB. h2load counts each answer 200, which gRPC's
// errors are too; so the intake must count every item received and none refused (each call
// answered grpc-status 0), and the Collector's decoder upstream must get each span exactly as
// many times as it was sent.
func TestH2Load(t *testing.T) {
	bin, err := exec.LookPath("h2load")
	if err != nil {
		need(t, "h2load is not installed (apt-get install nghttp2-client)")
	}
	for _, tr := range transports {
		for _, tls := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/tls=%v", tr, tls), func(t *testing.T) {
				sink, err := strictsink.Start("127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(sink.Close)
				// A call reserves -grpc.max-recv-msg-size of its connection's share of the intake
				// limiter on grpc-go: 2MiB lets 32 calls of a connection in at once.
				args := []string{"-grpc.transport", tr, "-grpc.max-recv-msg-size", "2MiB",
					"-dest", "name=up,endpoint=" + sink.Addr() + ",protocol=v1,retry-initial=20ms"}
				scheme := "http"
				if tls {
					cert, key := testkit.SelfSigned(t, t.TempDir())
					args = append(args, "-grpc.tls.cert", cert, "-grpc.tls.key", key)
					scheme = "https"
				}
				g := startGate(t, args...)
				runs := []h2loadRun{
					{encoding: "identity", first: 1, spans: 10, pad: 8, requests: 2000, clients: 4, conc: 16},
					{encoding: "gzip", first: 1001, spans: 10, pad: 8, requests: 2000, clients: 4, conc: 16},
					{encoding: "zstd", first: 2001, spans: 10, pad: 8, requests: 2000, clients: 4, conc: 16},
					{encoding: "identity", first: 3001, spans: 100, pad: 10 << 10, requests: 20, clients: 2, conc: 4},
				}
				wantSpans := map[uint64]int{}
				items := 0
				for _, r := range runs {
					h2load(t, bin, scheme+"://"+g.GRPC, r)
					for i := range r.spans {
						wantSpans[r.first+uint64(i)] = r.requests
					}
					items += r.spans * r.requests
				}
				if n := g.metric(t, "otlpgate_grpc_received_items_total", `signal="traces"`); n != float64(items) {
					t.Errorf("the intake counted %v spans received, want %d", n, items)
				}
				if n := g.metric(t, "otlpgate_grpc_refused_requests_total"); n != 0 {
					t.Errorf("the intake refused %v requests", n)
				}
				checkSink(t, sink, want{spans: wantSpans})
			})
		}
	}
}
