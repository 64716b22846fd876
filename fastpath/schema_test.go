package fastpath

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// schemaMessages names the generated message behind each table of the schema.
var schemaMessages = [numMsgs]proto.Message{
	mAnyValue:        &commonv1.AnyValue{},
	mArrayValue:      &commonv1.ArrayValue{},
	mKeyValueList:    &commonv1.KeyValueList{},
	mKeyValue:        &commonv1.KeyValue{},
	mScope:           &commonv1.InstrumentationScope{},
	mEntityRef:       &commonv1.EntityRef{},
	mResource:        &resourcev1.Resource{},
	mResourceSpans:   &tracev1.ResourceSpans{},
	mScopeSpans:      &tracev1.ScopeSpans{},
	mSpan:            &tracev1.Span{},
	mSpanEvent:       &tracev1.Span_Event{},
	mSpanLink:        &tracev1.Span_Link{},
	mStatus:          &tracev1.Status{},
	mResourceMetrics: &metricsv1.ResourceMetrics{},
	mScopeMetrics:    &metricsv1.ScopeMetrics{},
	mMetric:          &metricsv1.Metric{},
	mGauge:           &metricsv1.Gauge{},
	mSum:             &metricsv1.Sum{},
	mHistogram:       &metricsv1.Histogram{},
	mExpHistogram:    &metricsv1.ExponentialHistogram{},
	mSummary:         &metricsv1.Summary{},
	mNumberDP:        &metricsv1.NumberDataPoint{},
	mHistogramDP:     &metricsv1.HistogramDataPoint{},
	mExpHistogramDP:  &metricsv1.ExponentialHistogramDataPoint{},
	mBuckets:         &metricsv1.ExponentialHistogramDataPoint_Buckets{},
	mSummaryDP:       &metricsv1.SummaryDataPoint{},
	mQuantile:        &metricsv1.SummaryDataPoint_ValueAtQuantile{},
	mExemplar:        &metricsv1.Exemplar{},
	mResourceLogs:    &logsv1.ResourceLogs{},
	mScopeLogs:       &logsv1.ScopeLogs{},
	mLogRecord:       &logsv1.LogRecord{},
}

// wantKind is the wire kind the schema must give a field of the generated descriptor.
func wantKind(fd protoreflect.FieldDescriptor) wireKind {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		return kMessage
	case protoreflect.StringKind:
		return kString
	case protoreflect.BytesKind:
		// The ids whose length the Collector's decoder checks; every other bytes field holds
		// anything.
		switch fd.Name() {
		case "trace_id":
			return kTraceID
		case "span_id", "parent_span_id":
			return kSpanID
		}
		return kBytes
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Sint32Kind,
		protoreflect.Uint32Kind, protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind:
		if fd.IsList() {
			return kPackedVarint
		}
		return kVarint
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		if fd.IsList() {
			return kPackedFixed64
		}
		return kFixed64
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		if fd.IsList() {
			return kUnknown // no such field in OTLP; the scanner would need a packed fixed32 kind
		}
		return kFixed32
	}
	return kUnknown
}

// TestSchemaMatchesDescriptors checks the hand-written tables against the descriptors compiled
// from the .proto files: every field known to one is known to the other, with the same wire
// kind and, for messages, the same message type.
func TestSchemaMatchesDescriptors(t *testing.T) {
	byName := map[protoreflect.FullName]msgID{}
	for id, m := range schemaMessages {
		if m == nil {
			t.Fatalf("message %d has no descriptor", id)
		}
		byName[m.ProtoReflect().Descriptor().FullName()] = msgID(id)
	}
	for id, m := range schemaMessages {
		md := m.ProtoReflect().Descriptor()
		fields := schema[id]
		t.Run(string(md.Name()), func(t *testing.T) {
			fds := md.Fields()
			for i := range fds.Len() {
				fd := fds.Get(i)
				num := int(fd.Number())
				if num >= len(fields) || fields[num].kind == kUnknown {
					t.Fatalf("field %s (%d) missing from the schema", fd.Name(), num)
				}
				f := fields[num]
				if want := wantKind(fd); f.kind != want {
					t.Fatalf("field %s (%d): kind %d, want %d", fd.Name(), num, f.kind, want)
				}
				if f.kind == kMessage {
					sub, ok := byName[fd.Message().FullName()]
					if !ok || sub != f.msg {
						t.Fatalf("field %s (%d): message %d, want %s", fd.Name(), num, f.msg, fd.Message().FullName())
					}
				}
				if f.flags&fOneof != 0 && fd.ContainingOneof() == nil {
					t.Fatalf("field %s (%d) is marked oneof but is not in one", fd.Name(), num)
				}
			}
			for num, f := range fields {
				if f.flags&fLegacy != 0 {
					// Reserved in the .proto; the Collector reads it as the scope entries
					// field (2) was read before.
					scopes := fds.ByNumber(2)
					if !md.ReservedRanges().Has(protoreflect.FieldNumber(num)) || f.kind != kMessage ||
						scopes == nil || byName[scopes.Message().FullName()] != f.msg {
						t.Fatalf("legacy field %d of %s is not a reserved number holding field 2's message", num, md.FullName())
					}
					continue
				}
				if f.kind != kUnknown && fds.ByNumber(protoreflect.FieldNumber(num)) == nil {
					t.Fatalf("schema field %d is not in %s", num, md.FullName())
				}
			}
		})
	}
}

