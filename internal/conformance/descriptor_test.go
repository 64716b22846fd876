package conformance

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	commonv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/common/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	resourcev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/resource/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	rcollogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	rcolmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	rcoltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	rcommon "go.opentelemetry.io/proto/otlp/common/v1"
	rlogs "go.opentelemetry.io/proto/otlp/logs/v1"
	rmetrics "go.opentelemetry.io/proto/otlp/metrics/v1"
	rresource "go.opentelemetry.io/proto/otlp/resource/v1"
	rtrace "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// filePairs lists our file next to the reference file of the same path, dependencies first.
func filePairs() []struct{ ours, ref protoreflect.FileDescriptor } {
	return []struct{ ours, ref protoreflect.FileDescriptor }{
		{commonv1.File_opentelemetry_proto_common_v1_common_proto, rcommon.File_opentelemetry_proto_common_v1_common_proto},
		{resourcev1.File_opentelemetry_proto_resource_v1_resource_proto, rresource.File_opentelemetry_proto_resource_v1_resource_proto},
		{tracev1.File_opentelemetry_proto_trace_v1_trace_proto, rtrace.File_opentelemetry_proto_trace_v1_trace_proto},
		{metricsv1.File_opentelemetry_proto_metrics_v1_metrics_proto, rmetrics.File_opentelemetry_proto_metrics_v1_metrics_proto},
		{logsv1.File_opentelemetry_proto_logs_v1_logs_proto, rlogs.File_opentelemetry_proto_logs_v1_logs_proto},
		{coltracev1.File_opentelemetry_proto_collector_trace_v1_trace_service_proto, rcoltrace.File_opentelemetry_proto_collector_trace_v1_trace_service_proto},
		{colmetricsv1.File_opentelemetry_proto_collector_metrics_v1_metrics_service_proto, rcolmetrics.File_opentelemetry_proto_collector_metrics_v1_metrics_service_proto},
		{collogsv1.File_opentelemetry_proto_collector_logs_v1_logs_service_proto, rcollogs.File_opentelemetry_proto_collector_logs_v1_logs_service_proto},
	}
}

func TestDescriptorsMatchReference(t *testing.T) {
	for _, p := range filePairs() {
		t.Run(p.ref.Path(), func(t *testing.T) {
			if p.ref.Messages().Len() == 0 && p.ref.Services().Len() == 0 {
				t.Fatalf("reference file %s declares nothing: the comparison would be vacuous", p.ref.Path())
			}
			for _, d := range compareFiles(p.ours, p.ref) {
				t.Error(d)
			}
		})
	}
}

// descDiff collects mismatches, each prefixed with the full name of the element that differs.
type descDiff []string

func (d *descDiff) add(name protoreflect.FullName, what string, ours, ref any) {
	*d = append(*d, fmt.Sprintf("%s: %s: ours %v, reference %v", name, what, ours, ref))
}

func (d *descDiff) check(name protoreflect.FullName, what string, ours, ref any) {
	if ours != ref {
		d.add(name, what, ours, ref)
	}
}

// compareFiles lists every difference between two file descriptors that could change the wire
// format, the JSON mapping, or the gRPC method paths. Source order and comments are ignored.
func compareFiles(ours, ref protoreflect.FileDescriptor) []string {
	var d descDiff
	name := protoreflect.FullName(ref.Path())
	d.check(name, "path", ours.Path(), ref.Path())
	d.check(name, "package", ours.Package(), ref.Package())
	d.check(name, "syntax", ours.Syntax(), ref.Syntax())
	d.compareMessages(ref.Package(), ours.Messages(), ref.Messages())
	d.compareEnums(ref.Package(), ours.Enums(), ref.Enums())
	d.compareServices(ref.Package(), ours.Services(), ref.Services())
	if ours.Extensions().Len() != 0 || ref.Extensions().Len() != 0 {
		d.check(name, "extensions", ours.Extensions().Len(), ref.Extensions().Len())
	}
	return d
}

