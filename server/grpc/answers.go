package grpcserver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// The answers of an OTEP stream are a few bytes each (id and result code: at most 18), and a
// client that grants the stream no HTTP/2 window takes none of them: gRPC queues each with its
// buffer until the connection ends, and its write quota counts only the bytes (5 + 3 for a
// typical answer, so 8,192 answers per stream before SendMsg blocks). Marshalled by the codec,
// each sat in a 4 KiB pooled buffer: 32 such streams held 1.23 GiB.
//
// So a stream marshals its answers into slots of a slab of its own, 16 bytes each, and learns
// from gRPC (codec.Track) when each slot was written out. With every slot waiting
// (-grpc.stream.max-unsent), the stream stops reading requests; when none comes back within
// -grpc.stream.answer-timeout, the connection is closed, since gRPC frees a stream's queued
// answers only with its connection.

// answerStride is the room of one answer in the slab: the largest ExportResponse is 18 bytes
// (an id of 10, a result code, and a retry_delay_ms below 2^28: maxRetryDelayMs).
const answerStride = 24

var (
	streamStalls = promauto.NewCounter(prometheus.CounterOpts{
		Name: "otlpgate_grpc_stream_stalls_total",
		Help: "Times an OTEP stream stopped reading requests because -grpc.stream.max-unsent of its answers were not yet taken by the client.",
	})
	errAnswersNotTaken = status.Error(codes.ResourceExhausted, "answers not taken by the client within -grpc.stream.answer-timeout")
)

// answerSlot is one answer's room in a stream's slab. It is gRPC's mem.BufferPool for the
// buffer it hands over: Put is the notice that the transport wrote the answer (or dropped it
// with its stream), and returns the slot to its ring.
//
// Invariants:
//
//  1. A slot is in ring.free, or with the sender between take and SendMsg, or with gRPC from
//     Marshal until Put. SendMsg always marshals (grpc-go encodes before anything can fail), so
//     a slot handed to SendMsg comes back through Put, whatever SendMsg returns, unless the
//     connection closes with the answer queued (then the stream is over and the ring with it).
//  2. b is a window of the slab whose capacity runs to the slab's end, at least
//     codec.MinTracked, so that gRPC counts references to it; only its first len(b) bytes
//     are sent, and no two slots' lengths overlap.
//  3. Answers are never compressed (the stream sets the identity compressor): a compressed copy
//     would be queued instead of the slot, and go uncounted.
type answerSlot struct {
	codec.FreeNotice
	free chan *answerSlot
	b    []byte
	bufs [1]mem.Buffer
}

// Put is gRPC's notice that the answer's buffer was freed; it runs on gRPC's writer.
func (a *answerSlot) Put(*[]byte) {
	a.free <- a // never blocks: the channel has room for every slot
}

// answerRing is the slots of one stream, made as they are first needed. It belongs to the
// stream's sender goroutine; Put returns slots from gRPC's writer through free.
type answerRing struct {
	free chan *answerSlot
	slab []byte
	made int
	max  int
}

func (r *answerRing) init(max int) {
	r.max = max
	r.free = make(chan *answerSlot, max)
}

// take returns a free slot, waiting up to timeout when all max are with gRPC (counted as a
// stall), or until done is closed; nil when none came back.
func (r *answerRing) take(timeout time.Duration, done <-chan struct{}) *answerSlot {
	select {
	case a := <-r.free:
		return a
	default:
	}
	if r.made < r.max {
		if r.slab == nil {
			r.slab = make([]byte, r.max*answerStride+codec.MinTracked)
		}
		a := &answerSlot{free: r.free, b: r.slab[r.made*answerStride : r.made*answerStride]}
		r.made++
		return a
	}
	streamStalls.Inc()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case a := <-r.free:
		return a
	case <-t.C:
	case <-done:
	}
	return nil
}

// fill marshals resp into a.
func (a *answerSlot) fill(resp *otepv1.ExportResponse) {
	n := resp.SizeVT()
	a.b = a.b[:n]
	if _, err := resp.MarshalToSizedBufferVT(a.b); err != nil {
		panic("BUG: grpc: an answer does not fit its slot: " + err.Error())
	}
}

// marshal hands a's bytes to gRPC, which gives them back through Put.
func (a *answerSlot) marshal() mem.BufferSlice {
	a.bufs[0] = codec.Track(&a.b, a)
	return a.bufs[:]
}

// answerCodec is codec.New's codec that also marshals answer slots. Safe for concurrent use.
type answerCodec struct{ inner encoding.CodecV2 }

func (c answerCodec) Name() string { return codec.Name }

func (c answerCodec) Marshal(v any) (mem.BufferSlice, error) {
	if a, ok := v.(*answerSlot); ok {
		return a.marshal(), nil
	}
	return c.inner.Marshal(v)
}

func (c answerCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return c.inner.Unmarshal(data, v)
}