// TestSchemaRequests checks the request layouts ScanRequest and the converters assume: v1 has
// only the entries at field 1; OTEP has a uint64 id at 1 and the entries at 2.
func TestSchemaRequests(t *testing.T) {
	tests := []struct {
		sig  Signal
		v1   proto.Message
		otep proto.Message
	}{
		{Traces, &coltracev1.ExportTraceServiceRequest{}, &otepv1.TraceExportRequest{}},
		{Metrics, &colmetricsv1.ExportMetricsServiceRequest{}, &otepv1.MetricExportRequest{}},
		{Logs, &collogsv1.ExportLogsServiceRequest{}, &otepv1.LogExportRequest{}},
	}
	for _, tt := range tests {
		t.Run(tt.sig.String(), func(t *testing.T) {
			entry := schemaMessages[resourceMsg[tt.sig]].ProtoReflect().Descriptor().FullName()
			v1 := tt.v1.ProtoReflect().Descriptor().Fields()
			if v1.Len() != 1 || v1.Get(0).Number() != 1 || !v1.Get(0).IsList() || v1.Get(0).Message().FullName() != entry {
				t.Fatalf("v1 request is not one repeated %s at field 1", entry)
			}
			otep := tt.otep.ProtoReflect().Descriptor().Fields()
			id, entries := otep.ByNumber(1), otep.ByNumber(2)
			if otep.Len() != 2 || id == nil || id.Kind() != protoreflect.Uint64Kind || id.IsList() ||
				entries == nil || !entries.IsList() || entries.Message().FullName() != entry {
				t.Fatalf("OTEP request is not uint64 id = 1, repeated %s = 2", entry)
			}
		})
	}
}

// wantJSONType is the JSON column's type for a field of the generated descriptor.
func wantJSONType(fd protoreflect.FieldDescriptor) jsonType {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		return jMessage
	case protoreflect.StringKind:
		return jString
	case protoreflect.BytesKind:
		// The OTLP/JSON mapping writes every trace and span id in hex, all other bytes in
		// base64.
		switch fd.Name() {
		case "trace_id":
			return jTraceID
		case "span_id", "parent_span_id":
			return jSpanID
		}
		return jBytes
	case protoreflect.BoolKind:
		return jBool
	case protoreflect.EnumKind:
		return jEnum
	case protoreflect.Int32Kind:
		return jInt32
	case protoreflect.Sint32Kind:
		return jSint32
	case protoreflect.Uint32Kind:
		return jUint32
	case protoreflect.Int64Kind:
		return jInt64
	case protoreflect.Uint64Kind:
		return jUint64
	case protoreflect.Fixed32Kind:
		return jFixed32
	case protoreflect.Fixed64Kind:
		return jFixed64
	case protoreflect.Sfixed64Kind:
		return jSfixed64
	case protoreflect.DoubleKind:
		return jDouble
	}
	return 0 // no such field in OTLP: the test fails on it
}

