package kafka

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/testkit"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
)

// checkBatchable fails unless body is a v1 body of resource entries only (no other top-level
// field, which a batch must not carry), that a full scan and the OTEP framing accept.
func checkBatchable(t *testing.T, sig fastpath.Signal, body []byte) {
	t.Helper()
	it := fastpath.NewTopLevel(body)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		if f.Num != 1 || f.Type != protowire.BytesType {
			t.Fatalf("body holds top-level field %d (wire type %d)", f.Num, f.Type)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatalf("body top level: %v", err)
	}
	if _, err := fastpath.ScanRequest(sig, body, fastpath.LayoutV1, fastpath.DepthFull); err != nil {
		t.Fatalf("body does not scan: %v", err)
	}
	if _, _, st, err := fastpath.AppendEntries(nil, body, fastpath.LayoutV1); err != nil || st.Fields != 0 {
		t.Fatalf("admission would strip %+v, %v", st, err)
	}
	if _, err := fastpath.AppendOTEP(nil, 1, body); err != nil {
		t.Fatalf("body does not frame as OTEP: %v", err)
	}
}

// The Kafka intake's output is a batchable v1 body: resource entries only, whatever the client
// pushed inside them (unknown fields in a resource are carried inside its entry). A push with a
// top-level field other than resource_metrics is refused, never forwarded.
func TestForwardOutputIsBatchable(t *testing.T) {
	attrs := []*commonv1.KeyValue{strKV("client_id", "app-1")}
	two := testMetrics("a", "b", "c")
	two.ResourceMetrics = append(two.ResourceMetrics, testMetrics("d", "e").ResourceMetrics...)
	inner, err := testMetrics("x").MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	// An unknown field (99, bytes) inside the resource entry: vtprotobuf keeps and re-encodes it.
	var entry []byte
	for it := fastpath.NewTopLevel(inner); ; {
		f, ok := it.Next()
		if !ok {
			break
		}
		entry = append(inner[f.Value:f.End:f.End], protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), []byte("later"))...)
	}
	withUnknown := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), entry)

	payloads := map[string][]byte{}
	for name, md := range map[string]*metricsv1.MetricsData{"one resource": testMetrics("a", "b"), "two resources": two} {
		b, err := md.MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		payloads[name] = b
	}
	payloads["unknown inside the entry"] = withUnknown
	for name, data := range payloads {
		t.Run(name, func(t *testing.T) {
			rec := &testkit.Recorder{}
			_, sent, err := forward(rec, data, &plan{all: true}, attrs, 1<<30)
			if err != nil || !sent || rec.Count() != 1 {
				t.Fatalf("forward: sent %v, %v, %d bodies", sent, err, rec.Count())
			}
			body := rec.Received()[0].Body
			checkBatchable(t, fastpath.Metrics, body)
		})
	}
	for _, tail := range [][]byte{{0x12, 0x00}, {0x28, 0x07}} {
		rec := &testkit.Recorder{}
		if _, sent, err := forward(rec, append(append([]byte(nil), payloads["one resource"]...), tail...), &plan{all: true}, attrs, 1<<30); err != errNotMetricsData || sent || rec.Count() != 0 {
			t.Fatalf("push with top-level field %x: sent %v, %v", tail, sent, err)
		}
	}
}
