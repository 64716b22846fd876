package fastpath

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/otlpgate/otlpgate/fastpath/internal/gen"
)

var regenerate = flag.Bool("gen", false, "rewrite walk_gen.go from the schema table")

// genKinds maps the schema's wire kinds to the generator's.
var genKinds = map[wireKind]gen.Kind{
	kVarint:        gen.Varint,
	kFixed32:       gen.Fixed32,
	kFixed64:       gen.Fixed64,
	kBytes:         gen.Bytes,
	kString:        gen.String,
	kMessage:       gen.Message,
	kPackedFixed64: gen.PackedFixed64,
	kPackedVarint:  gen.PackedVarint,
	kTraceID:       gen.TraceID,
	kSpanID:        gen.SpanID,
}

// legacyNames are the names the fLegacy fields had before the .proto files reserved them.
var legacyNames = map[msgID]string{
	mResourceSpans:   "instrumentation_library_spans",
	mResourceMetrics: "instrumentation_library_metrics",
	mResourceLogs:    "instrumentation_library_logs",
}

// genSchema hands the schema table to the generator, naming messages and fields after the
// descriptors schema_test.go pairs them with.
func genSchema(t *testing.T) gen.Schema {
	var s gen.Schema
	for m := range numMsgs {
		md := schemaMessages[m].ProtoReflect().Descriptor()
		name := strings.TrimPrefix(string(md.FullName()), string(md.ParentFile().Package())+".")
		msg := gen.Msg{Name: strings.ReplaceAll(name, ".", "")}
		for num, f := range schema[m] {
			if f.kind == kUnknown {
				continue
			}
			kind, ok := genKinds[f.kind]
			if !ok {
				t.Fatalf("%s field %d: kind %d unknown to the generator", name, num, f.kind)
			}
			var fname string
			if f.flags&fLegacy != 0 {
				fname = legacyNames[msgID(m)]
			} else if fd := md.Fields().ByNumber(protoreflect.FieldNumber(num)); fd != nil {
				fname = string(fd.Name())
			}
			if fname == "" {
				t.Fatalf("%s has no field %d", name, num)
			}
			msg.Fields = append(msg.Fields, gen.Field{
				Num: num, Name: fname, Kind: kind, Msg: int(f.msg),
				Path: f.flags&fPath != 0, Item: f.flags&fItem != 0, Oneof: f.flags&fOneof != 0,
				Legacy: f.flags&fLegacy != 0,
			})
		}
		s.Msgs = append(s.Msgs, msg)
	}
	for _, r := range resourceMsg {
		s.Roots = append(s.Roots, int(r))
	}
	return s
}

// TestWalkersGenerated checks that walk_gen.go is what the generator makes of the schema table
// (go generate ./fastpath, or this test with -gen, rewrites it).
func TestWalkersGenerated(t *testing.T) {
	want, err := gen.Generate(genSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	if *regenerate {
		if err := os.WriteFile("walk_gen.go", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("walk_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("walk_gen.go is stale: run go generate ./fastpath")
	}
}
