package uds

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

// The UDS intake's output is a batchable v1 body for every capture: resource entries only (no
// other top-level field, which a batch must not carry), accepted by a full scan and by the
// OTEP framing, with nothing for admission to strip.
func TestOutputIsBatchable(t *testing.T) {
	total := 0
	for _, name := range captures {
		t.Run(name, func(t *testing.T) {
			h := start(t, nil)
			h.replay(readFile(t, name+".bin"), 0)
			h.shutdown()
			got := h.rec.Received()
			total += len(got)
			for i, p := range got {
				it := fastpath.NewTopLevel(p.Body)
				for f, ok := it.Next(); ok; f, ok = it.Next() {
					if f.Num != 1 || f.Type != protowire.BytesType {
						t.Fatalf("%v payload %d holds top-level field %d (wire type %d)", p.Signal, i, f.Num, f.Type)
					}
				}
				if err := it.Err(); err != nil {
					t.Fatalf("%v payload %d: %v", p.Signal, i, err)
				}
				if _, err := fastpath.ScanRequest(p.Signal, p.Body, fastpath.LayoutV1, fastpath.DepthFull); err != nil {
					t.Fatalf("%v payload %d does not scan: %v", p.Signal, i, err)
				}
				if _, _, st, err := fastpath.AppendEntries(nil, p.Body, fastpath.LayoutV1); err != nil || st.Fields != 0 {
					t.Fatalf("%v payload %d: admission would strip %+v, %v", p.Signal, i, st, err)
				}
				if _, err := fastpath.AppendOTEP(nil, 1, p.Body); err != nil {
					t.Fatalf("%v payload %d does not frame as OTEP: %v", p.Signal, i, err)
				}
			}
		})
	}
	if total == 0 {
		t.Fatal("the captures produced no output")
	}
}
