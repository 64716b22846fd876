package kafkadest

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/client/filedest"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/pool"
)

// send is one batch on its way: its records and what their answers said. Sends and their
// records are pooled, with the scratch space of the cut, so that a batch costs no allocation
// in otlpgate's code once the pools are warm.
//
// A send is its records' Context: the producer hands a record back to the promise, which
// finds its send there without a map or a closure per record. It never ends (Done is nil), so
// the producer never cancels a record for it.
type send struct {
	d        *Dest
	b        *pipeline.Batch
	signal   fastpath.Signal
	took     time.Time
	attempts int
	recs     []*kgo.Record // every record of the batch
	again    []*kgo.Record // the records of a retry
	pending  atomic.Int32  // records of the attempt not yet answered

	mu      sync.Mutex // the promise runs on kgo's goroutine; settle reads these after the last answer
	retry   []*kgo.Record
	err     error
	refused bool              // a record was refused for good
	refusal client.DropReason // why: too_large or rejected

	// Under d.mu: where the send is (producing, waiting for a retry, given up while the
	// producer holds its records) and its generation, which a retry-max-elapsed timer made for
	// an earlier batch of the pooled send does not match.
	state    sendState
	returned bool // every record answered while abandoning: expire puts s back
	gen      uint64
	timer    *time.Timer
	keep     *pool.Payload // the payload's reference an abandoned send keeps for its records

	cut   cutter
	limit int // the largest record batch the records were cut for
	tr    byTrace
	// With partition=resource, each run's key, its resource's key (reskey.go), in rkeyBuf.
	rkeys   []span
	rkeyBuf []byte
	rk      resourceKeyer
	json    []byte             // otlp_json values
	headers []kgo.RecordHeader // the batch's tenant's forward-headers, shared by its records: read only
}

type sendState uint8

const (
	sendProducing sendState = iota
	sendSettling
	sendWaiting
	sendAbandoning // expire is finishing the batch
	sendAbandoned
)

// Deadline, Done, Err and Value make a send the context.Context of its records.
func (*send) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*send) Done() <-chan struct{}       { return nil }
func (*send) Err() error                  { return nil }
func (*send) Value(any) any               { return nil }

var sends = sync.Pool{New: func() any { return new(send) }}

var records = sync.Pool{New: func() any { return new(kgo.Record) }}

// maxKeptScratch bounds the scratch space a pooled send keeps: one huge batch must not pin its
// buffers for ever.
const maxKeptScratch = 4 << 20

func getSend() *send { return sends.Get().(*send) }

func putSend(s *send) {
	for _, r := range s.recs {
		*r = kgo.Record{}
		records.Put(r)
	}
	clear(s.recs)
	clear(s.again)
	clear(s.retry)
	s.recs, s.again, s.retry = s.recs[:0], s.again[:0], s.retry[:0]
	s.headers = nil
	s.d, s.b, s.err, s.refused, s.attempts, s.state, s.returned = nil, nil, nil, false, 0, sendProducing, false
	for i := range s.cut.pieces {
		s.cut.pieces[i].src = nil
	}
	for i := range s.tr.items {
		s.tr.items[i] = traceOf{}
	}
	clear(s.rk.kvs[:cap(s.rk.kvs)])
	if cap(s.cut.buf) > maxKeptScratch || cap(s.tr.out) > maxKeptScratch || cap(s.json) > maxKeptScratch ||
		cap(s.rk.spelling) > maxKeptScratch {
		s.cut, s.tr, s.json, s.rk = cutter{}, byTrace{}, nil, resourceKeyer{}
	}
	sends.Put(s)
}

