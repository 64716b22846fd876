package conformance

import (
	"fmt"
	"math"
	"testing"

	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// otepRoundTrip checks the OTEP request T built by build from id and the entries of v1 (a v1
// export request encoding): it must encode, by MarshalVT and by protobuf-go, to exactly the id
// at field 1 followed by v1's entries re-tagged to field 2; re-tagging that back must give v1;
// and decoding it (both ways) must give back the id and entries equal to v1's.
func otepRoundTrip[T any, P vtMessage[T], E any, PE vtMessage[E]](
	id uint64, v1 []byte, build func(uint64, []*E) P, split func(P) (uint64, []*E),
) error {
	raw, err := entries(v1)
	if err != nil {
		return err
	}
	es := make([]*E, len(raw))
	for i, e := range raw {
		var pe PE = new(E)
		if err := pe.UnmarshalVT(e); err != nil {
			return fmt.Errorf("UnmarshalVT of entry %d: %w", i, err)
		}
		es[i] = pe
	}
	m := build(id, es)
	md := m.ProtoReflect().Descriptor()
	want, err := otepBytes(id, v1)
	if err != nil {
		return err
	}
	if n := m.SizeVT(); n != len(want) {
		return fmt.Errorf("OTEP id %d: SizeVT %d, want %d", id, n, len(want))
	}
	got, err := m.MarshalVT()
	if err != nil {
		return fmt.Errorf("OTEP MarshalVT: %w", err)
	}
	if err := sameBytes(fmt.Sprintf("OTEP id %d MarshalVT vs re-tagged v1", id), md, got, want); err != nil {
		return err
	}
	gotProto, err := deterministic.Marshal(m)
	if err != nil {
		return fmt.Errorf("OTEP proto.Marshal: %w", err)
	}
	if err := sameBytes(fmt.Sprintf("OTEP id %d proto.Marshal vs re-tagged v1", id), md, gotProto, want); err != nil {
		return err
	}
	back, err := v1Bytes(got)
	if err != nil {
		return err
	}
	if err := sameBytes("OTEP re-tagged back to v1", nil, back, v1); err != nil {
		return err
	}

	decoders := []struct {
		name   string
		decode func([]byte, P) error
	}{
		{"UnmarshalVT", func(b []byte, m P) error { return m.UnmarshalVT(b) }},
		{"proto.Unmarshal", func(b []byte, m P) error { return proto.Unmarshal(b, m) }},
	}
	for _, d := range decoders {
		var dec P = new(T)
		if err := d.decode(want, dec); err != nil {
			return fmt.Errorf("OTEP %s: %w", d.name, err)
		}
		gotID, gotEs := split(dec)
		if gotID != id {
			return fmt.Errorf("OTEP %s: id %d, want %d", d.name, gotID, id)
		}
		if len(gotEs) != len(es) {
			return fmt.Errorf("OTEP %s: %d entries, want %d", d.name, len(gotEs), len(es))
		}
		for i := range es {
			if !PE(gotEs[i]).EqualVT(es[i]) {
				return fmt.Errorf("OTEP %s: entry %d differs from the v1 entry", d.name, i)
			}
		}
	}
	return nil
}

// TestOTEPSchema pins the layout fastpath's re-tagging depends on: id is a uint64 at field 1
// and the entries are exactly our v1 Resource* messages, repeated at field 2.
func TestOTEPSchema(t *testing.T) {
	cases := []struct {
		msg   protoreflect.MessageDescriptor
		entry protoreflect.MessageDescriptor
	}{
		{(&otepv1.TraceExportRequest{}).ProtoReflect().Descriptor(), (&tracev1.ResourceSpans{}).ProtoReflect().Descriptor()},
		{(&otepv1.MetricExportRequest{}).ProtoReflect().Descriptor(), (&metricsv1.ResourceMetrics{}).ProtoReflect().Descriptor()},
		{(&otepv1.LogExportRequest{}).ProtoReflect().Descriptor(), (&logsv1.ResourceLogs{}).ProtoReflect().Descriptor()},
	}
	for _, c := range cases {
		t.Run(string(c.msg.Name()), func(t *testing.T) {
			if n := c.msg.Fields().Len(); n != 2 {
				t.Fatalf("%d fields, want 2", n)
			}
			id := c.msg.Fields().ByNumber(1)
			if id == nil || id.Name() != "id" || id.Kind() != protoreflect.Uint64Kind || id.Cardinality() != protoreflect.Optional || id.HasPresence() {
				t.Fatalf("field 1 is %v, want a plain uint64 id", id)
			}
			es := c.msg.Fields().ByNumber(2)
			if es == nil || !es.IsList() || es.Message() != c.entry {
				t.Fatalf("field 2 is %v, want repeated %s", es, c.entry.FullName())
			}
		})
	}
}

// TestOTEPExportResponse checks the response encoding against bytes built by hand, including
// a result code the enum does not declare (proto3 enums are open; it must survive).
func TestOTEPExportResponse(t *testing.T) {
	cases := []struct {
		id   uint64
		code otepv1.ResultCode
	}{
		{0, otepv1.ResultCode_Success},
		{1, otepv1.ResultCode_Success},
		{300, otepv1.ResultCode_FailedNoneRetryable},
		{math.MaxUint64, otepv1.ResultCode_FailedRetryable},
		{7, otepv1.ResultCode(99)},
		{8, otepv1.ResultCode(-1)},
	}
	for _, c := range cases {
		var want []byte
		if c.id != 0 {
			want = protowire.AppendTag(want, 1, protowire.VarintType)
			want = protowire.AppendVarint(want, c.id)
		}
		if c.code != 0 {
			want = protowire.AppendTag(want, 2, protowire.VarintType)
			want = protowire.AppendVarint(want, uint64(int64(c.code)))
		}
		m := &otepv1.ExportResponse{Id: c.id, ResultCode: c.code}
		got, err := m.MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		if err := sameBytes(fmt.Sprintf("ExportResponse{%d, %d}", c.id, c.code), m.ProtoReflect().Descriptor(), got, want); err != nil {
			t.Fatal(err)
		}
		var dec otepv1.ExportResponse
		if err := dec.UnmarshalVT(want); err != nil {
			t.Fatal(err)
		}
		if dec.Id != c.id || dec.ResultCode != c.code {
			t.Fatalf("decoded {%d, %d}, want {%d, %d}", dec.Id, dec.ResultCode, c.id, c.code)
		}
	}
}
