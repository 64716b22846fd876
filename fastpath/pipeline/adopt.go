package pipeline

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/pool"
)

// adoptedBytes counts the bytes that became a batch without a copy. The intakes that read a
// whole request into a pooled buffer of their own (the OTLP/HTTP body, gRPC's contiguous copy
// of a message that arrived in several frames) offer that buffer with the request
// (Request.Own), and a batch the request opens alone may take it over rather than copy it.
var adoptedBytes = promauto.NewCounter(prometheus.CounterOpts{
	Name: "otlpgate_fastpath_adopted_bytes_total",
	Help: "Bytes of requests whose intake buffer became their batch's payload as it was, without a copy: a request of OTLP/HTTP protobuf or gRPC v1 that opened a batch alone, in v1 form with nothing to strip or process.",
})

// adoptMinShare is the least share of a fresh batch's first buffer (initialSize) a request
// must fill for the batch to adopt the request's buffer: a small request is copied into a
// buffer sized for the batch, where the requests after it fit without growing it; one that
// fills half of it or more gains a copy and loses at most one growth (a copy of what it
// adopted, the copy it saved).
const adoptMinShare = 2

// adoptable reports whether r can become, as it is, the buffer of the fresh batch it opens,
// whose buffer would start with size bytes: r offered its buffer (own), that buffer holds
// exactly r.Req, and r's v1 form is r.Req itself (layout v1, only resource entries at its top
// level: AppendEntries would copy it verbatim and strip nothing).
func (r *Prepared) adoptable(size int) bool {
	own := r.own
	return own != nil && r.Layout == fastpath.LayoutV1 && len(r.Req) > 0 &&
		len(*own) == len(r.Req) && &(*own)[0] == &r.Req[0] &&
		adoptMinShare*len(r.Req) >= size && onlyEntries(r.Req)
}

// adopt makes the request in *own the payload of b, a fresh batch nothing else holds yet, and
// gives the caller b's empty buffer in exchange: from here on *own and b share no bytes, so
// whatever the caller does with *own (return it to the pool, which may hand it to the next
// request) cannot reach the batch.
func adopt(b *Batch, own *[]byte) {
	pb := b.Payload.Buf()
	*pb, *own = *own, (*pb)[:0]
	adoptedBytes.Add(float64(len(*pb)))
}

// adoptSize is the buffer a batch that adopts its first request's buffer is made with: the
// smallest, since it only goes back to the intake in exchange.
const adoptSize = pool.MinSize