// build cuts the batch into records of its signal's topic.
func (s *send) build() error {
	d, b := s.d, s.b
	s.limit = int(d.limits[b.Signal].Load())
	limit := s.limit - recordOverhead
	if d.cfg.JSON {
		// OTLP/JSON spells ids in hex and names every field: a request's JSON is a few times
		// its protobuf. Cut the protobuf so that the JSON of a piece fits; a piece whose JSON
		// still does not is dropped as too large.
		limit /= 4
	}
	s.cut.reset(b.Signal, limit)
	payload := b.Payload.Bytes()
	if d.cfg.ByTraceID && b.Signal != fastpath.Metrics {
		if err := s.tr.split(b.Signal, payload); err != nil {
			return err
		}
		for i, t := range s.tr.reqs {
			key := -1
			if t.key.to > t.key.from {
				key = i
			}
			if err := s.cut.cut(s.tr.out[t.req.from:t.req.to], key); err != nil {
				return err
			}
		}
	} else if d.cfg.ByResource {
		if err := s.byResource(payload); err != nil {
			return err
		}
	} else if err := s.cut.cut(payload, -1); err != nil {
		return err
	}
	if s.cut.cutItems > 0 {
		d.cuts.Add(float64(s.cut.cutItems))
	}
	topic := d.cfg.Topics[b.Signal]
	s.headers = d.headersOf(b.Tenant)
	if d.cfg.JSON {
		return s.buildJSON(topic)
	}
	for i := range s.cut.pieces {
		s.add(topic, s.key(i), s.cut.value(i))
	}
	return nil
}

// buildJSON makes each piece a record of its OTLP/JSON.
func (s *send) buildJSON(topic string) error {
	limit := s.limit - recordOverhead
	s.json = s.json[:0]
	ends := make([]int, 0, len(s.cut.pieces)) // otlp_json is not the allocation-free path
	for i := range s.cut.pieces {
		from := len(s.json)
		var err error
		s.json, err = filedest.AppendJSONLine(s.json, s.b.Signal, s.cut.value(i))
		if err != nil {
			return err
		}
		s.json = s.json[:len(s.json)-1] // the line's newline
		if len(s.json)-from > limit {
			scan, err := fastpath.ScanRequest(s.b.Signal, s.cut.value(i), fastpath.LayoutV1, fastpath.DepthFull)
			if err != nil {
				return err
			}
			s.cut.tooLarge += scan.Items
			s.json = s.json[:from]
		}
		ends = append(ends, len(s.json))
	}
	from := 0
	for i, end := range ends {
		if end > from {
			s.add(topic, s.key(i), s.json[from:end:end])
		}
		from = end
	}
	return nil
}

// byResource cuts each run of consecutive resource entries with the same resource key (the
// Collector's, reskey.go) on its own, keyed by those 16 bytes.
func (s *send) byResource(payload []byte) error {
	s.rkeys, s.rkeyBuf = s.rkeys[:0], s.rkeyBuf[:0]
	runFrom, runTo, runKey := -1, -1, [resourceKeySize]byte{}
	flush := func() error {
		if runFrom < 0 {
			return nil
		}
		from := len(s.rkeyBuf)
		s.rkeyBuf = append(s.rkeyBuf, runKey[:]...)
		s.rkeys = append(s.rkeys, span{from: int32(from), to: int32(len(s.rkeyBuf))})
		err := s.cut.cut(payload[runFrom:runTo], len(s.rkeys)-1)
		runFrom = -1
		return err
	}
	it := fastpath.NewTopLevel(payload)
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num != fEntry || f.Type != protowire.BytesType {
			return errNotEntries
		}
		k, err := s.rk.key(payload[f.Value:f.End])
		if err != nil {
			return err
		}
		if runFrom >= 0 && k != runKey {
			if err := flush(); err != nil {
				return err
			}
		}
		if runFrom < 0 {
			runFrom, runKey = f.Tag, k
		}
		runTo = f.End
	}
	if err := it.Err(); err != nil {
		return err
	}
	return flush()
}

// key is piece i's record key, nil for none.
func (s *send) key(i int) []byte {
	k := s.cut.pieces[i].key
	if k < 0 {
		return nil
	}
	if s.d.cfg.ByResource {
		r := s.rkeys[k]
		return s.rkeyBuf[r.from:r.to:r.to]
	}
	t := s.tr.reqs[k].key
	return s.tr.keys[t.from:t.to:t.to]
}

// add appends a record of value to the send.
func (s *send) add(topic string, key, value []byte) {
	r := records.Get().(*kgo.Record)
	r.Topic, r.Key, r.Value, r.Context, r.Headers = topic, key, value, s, s.headers
	s.recs = append(s.recs, r)
}
