package fastpath_test

import (
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/pool"
)

// outcome records how the owner of a batch was told it finished.
type outcome struct{ calls []string }

func (o *outcome) BatchDone(delivered bool) {
	if delivered {
		o.calls = append(o.calls, "delivered")
	} else {
		o.calls = append(o.calls, "dropped")
	}
}

func (o *outcome) BatchRejected() { o.calls = append(o.calls, "rejected") }

// A batch its upstream refused for good reaches its owner as rejected (the spool counts its
// records so), also when a fleet split it into parts, but only when every part that failed was
// refused: a part given up for another reason makes the whole a plain drop.
func TestRejectReachesOwner(t *testing.T) {
	const (
		deliver = iota
		reject
		drop
	)
	finish := func(b *pipeline.Batch, how int) {
		switch how {
		case deliver:
			b.Done(true)
		case reject:
			b.Reject()
		default:
			b.Done(false)
		}
	}
	in := splitTraces(t)
	for _, c := range []struct {
		name  string
		parts []int // how each part finishes; one: the batch is not split
		want  string
	}{
		{"whole delivered", []int{deliver}, "delivered"},
		{"whole rejected", []int{reject}, "rejected"},
		{"whole dropped", []int{drop}, "dropped"},
		{"parts rejected", []int{reject, reject}, "rejected"},
		{"one part rejected", []int{deliver, reject}, "rejected"},
		{"one rejected, one dropped", []int{reject, drop}, "dropped"},
		{"parts delivered", []int{deliver, deliver}, "delivered"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := &outcome{}
			p := pool.NewPayload(len(in))
			*p.Buf() = append(*p.Buf(), in...)
			b := pipeline.NewBatch(fastpath.Traces, 48, p, o)
			if len(c.parts) == 1 {
				finish(b, c.parts[0])
			} else {
				s := pipeline.GetSplitter()
				defer pipeline.PutSplitter(s)
				whole, parts, err := s.Split(b, fastpath.SplitTraceID, len(c.parts), &modPicker{len(c.parts)})
				if err != nil || whole != -1 {
					t.Fatalf("split: whole %d, err %v", whole, err)
				}
				for i, k := range parts {
					if k == nil {
						t.Fatalf("part %d empty", i)
					}
					finish(k, c.parts[i])
				}
			}
			if len(o.calls) != 1 || o.calls[0] != c.want {
				t.Errorf("owner told %v, want [%s]", o.calls, c.want)
			}
		})
	}
}
