package pipeline

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

// Encoding is how a batch's bytes are compressed.
type Encoding uint8

const (
	EncodingNone Encoding = iota // a plain v1 request body
	EncodingGzip                 // concatenated gzip members
	EncodingZstd                 // a zstd skippable frame, then concatenated zstd frames
	numEncodings
)

var encodingNames = [numEncodings]string{"none", "gzip", "zstd"}

func (e Encoding) String() string {
	if e < numEncodings {
		return encodingNames[e]
	}
	return "unknown"
}

// ZstdPreamble is the empty zstd skippable frame (magic 0x184D2A57, length 0) a pass-through
// zstd batch begins with. A zstd frame's own magic (28 b5 2f fd) reads as a valid start of a
// protobuf message (field 5, varint), so a compressor handed a batch could not tell it from a
// message to compress; the skippable frame's first byte, 0x57, is field 10 with wire type 7,
// which no protobuf message begins with. Decoders skip the frame.
var ZstdPreamble = [8]byte{0x57, 0x2a, 0x4d, 0x18, 0, 0, 0, 0}

// WireEncoder is implemented by a destination that can send a pass-through batch's bytes as
// they are: PassThrough returns the encoding it compresses with, EncodingNone when it cannot
// (no compression, a protocol that wraps the body in another message, a balanced fleet that
// splits batches by content). Safe for concurrent use; the answer never changes.
type WireEncoder interface {
	PassThrough() Encoding
}

// Fallback is why a compressed request was decompressed into a plain batch, the reason label
// of otlpgate_fastpath_passthrough_fallback_requests_total. A tenant (-intake.headers) is no
// reason: its requests pass through into batches of their own, and where they cannot, the
// reason is one of these, as for any request (with match-header, "destinations" looks only at
// the destinations that take the tenant).
type Fallback uint8

const (
	FallbackOff          Fallback = iota // -compression.passthrough=false
	FallbackProcessor                    // a processing step may rewrite it (-resource.*, -drop, -sample.traces)
	FallbackDestinations                 // some destination that takes it does not send its encoding as is
	FallbackFields                       // it has top-level fields the batch strips
	FallbackSpool                        // an admitter that keeps no compressed request: none since the spool keeps them, the label kept for dashboards
	FallbackRoutes                       // a destination's match=resource may split it
	numFallbacks
)

var fallbackNames = [numFallbacks]string{"off", "processor", "destinations", "fields", "spool", "routes"}

var (
	passRequests = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_passthrough_requests_total",
		Help: "Protobuf requests that arrived gzip- or zstd-compressed over OTLP/HTTP or gRPC v1 (in -grpc.passthrough-encoding), by the way they joined a batch (compressed: their bytes as received, -compression.passthrough; plain: decompressed).",
	}, []string{"way"})
	passBytes = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_passthrough_bytes_total",
		Help: "Bytes of the requests counted in otlpgate_fastpath_passthrough_requests_total as they joined a batch (compressed: as received; plain: decompressed).",
	}, []string{"way"})
	passBatches = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_passthrough_batches_total",
		Help: "Sealed batches by the way their bytes travel (compressed: concatenated compressed requests, sent as they are, -compression.passthrough; plain: a v1 body each destination compresses itself).",
	}, []string{"way"})
	passFallbacks = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_fastpath_passthrough_fallback_requests_total",
		Help: "Compressed requests admitted decompressed, by reason (off: -compression.passthrough=false; processor: a processing step is set; destinations: a destination that takes the request (with match-header: its tenant's) does not send that compression as is; fields: top-level fields to strip; spool: an admitter that keeps no compressed request, none since the spool keeps them; routes: a destination's match=resource).",
	}, []string{"reason"})

	passRequestsC = [2]prometheus.Counter{passRequests.WithLabelValues("plain"), passRequests.WithLabelValues("compressed")}
	passBytesC    = [2]prometheus.Counter{passBytes.WithLabelValues("plain"), passBytes.WithLabelValues("compressed")}
	passBatchesC  = [2]prometheus.Counter{passBatches.WithLabelValues("plain"), passBatches.WithLabelValues("compressed")}
	passFallbackC = func() (c [numFallbacks]prometheus.Counter) {
		for f := range numFallbacks {
			c[f] = passFallbacks.WithLabelValues(fallbackNames[f])
		}
		return c
	}()
)

// countFallback counts a compressed request of plain decompressed bytes admitted plain for
// reason f. Safe for concurrent use.
func countFallback(f Fallback, plain int) {
	passFallbackC[f].Inc()
	passRequestsC[0].Inc()
	passBytesC[0].Add(float64(plain))
}