func (d *descDiff) compareMessages(parent protoreflect.FullName, ours, ref protoreflect.MessageDescriptors) {
	for i := range ref.Len() {
		r := ref.Get(i)
		o := ours.ByName(r.Name())
		if o == nil {
			d.add(r.FullName(), "message", "missing", "declared")
			continue
		}
		d.compareMessage(o, r)
	}
	for i := range ours.Len() {
		if o := ours.Get(i); ref.ByName(o.Name()) == nil {
			d.add(parent.Append(o.Name()), "message", "declared", "missing")
		}
	}
}

func (d *descDiff) compareMessage(o, r protoreflect.MessageDescriptor) {
	name := r.FullName()
	d.check(name, "full name", o.FullName(), r.FullName())
	d.check(name, "map entry", o.IsMapEntry(), r.IsMapEntry())
	d.check(name, "reserved ranges", fieldRanges(o.ReservedRanges()), fieldRanges(r.ReservedRanges()))
	d.check(name, "reserved names", names(o.ReservedNames()), names(r.ReservedNames()))
	d.check(name, "extension ranges", fieldRanges(o.ExtensionRanges()), fieldRanges(r.ExtensionRanges()))

	for i := range r.Fields().Len() {
		rf := r.Fields().Get(i)
		of := o.Fields().ByName(rf.Name())
		if of == nil {
			d.add(rf.FullName(), "field", "missing", fmt.Sprintf("declared as number %d", rf.Number()))
			continue
		}
		d.compareField(of, rf)
	}
	for i := range o.Fields().Len() {
		if of := o.Fields().Get(i); r.Fields().ByName(of.Name()) == nil {
			d.add(name.Append(of.Name()), "field", fmt.Sprintf("declared as number %d", of.Number()), "missing")
		}
	}

	for i := range r.Oneofs().Len() {
		ro := r.Oneofs().Get(i)
		oo := o.Oneofs().ByName(ro.Name())
		if oo == nil {
			d.add(ro.FullName(), "oneof", "missing", "declared")
			continue
		}
		d.check(ro.FullName(), "synthetic", oo.IsSynthetic(), ro.IsSynthetic())
		d.check(ro.FullName(), "members", oneofMembers(oo), oneofMembers(ro))
	}
	for i := range o.Oneofs().Len() {
		if oo := o.Oneofs().Get(i); r.Oneofs().ByName(oo.Name()) == nil {
			d.add(name.Append(oo.Name()), "oneof", "declared", "missing")
		}
	}

	d.compareMessages(name, o.Messages(), r.Messages())
	d.compareEnums(name, o.Enums(), r.Enums())
	if o.Extensions().Len() != 0 || r.Extensions().Len() != 0 {
		d.check(name, "extensions", o.Extensions().Len(), r.Extensions().Len())
	}
}

func (d *descDiff) compareField(o, r protoreflect.FieldDescriptor) {
	name := r.FullName()
	d.check(name, "number", o.Number(), r.Number())
	d.check(name, "kind", o.Kind(), r.Kind())
	d.check(name, "cardinality", o.Cardinality(), r.Cardinality())
	d.check(name, "json name", o.JSONName(), r.JSONName())
	d.check(name, "packed", o.IsPacked(), r.IsPacked())
	d.check(name, "has presence", o.HasPresence(), r.HasPresence())
	d.check(name, "proto3 optional", o.HasOptionalKeyword(), r.HasOptionalKeyword())
	d.check(name, "oneof", oneofName(o), oneofName(r))
	d.check(name, "map", o.IsMap(), r.IsMap())
	d.check(name, "has default", o.HasDefault(), r.HasDefault())
	if o.HasDefault() && r.HasDefault() {
		d.check(name, "default", fmt.Sprint(o.Default().Interface()), fmt.Sprint(r.Default().Interface()))
	}
	if r.Message() != nil || o.Message() != nil {
		d.check(name, "message type", typeName(o.Message()), typeName(r.Message()))
	}
	if r.Enum() != nil || o.Enum() != nil {
		d.check(name, "enum type", typeName(o.Enum()), typeName(r.Enum()))
	}
}

