package client

import (
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/pool"
)

// request is one batch on its way to one destination, from Enqueue to Done. It is owned by
// exactly one place at a time: the queue, a sender between pop and send, the ack table while
// a stream waits for its answer, a unary worker during its call, or the retry heap. Whoever
// takes it out of one of these owns it and must put it in another or finish it.
type request struct {
	b       *pipeline.Batch // holds the destination's payload reference until Done
	id      uint64          // sequential per destination, kept across attempts
	sig     fastpath.Signal
	items   int
	size    int
	attempt int32 // sends so far
	strikes int32 // streams that ended with INTERNAL while this request was alone on them (poison.go)
	suspect bool  // pending on a stream that ended with INTERNAL: sent alone until answered (poison.go)
	// suspectAt is the destination's evidence (Dest.evidence) when the request became a
	// suspect or last ended a stream alone: a strike counts once that moved (poison.go).
	suspectAt uint64
	taken     int64 // monotonic ns at which the destination took the batch: the retry budget starts here
	sentAt    int64 // monotonic ns at which the latest send was handed to the transport; notSent before
	due       int64 // monotonic ns at which a delayed retry becomes ready
	// outage: its delay is the backoff after a failure to reach the upstream (retryOutage),
	// which the upstream's next success ends (queue.releaseOutage); released: one did, and
	// the request sleeps its later backoffs out, so that a request that keeps failing while
	// others succeed is not sent again at the pace of their successes.
	outage, released bool
	stream           *stream // the stream the latest send went out on (stream mode)
	// stalledAt is its stream's stalled time (stream.stalled) when this request was handed to
	// the transport: what the stream stalls afterwards is not held against the upstream.
	stalledAt int64
}

// notSent is the sentAt of a request in the ack table whose SendMsg has not returned yet: its
// answer cannot be overdue, because the ack timeout counts from when the transport took it.
const notSent = int64(1<<63 - 1)

// requests recycles requests through a free list that collections do not empty (a sync.Pool
// makes them again after each one). A request exists from the queue on, so the list holds a
// queue's worth of small batches; requests beyond it are dropped for the collector.
var requests = pool.NewFreeList[request](maxFreeRequests, nil)

const maxFreeRequests = 4096

func getRequest(b *pipeline.Batch, id uint64) *request {
	r := requests.Get()
	r.b, r.id, r.sig, r.items, r.size = b, id, b.Signal, b.Items, b.Len()
	r.taken = nanotime()
	return r
}

func putRequest(r *request) {
	*r = request{}
	requests.Put(r)
}

// epoch anchors monotonic timestamps: time.Since reads the monotonic clock, and an int64 of
// nanoseconds is cheaper to store and compare than a time.Time.
var epoch = time.Now()

func nanotime() int64 { return int64(time.Since(epoch)) }