// countSealed counts a sealed batch by its way.
func countSealed(b *Batch) {
	if b.Encoding == EncodingNone {
		passBatchesC[0].Inc()
	} else {
		passBatchesC[1].Inc()
	}
}

// passesTo reports whether a request of signal sig that arrived compressed with enc, whose
// decompressed body is plain, may join a pass-through batch under cfg, for destinations that
// send pass-through batches in dest (those that take its tenant, all of them without
// match-header), else why not. Nothing in the batch may differ from the request as received:
// no processing step, no resource route, no field the plain path would strip (AppendEntries
// keeps the resource entries alone), and every such destination sends enc as it is. A tenant
// alone is no reason: batches are per tenant either way.
func passesTo(cfg *Config, dest Encoding, sig fastpath.Signal, plain []byte, enc Encoding) (Fallback, bool) {
	switch {
	case !cfg.PassThrough || enc == EncodingNone || enc >= numEncodings || sig >= fastpath.NumSignals:
		return FallbackOff, false
	case cfg.processor() != nil:
		return FallbackProcessor, false
	case cfg.router() != nil:
		return FallbackRoutes, false
	case dest != enc:
		return FallbackDestinations, false
	case !onlyEntries(plain):
		return FallbackFields, false
	}
	return 0, true
}

// onlyEntries reports whether every top-level field of the v1 request req is a
// length-delimited resource entry (field 1): such a request is its own batch form.
func onlyEntries(req []byte) bool {
	it := fastpath.NewTopLevel(req)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		if f.Num != 1 || f.Type != protowire.BytesType {
			return false
		}
	}
	return it.Err() == nil
}

// errSetChanged is enqueueWire's refusal when the destinations changed to a set that does not
// send the request's encoding: the request goes the plain way.
var errSetChanged = errors.New("fastpath: the destinations changed")

// minWireCap is the smallest buffer a pass-through batch starts with; it doubles as it fills.
const minWireCap = 16 << 10

// enqueueWire appends r.Wire, a compressed request whose decompressed form is r.Req, to the
// open pass-through batch of its signal, encoding and tenant, within the queue's budget. It
// mirrors enqueue: the batch limits apply to the decompressed size, the budget to the bytes
// held, and the batch pins its tenant while it is open (openset.go).
func (p *Pipeline) enqueueWire(r *Prepared, wait bool) (*Batch, error) {
	t, sig, plain, wire, enc, items := r.Tenant, r.Sig, r.Req, r.Wire, r.Encoding, r.Items
	n := int64(len(wire))
	if enc == EncodingZstd {
		// A fresh zstd batch starts with the preamble: charged with the request, given back
		// below when the request joins an open batch.
		n += int64(len(ZstdPreamble))
	}
	if !p.charge(n) {
		r.Refused(RefusedQueueFull)
		return nil, ErrFull
	}
	s := &p.sig[sig]
	var sealed *Batch
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		p.queued.Add(-n)
		return nil, ErrClosed
	}
	set := p.dests.Load()
	if set.Of(t) != enc || set.res != nil {
		// SetDestinations swapped in a set that does not send enc, or that routes by resource,
		// since passes looked: a batch of enc must never reach a destination that would
		// compress it again, nor one whose route takes only some of its entries.
		s.mu.Unlock()
		p.queued.Add(-n)
		return nil, errSetChanged
	}
	b := s.mu.open.getWire(t, enc)
	if b != nil && (b.set != set || !p.rule.Fits(b.plain+len(plain), b.Items)) {
		sealed, b = b, nil
		p.takeOpenLocked(sig, sealed)
	}
	if b == nil {
		b = getBatch(p, sig, max(len(wire)+len(ZstdPreamble), min(minWireCap, p.cfg.BatchMaxBytes)))
		b.Encoding = enc
		b.Tenant = t
		b.born = time.Now().UnixNano()
		b.set = set
		set.users.Add(1)
		s.mu.open.put(b)
		p.openedLocked(sig, b)
		if enc == EncodingZstd {
			buf := b.Payload.Buf()
			*buf = append(*buf, ZstdPreamble[:]...)
		}
	} else if enc == EncodingZstd {
		p.queued.Add(-int64(len(ZstdPreamble)))
	}
	buf := b.Payload.Buf()
	if cap(*buf)-len(*buf) < len(wire) {
		grow(buf, len(*buf)+len(wire), 2*p.cfg.BatchMaxBytes)
	}
	*buf = append(*buf, wire...)
	b.plain += len(plain)
	b.Items += items
	if wait {
		b.waitedLocked()
	}
	full := p.fullLocked(sig, b, b.plain)
	s.mu.Unlock()
	r.Admitted(fastpath.Stripped{})
	return p.sealTaken(sealed, full, b, wait)
}
