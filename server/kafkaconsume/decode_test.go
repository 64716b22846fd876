package kafkaconsume

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// spansRecord is an otlp_proto value of spans spans, and its OTLP/JSON form.
func spansRecord(t testing.TB, spans int) (proto, json []byte) {
	t.Helper()
	req := otlpgen.New(1).Spans(otlpgen.Shape{Spans: spans, Attrs: 4})
	p, err := req.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(p)
	if err != nil {
		t.Fatal(err)
	}
	j, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return p, j
}

// A record is admitted as the protobuf request its topic's encoding gives: otlp_proto as it
// is, otlp_json transcoded to the same bytes; what cannot be admitted says why.
func TestDecode(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxRecordBytes = 64 << 10
	var d decoder
	d.init(&cfg)
	proto, json := spansRecord(t, 20)
	traces := &Topic{Name: "otlp_spans", Signal: fastpath.Traces}
	jsonTraces := &Topic{Name: "otlp_spans", Signal: fastpath.Traces, JSON: true}
	for _, tc := range []struct {
		name   string
		topic  *Topic
		value  []byte
		reason skipReason
		ok     bool
	}{
		{"proto", traces, proto, 0, true},
		{"json", jsonTraces, json, 0, true},
		{"proto read as json", jsonTraces, proto, skipUndecodable, false},
		{"garbage", traces, []byte{0x0a, 0x05, 0xff}, skipUndecodable, false},
		{"too large", traces, bytes.Repeat([]byte{0}, 65<<10), skipTooLarge, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, reason, err := d.decode(tc.topic, &kgo.Record{Value: tc.value})
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if req.Items != 20 || req.Signal != fastpath.Traces {
					t.Fatalf("%d items of signal %s, want 20 spans", req.Items, req.Signal)
				}
				if !bytes.Equal(canonical(t, req.Body), canonical(t, proto)) {
					t.Fatal("the request admitted is not the record's")
				}
				return
			}
			if err == nil || reason != tc.reason {
				t.Fatalf("reason %s (%v), want %s", skipNames[reason], err, skipNames[tc.reason])
			}
		})
	}
	req, _, err := d.decode(traces, &kgo.Record{Value: nil})
	if err != nil || len(req.Body) != 0 {
		t.Fatalf("an empty record: %v, %d bytes", err, len(req.Body))
	}
}

// With -kafka.consume.tenant-from-headers a record's tenant is the one its headers name,
// compared without case; a record without them is the default tenant's, one with a bad value
// is skipped for its tenant.
func TestDecodeTenant(t *testing.T) {
	tc := tenant.DefaultConfig()
	tc.Headers = []string{"x-scope-orgid"}
	ts, err := tenant.NewTable(tc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Tenants, cfg.TenantFromHeaders = ts, true
	var d decoder
	d.init(&cfg)
	proto, _ := spansRecord(t, 2)
	traces := &Topic{Name: "otlp_spans", Signal: fastpath.Traces}
	req, _, err := d.decode(traces, &kgo.Record{Value: proto, Headers: []kgo.RecordHeader{{Key: "X-Scope-OrgID", Value: []byte("team-a")}}})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := req.Origin.Tenant.Value("x-scope-orgid"); v != "team-a" {
		t.Fatalf("tenant %v, want team-a", req.Origin.Tenant)
	}
	req, _, err = d.decode(traces, &kgo.Record{Value: proto})
	if err != nil || req.Origin.Tenant != ts.Default() {
		t.Fatalf("no header: tenant %v (%v), want the default", req.Origin.Tenant, err)
	}
	_, reason, err := d.decode(traces, &kgo.Record{Value: proto, Headers: []kgo.RecordHeader{{Key: "x-scope-orgid", Value: []byte("bad\x01value")}}})
	if !errors.Is(err, tenant.ErrValue) || reason != skipTenant {
		t.Fatalf("a bad value: %v, reason %s", err, skipNames[reason])
	}
}

// canonical is a trace request as the Collector's pdata decodes and writes it again.
func canonical(t *testing.T, b []byte) []byte {
	t.Helper()
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