func (d *descDiff) compareEnums(parent protoreflect.FullName, ours, ref protoreflect.EnumDescriptors) {
	for i := range ref.Len() {
		r := ref.Get(i)
		o := ours.ByName(r.Name())
		if o == nil {
			d.add(r.FullName(), "enum", "missing", "declared")
			continue
		}
		name := r.FullName()
		d.check(name, "closed", o.IsClosed(), r.IsClosed())
		d.check(name, "reserved ranges", enumRanges(o.ReservedRanges()), enumRanges(r.ReservedRanges()))
		d.check(name, "reserved names", names(o.ReservedNames()), names(r.ReservedNames()))
		for j := range r.Values().Len() {
			rv := r.Values().Get(j)
			ov := o.Values().ByName(rv.Name())
			if ov == nil {
				d.add(rv.FullName(), "enum value", "missing", fmt.Sprintf("declared as %d", rv.Number()))
				continue
			}
			d.check(rv.FullName(), "number", ov.Number(), rv.Number())
		}
		for j := range o.Values().Len() {
			if ov := o.Values().Get(j); r.Values().ByName(ov.Name()) == nil {
				d.add(ov.FullName(), "enum value", fmt.Sprintf("declared as %d", ov.Number()), "missing")
			}
		}
	}
	for i := range ours.Len() {
		if o := ours.Get(i); ref.ByName(o.Name()) == nil {
			d.add(parent.Append(o.Name()), "enum", "declared", "missing")
		}
	}
}

func (d *descDiff) compareServices(pkg protoreflect.FullName, ours, ref protoreflect.ServiceDescriptors) {
	for i := range ref.Len() {
		r := ref.Get(i)
		o := ours.ByName(r.Name())
		if o == nil {
			d.add(r.FullName(), "service", "missing", "declared")
			continue
		}
		for j := range r.Methods().Len() {
			rm := r.Methods().Get(j)
			om := o.Methods().ByName(rm.Name())
			if om == nil {
				d.add(rm.FullName(), "method", "missing", "declared")
				continue
			}
			d.check(rm.FullName(), "input", om.Input().FullName(), rm.Input().FullName())
			d.check(rm.FullName(), "output", om.Output().FullName(), rm.Output().FullName())
			d.check(rm.FullName(), "client streaming", om.IsStreamingClient(), rm.IsStreamingClient())
			d.check(rm.FullName(), "server streaming", om.IsStreamingServer(), rm.IsStreamingServer())
		}
		for j := range o.Methods().Len() {
			if om := o.Methods().Get(j); r.Methods().ByName(om.Name()) == nil {
				d.add(om.FullName(), "method", "declared", "missing")
			}
		}
	}
	for i := range ours.Len() {
		if o := ours.Get(i); ref.ByName(o.Name()) == nil {
			d.add(pkg.Append(o.Name()), "service", "declared", "missing")
		}
	}
}

func oneofName(f protoreflect.FieldDescriptor) string {
	if od := f.ContainingOneof(); od != nil {
		return string(od.Name())
	}
	return "(none)"
}

func oneofMembers(od protoreflect.OneofDescriptor) string {
	var s []string
	for i := range od.Fields().Len() {
		s = append(s, string(od.Fields().Get(i).Name()))
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

func typeName(d protoreflect.Descriptor) string {
	if d == nil {
		return "(none)"
	}
	return string(d.FullName())
}

// fieldRanges renders ranges as inclusive [a,b] in sorted order, so that declaration order
// (which the wire does not see) does not count as a difference.
func fieldRanges(rs protoreflect.FieldRanges) string {
	var s []string
	for i := range rs.Len() {
		r := rs.Get(i)
		s = append(s, fmt.Sprintf("[%d,%d]", r[0], r[1]-1))
	}
	slices.Sort(s)
	return "{" + strings.Join(s, " ") + "}"
}

func enumRanges(rs protoreflect.EnumRanges) string {
	var s []string
	for i := range rs.Len() {
		r := rs.Get(i)
		s = append(s, fmt.Sprintf("[%d,%d]", r[0], r[1]))
	}
	slices.Sort(s)
	return "{" + strings.Join(s, " ") + "}"
}

func names(ns protoreflect.Names) string {
	var s []string
	for i := range ns.Len() {
		s = append(s, string(ns.Get(i)))
	}
	slices.Sort(s)
	return "{" + strings.Join(s, " ") + "}"
}
