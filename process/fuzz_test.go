package process

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// FuzzAppendEntry feeds arbitrary entries to every step at once: nothing panics, and whatever
// the Collector's decoder reads on the way in, it reads on the way out, with no more spans.
func FuzzAppendEntry(f *testing.F) {
	req := benchRequest(f, 2)
	for off := 0; off < len(req); {
		fl, err := next(req, off)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(req[fl.val:fl.end])
		off = fl.end
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x00, 0x12, 0x00})
	c := mustChain(f, stepConfigs[len(stepConfigs)-1].cfg)
	f.Fuzz(func(t *testing.T, entry []byte) {
		in := appendHeader(nil, 1, len(entry))
		in = append(in, entry...)
		out, tally, err := c.AppendEntry(nil, sigTraces, entry)
		removed := int(tally[tRemoved])
		if err != nil {
			return
		}
		before, errIn := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(in)
		if errIn != nil {
			return
		}
		after, errOut := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(out)
		if errOut != nil {
			t.Fatalf("the decoder reads the input but not the output: %v\nin  % x\nout % x", errOut, in, out)
		}
		if after.SpanCount()+removed != before.SpanCount() {
			t.Fatalf("%d spans in, %d out, %d removed", before.SpanCount(), after.SpanCount(), removed)
		}
	})
}