// TestJSONSchemaMatchesDescriptors checks the JSON column against the compiled descriptors:
// the same fields as the wire table, in number order, with the descriptor's names (JSONName
// is protobuf's own lowerCamelCase), type, cardinality, presence and oneof; and every enum's
// value names.
func TestJSONSchemaMatchesDescriptors(t *testing.T) {
	enums := map[protoreflect.FullName]enumID{}
	for id, m := range schemaMessages {
		md := m.ProtoReflect().Descriptor()
		jfields := jsonSchema[id]
		t.Run(string(md.Name()), func(t *testing.T) {
			fds := md.Fields()
			if len(jfields) != fds.Len() {
				t.Fatalf("%d JSON fields, descriptor has %d", len(jfields), fds.Len())
			}
			for i, f := range jfields {
				if i > 0 && f.num <= jfields[i-1].num {
					t.Fatalf("field %s is out of number order", f.name)
				}
				if f.num >= 32 {
					t.Fatalf("field %s: number %d does not fit the duplicate mask", f.name, f.num)
				}
				fd := fds.ByNumber(protoreflect.FieldNumber(f.num))
				if fd == nil {
					t.Fatalf("field %d (%s) is not in %s", f.num, f.name, md.FullName())
				}
				if f.name != string(fd.Name()) || f.camel != fd.JSONName() {
					t.Fatalf("field %d: names %q/%q, want %q/%q", f.num, f.name, f.camel, fd.Name(), fd.JSONName())
				}
				if want := wantJSONType(fd); f.typ != want {
					t.Fatalf("field %s: JSON type %d, want %d", f.name, f.typ, want)
				}
				if rep := f.flags&jRepeated != 0; rep != fd.IsList() {
					t.Fatalf("field %s: repeated %v, descriptor %v", f.name, rep, fd.IsList())
				}
				scalar := !fd.IsList() && fd.Kind() != protoreflect.MessageKind
				if pres := f.flags&jPresence != 0; scalar && pres != fd.HasPresence() {
					t.Fatalf("field %s: presence %v, descriptor %v", f.name, pres, fd.HasPresence())
				}
				od := fd.ContainingOneof()
				inOneof := od != nil && !od.IsSynthetic()
				if (f.oneof != 0) != inOneof || (inOneof && int(f.oneof) != od.Index()+1-syntheticBefore(md, od)) {
					t.Fatalf("field %s: oneof %d, descriptor %v", f.name, f.oneof, od)
				}
				if inOneof && f.flags&jPresence == 0 {
					t.Fatalf("field %s: a oneof member must be written at zero", f.name)
				}
				if wantOrder := f.num | map[bool]uint8{true: 0x80}[inOneof]; f.order != wantOrder {
					t.Fatalf("field %s: order %#x, want %#x", f.name, f.order, wantOrder)
				}
				if fd.Kind() == protoreflect.EnumKind {
					if f.enum == eNone {
						t.Fatalf("field %s: enum without names", f.name)
					}
					if prev, ok := enums[fd.Enum().FullName()]; ok && prev != f.enum {
						t.Fatalf("field %s: enum %s under two ids", f.name, fd.Enum().FullName())
					}
					enums[fd.Enum().FullName()] = f.enum
					vals := fd.Enum().Values()
					names := enumNames[f.enum]
					if len(names) != vals.Len() {
						t.Fatalf("enum %s: %d names, descriptor has %d", fd.Enum().FullName(), len(names), vals.Len())
					}
					for n, name := range names {
						v := vals.ByNumber(protoreflect.EnumNumber(n))
						if v == nil || string(v.Name()) != name {
							t.Fatalf("enum %s value %d: name %q, descriptor %v", fd.Enum().FullName(), n, name, v)
						}
					}
				} else if f.enum != eNone {
					t.Fatalf("field %s: enum names on a non-enum field", f.name)
				}
			}
		})
	}
	if len(enums) != int(numEnums)-1 {
		t.Fatalf("%d enums used, %d named", len(enums), numEnums-1)
	}
	for _, tt := range []struct {
		sig Signal
		req proto.Message
	}{
		{Traces, &coltracev1.ExportTraceServiceRequest{}},
		{Metrics, &colmetricsv1.ExportMetricsServiceRequest{}},
		{Logs, &collogsv1.ExportLogsServiceRequest{}},
	} {
		fd := tt.req.ProtoReflect().Descriptor().Fields().ByNumber(1)
		f := requestField[tt.sig]
		if f.name != string(fd.Name()) || f.camel != fd.JSONName() || f.num != 1 {
			t.Fatalf("%v request field: %q/%q, want %q/%q", tt.sig, f.name, f.camel, fd.Name(), fd.JSONName())
		}
	}
}

// syntheticBefore counts the synthetic oneofs (proto3 optional) declared before od, which the
// JSON column does not number.
func syntheticBefore(md protoreflect.MessageDescriptor, od protoreflect.OneofDescriptor) int {
	n := 0
	for i := range od.Index() {
		if md.Oneofs().Get(i).IsSynthetic() {
			n++
		}
	}
	return n
}
