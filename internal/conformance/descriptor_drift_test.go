package conformance

import (
	"slices"
	"strings"
	"testing"

	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	rcoltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	rcommon "go.opentelemetry.io/proto/otlp/common/v1"
	rlogs "go.opentelemetry.io/proto/otlp/logs/v1"
	rmetrics "go.opentelemetry.io/proto/otlp/metrics/v1"
	rresource "go.opentelemetry.io/proto/otlp/resource/v1"
	rtrace "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// TestCompareFilesDetectsDrift feeds compareFiles reference descriptors with one deliberate
// change each and checks that the change is reported, by name. Without it, a comparator that
// looked at nothing would let TestDescriptorsMatchReference pass.
func TestCompareFilesDetectsDrift(t *testing.T) {
	deps := new(protoregistry.Files)
	for _, fd := range []protoreflect.FileDescriptor{
		rcommon.File_opentelemetry_proto_common_v1_common_proto,
		rresource.File_opentelemetry_proto_resource_v1_resource_proto,
		rtrace.File_opentelemetry_proto_trace_v1_trace_proto,
		rmetrics.File_opentelemetry_proto_metrics_v1_metrics_proto,
		rlogs.File_opentelemetry_proto_logs_v1_logs_proto,
	} {
		if err := deps.RegisterFile(fd); err != nil {
			t.Fatalf("register %s: %v", fd.Path(), err)
		}
	}
	traceFile := rtrace.File_opentelemetry_proto_trace_v1_trace_proto
	metricsFile := rmetrics.File_opentelemetry_proto_metrics_v1_metrics_proto
	logsFile := rlogs.File_opentelemetry_proto_logs_v1_logs_proto
	serviceFile := rcoltrace.File_opentelemetry_proto_collector_trace_v1_trace_service_proto

	cases := []struct {
		name   string
		file   protoreflect.FileDescriptor
		mutate func(*descriptorpb.FileDescriptorProto)
		want   string
	}{
		{"unchanged", metricsFile, func(*descriptorpb.FileDescriptorProto) {}, ""},
		{"field number", metricsFile, func(f *descriptorpb.FileDescriptorProto) {
			field(f, "NumberDataPoint", "as_int").Number = proto.Int32(16)
		}, "opentelemetry.proto.metrics.v1.NumberDataPoint.as_int: number: ours 16, reference 6"},
		{"field kind", traceFile, func(f *descriptorpb.FileDescriptorProto) {
			field(f, "Span", "flags").Type = descriptorpb.FieldDescriptorProto_TYPE_UINT32.Enum()
		}, "opentelemetry.proto.trace.v1.Span.flags: kind: ours uint32, reference fixed32"},
		{"cardinality", traceFile, func(f *descriptorpb.FileDescriptorProto) {
			field(f, "Span", "attributes").Label = descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
		}, "opentelemetry.proto.trace.v1.Span.attributes: cardinality: ours optional, reference repeated"},
		{"oneof membership", metricsFile, func(f *descriptorpb.FileDescriptorProto) {
			field(f, "NumberDataPoint", "as_int").OneofIndex = nil
		}, "opentelemetry.proto.metrics.v1.NumberDataPoint.as_int: oneof: ours (none), reference value"},
		{"proto3 optional", metricsFile, func(f *descriptorpb.FileDescriptorProto) {
			dropProto3Optional(message(f, "HistogramDataPoint"), "sum")
		}, "opentelemetry.proto.metrics.v1.HistogramDataPoint.sum: proto3 optional: ours false, reference true"},
		{"message type", metricsFile, func(f *descriptorpb.FileDescriptorProto) {
			field(f, "Metric", "gauge").TypeName = proto.String(".opentelemetry.proto.metrics.v1.Sum")
		}, "opentelemetry.proto.metrics.v1.Metric.gauge: message type: ours opentelemetry.proto.metrics.v1.Sum, reference opentelemetry.proto.metrics.v1.Gauge"},
		{"enum value", metricsFile, func(f *descriptorpb.FileDescriptorProto) {
			for _, e := range f.EnumType {
				for _, v := range e.Value {
					if v.GetName() == "AGGREGATION_TEMPORALITY_DELTA" {
						v.Number = proto.Int32(3)
					}
				}
			}
		}, "opentelemetry.proto.metrics.v1.AGGREGATION_TEMPORALITY_DELTA: number: ours 3, reference 1"},
		{"reserved range", traceFile, func(f *descriptorpb.FileDescriptorProto) {
			message(f, "ResourceSpans").ReservedRange = nil
		}, "opentelemetry.proto.trace.v1.ResourceSpans: reserved ranges: ours {}, reference {[1000,1000]}"},
		{"renamed field", logsFile, func(f *descriptorpb.FileDescriptorProto) {
			field(f, "LogRecord", "event_name").Name = proto.String("event")
		}, "opentelemetry.proto.logs.v1.LogRecord.event_name: field: ours missing, reference declared as number 12"},
		{"extra field", logsFile, func(f *descriptorpb.FileDescriptorProto) {
			field(f, "LogRecord", "event_name").Name = proto.String("event")
		}, "opentelemetry.proto.logs.v1.LogRecord.event: field: ours declared as number 12, reference missing"},
		{"nested message", traceFile, func(f *descriptorpb.FileDescriptorProto) {
			message(f, "Span.Event").Name = proto.String("SpanEvent")
		}, "opentelemetry.proto.trace.v1.Span.Event: message: ours missing, reference declared"},
		{"method streaming", serviceFile, func(f *descriptorpb.FileDescriptorProto) {
			f.Service[0].Method[0].ClientStreaming = proto.Bool(true)
		}, "opentelemetry.proto.collector.trace.v1.TraceService.Export: client streaming: ours true, reference false"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fdp := protodesc.ToFileDescriptorProto(c.file)
			c.mutate(fdp)
			drifted, err := protodesc.NewFile(fdp, deps)
			if err != nil {
				t.Fatalf("build drifted %s: %v", c.file.Path(), err)
			}
			got := compareFiles(drifted, c.file)
			if c.want == "" {
				if len(got) != 0 {
					t.Fatalf("identical descriptors reported as different:\n%s", strings.Join(got, "\n"))
				}
				return
			}
			if !slices.Contains(got, c.want) {
				t.Fatalf("drift not reported as %q; got:\n%s", c.want, strings.Join(got, "\n"))
			}
		})
	}
}

