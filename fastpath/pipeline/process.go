package pipeline

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

// Processor runs byte-level steps on each resource entry of a request after the intake's scan
// and before the request joins a batch (or the spool): resource attribute edits, drops by
// resource attribute, trace sampling. process.Chain implements it; the pipeline does not
// import fastpath/process (it imports the pipeline, for this contract and Tally).
type Processor interface {
	// AppendEntry appends to dst the resource entry whose value (the bytes after its tag and
	// length) is entry, once the steps ran on it, as a whole v1 entry (tag 1, length, value),
	// or appends nothing when the steps remove it. The tally says what the steps did: its
	// slot TallyRemoved is the number of items (spans, data points, log records) the result
	// holds fewer than entry, the other slots are the processor's own. An error refuses the
	// whole request.
	// dst has at least len(entry)+Slack(sig, len(entry))+maxEntryHeader bytes of spare
	// capacity, so that an implementation that stays within it does not allocate. peer is the
	// client address of the request (Origin.Peer), invalid when it has none. Safe for
	// concurrent use; entry is only read during the call.
	AppendEntry(dst []byte, sig fastpath.Signal, entry []byte, peer netip.Addr) (out []byte, tally Tally, err error)
	// Commit counts the summed tallies of one request's entries, once the request was
	// admitted or answered without admitting anything: a request refused for want of room and
	// sent again is counted once. Safe for concurrent use.
	Commit(sig fastpath.Signal, tally Tally)
	// Slack is the most bytes the steps may add to an entry of n bytes of signal sig (a
	// sampler that writes each kept span's trace_state adds in proportion to the entry).
	Slack(sig fastpath.Signal, n int) int
}

// Steps holds the Processor in force (Config.Steps), which a reload of the processing flags
// replaces while requests flow: each request runs through the one in force when it is prepared,
// every entry of it, and commits its tally to that one, so that no request mixes two sets of
// steps nor counts one's tally as the other's. Safe for concurrent use.
type Steps struct{ p atomic.Pointer[stepsOf] }

type stepsOf struct{ Processor }

// NewSteps returns Steps holding p (nil: no step).
func NewSteps(p Processor) *Steps {
	s := &Steps{}
	s.Set(p)
	return s
}

// Set makes p the Processor in force (nil: no step) for the requests prepared from now on.
func (s *Steps) Set(p Processor) { s.p.Store(&stepsOf{p}) }

// Load returns the Processor in force, nil for none.
func (s *Steps) Load() Processor {
	if h := s.p.Load(); h != nil {
		return h.Processor
	}
	return nil
}

// processor returns the Processor in force under c: Steps's, else Processor.
func (c *Config) processor() Processor {
	if c.Steps != nil {
		return c.Steps.Load()
	}
	return c.Processor
}

// Tally is what a Processor did to a request, a count per slot, each slot named by a
// TallySlot: TallyRemoved, the items the request lost, is admission's to read; the others are
// the processor's own, named where they are counted (fastpath/process). Admission sums the
// tallies of a request's entries (Add) and hands the sum back to Commit. A value of a few
// words: passing it allocates nothing.
type Tally [NumTallySlots]int64

// TallySlot names what a slot of a Tally counts.
type TallySlot uint8

const (
	// TallyRemoved counts the items (spans, data points, log records) a request lost.
	TallyRemoved TallySlot = 0
	// NumTallySlots is the room of a Tally: TallyRemoved and the processor's own slots.
	NumTallySlots = 8
)

// Add adds u to t, slot by slot.
func (t *Tally) Add(u *Tally) {
	for i := range t {
		t[i] += u[i]
	}
}

// maxEntryHeader is the room an entry's tag and length prefix take at most.
const maxEntryHeader = 1 + binary.MaxVarintLen64

// processEntries runs the Processor on every entry of req (in layout), from the client address
// peer, into out, a buffer charged
// to out.b as it grows and never past out.max, and returns the item count of the v1 body it
// holds then (the body admitted instead of req): items less what the steps removed. Fields
// that are not entries are stripped and counted, as AppendEntries does, and reported for
// admission to count, with the summed tally for Commit. On error (ErrBudget, errOverQueue: the
// output would pass a bound; a step's error) out holds nothing: the request is refused before
// the rest of its output is built. The caller releases out.
func processEntries(proc Processor, out *charged, sig fastpath.Signal, req []byte, items int, layout fastpath.Layout, peer netip.Addr) (int, fastpath.Stripped, Tally, error) {
	var st fastpath.Stripped
	var sum Tally
	if layout >= fastpath.NumLayouts {
		return 0, st, sum, fastpath.ErrLayout
	}
	// The first buffer has room for req unchanged; a request that grows takes more as it does.
	if err := out.get(min(len(req)+proc.Slack(sig, len(req))+maxEntryHeader, out.max)); err != nil {
		return 0, st, sum, err
	}
	b := *out.buf
	fail := func(err error) (int, fastpath.Stripped, Tally, error) {
		*out.buf = b[:0]
		out.release()
		return 0, fastpath.Stripped{}, sum, err
	}
	it := fastpath.NewTopLevel(req)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		switch {
		case layout == fastpath.LayoutV1 && f.Num == 1, layout == fastpath.LayoutOTEP && f.Num == 2:
			if f.Type != protowire.BytesType {
				return fail(fastpath.ErrWireType)
			}
			entry := req[f.Value:f.End]
			if need := len(b) + len(entry) + proc.Slack(sig, len(entry)) + maxEntryHeader; need > cap(b) {
				// Room for what the entry may become, taken before the steps write it, so that
				// nothing they write grows the buffer past its charge. A request whose output
				// may pass the bound is refused here, before the rest of it is built.
				var err error
				if b, err = out.grow(b, need); err != nil {
					return fail(err)
				}
			}
			var t Tally
			var err error
			if b, t, err = proc.AppendEntry(b, sig, entry, peer); err != nil {
				return fail(err)
			}
			if len(b) > out.max {
				return fail(errOverQueue)
			}
			sum.Add(&t)
		case layout == fastpath.LayoutOTEP && f.Num == 1:
			if f.Type != protowire.VarintType {
				return fail(fastpath.ErrWireType)
			}
		default:
			st.Fields++
			st.Bytes += f.End - f.Tag
		}
	}
	if err := it.Err(); err != nil {
		return fail(err)
	}
	*out.buf = b
	return max(items-int(sum[TallyRemoved]), 0), st, sum, nil
}