// message finds a message by its dotted path inside the file ("Span.Event").
func message(f *descriptorpb.FileDescriptorProto, path string) *descriptorpb.DescriptorProto {
	parts := strings.Split(path, ".")
	msgs := f.MessageType
	var m *descriptorpb.DescriptorProto
	for _, p := range parts {
		i := slices.IndexFunc(msgs, func(d *descriptorpb.DescriptorProto) bool { return d.GetName() == p })
		if i < 0 {
			panic("BUG: no message " + path + " in " + f.GetName())
		}
		m = msgs[i]
		msgs = m.NestedType
	}
	return m
}

func field(f *descriptorpb.FileDescriptorProto, msg, name string) *descriptorpb.FieldDescriptorProto {
	m := message(f, msg)
	i := slices.IndexFunc(m.Field, func(d *descriptorpb.FieldDescriptorProto) bool { return d.GetName() == name })
	if i < 0 {
		panic("BUG: no field " + name + " in " + msg)
	}
	return m.Field[i]
}

// dropProto3Optional turns a proto3 optional field into a plain one, removing its synthetic
// oneof and renumbering the oneofs declared after it.
func dropProto3Optional(m *descriptorpb.DescriptorProto, name string) {
	f := m.Field[slices.IndexFunc(m.Field, func(d *descriptorpb.FieldDescriptorProto) bool { return d.GetName() == name })]
	k := f.GetOneofIndex()
	m.OneofDecl = slices.Delete(m.OneofDecl, int(k), int(k)+1)
	f.OneofIndex, f.Proto3Optional = nil, nil
	for _, other := range m.Field {
		if other.OneofIndex != nil && other.GetOneofIndex() > k {
			other.OneofIndex = proto.Int32(other.GetOneofIndex() - 1)
		}
	}
}
