package kafkaconsume

import (
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/pool"
)

// decoder turns a record into the request admission takes. Owned by the poll goroutine.
//
// An OTLP/JSON record's protobuf form is built in pooled buffers charged to the intake
// limiter (the shared budget, -intake.max-bytes) before they are taken, as the HTTP intake
// charges its transcoding output: the records the client fetched are bounded by
// -kafka.consume.fetch-max-bytes, but what the transcoder writes is up to four times a record
// (packed numbers), and that must be budgeted like any intake's bytes. The buffer and its
// charge are held from decode to release, across the record's admission.
type decoder struct {
	cfg   *Config
	json  fastpath.JSONTranscoder
	out   *[]byte // the pooled buffer of the OTLP/JSON record being decoded; nil between records
	limit int     // the largest protobuf form of an OTLP/JSON record
}

var (
	errTooLarge     = errors.New("kafkaconsume: record value past -kafka.consume.max-record-bytes")
	errJSONTooLarge = errors.New("kafkaconsume: OTLP/JSON record's protobuf form past four times -kafka.consume.max-record-bytes or the intake limiter's budget")
	// errNoRoom is the intake limiter refusing the buffer of an OTLP/JSON record's protobuf
	// form now: the record waits, as for a pipeline without room.
	errNoRoom = errors.New("kafkaconsume: no room in the intake limiter for an OTLP/JSON record's protobuf form")
)

func (d *decoder) init(cfg *Config) {
	d.cfg = cfg
	d.limit = 4 * cfg.MaxRecordBytes
	if l := cfg.Limiter; l != nil {
		// A form the budget could never hold would wait for room for ever: too large.
		d.limit = int(min(int64(d.limit), l.MaxBytesFor(admission.IntakeKafkaConsume)))
	}
}

// take returns an empty pooled buffer of capacity pool.Cap(size), charged to the limiter
// first; nil when the limiter has no room now.
func (d *decoder) take(size int) *[]byte {
	c := pool.Cap(size)
	if l := d.cfg.Limiter; l != nil && !l.TryAcquireBytes(admission.IntakeKafkaConsume, int64(c)) {
		return nil
	}
	b := pool.GetBytes(size)
	*b = (*b)[:0:c]
	return b
}

// give returns a buffer of take and its charge.
func (d *decoder) give(b *[]byte) {
	c := cap(*b)
	pool.PutBytes(b)
	if l := d.cfg.Limiter; l != nil {
		l.ReleaseBytes(admission.IntakeKafkaConsume, int64(c))
	}
}

// release gives back the buffer of the last OTLP/JSON record and its charge, once its request
// was admitted or the record skipped. It does nothing after an otlp_proto record.
func (d *decoder) release() {
	if d.out != nil {
		d.give(d.out)
		d.out = nil
	}
}

// Grow implements fastpath.Grower for the transcoder's output, which lives in d.out: a buffer
// of twice the room (at least n more bytes, at most d.limit), charged before it is taken,
// takes dst's bytes, and the buffer it replaces is given back with its charge.
func (d *decoder) Grow(dst []byte, n int) ([]byte, error) {
	need := len(dst) + n
	if need > d.limit {
		return dst, errJSONTooLarge
	}
	nb := d.take(min(max(2*cap(dst), need, 4<<10), d.limit))
	if nb == nil {
		return dst, errNoRoom
	}
	*nb = append(*nb, dst...)
	d.release()
	d.out = nb
	return *nb, nil
}

// decode checks r's value as an Export request of t's signal and encoding and returns the
// request to admit, whose Body is valid until release (r's value, or the decoder's charged
// buffer for OTLP/JSON). errNoRoom (no skip reason) says to try again once the intake limiter
// has room. A request with no resource entry is returned empty. On error the
// reason says why the record can never be admitted.
func (d *decoder) decode(t *Topic, r *kgo.Record) (pipeline.Request, skipReason, error) {
	if len(r.Value) > d.cfg.MaxRecordBytes {
		return pipeline.Request{}, skipTooLarge, errTooLarge
	}
	req := pipeline.Request{Signal: t.Signal}
	if t.JSON {
		// Realistic OTLP/JSON transcodes to about half its size: start there, grow if needed.
		if d.out = d.take(min(max(len(r.Value), 4<<10), d.limit)); d.out == nil {
			return pipeline.Request{}, 0, errNoRoom
		}
		out, scan, err := d.json.AppendRequestWithin(d, *d.out, t.Signal, r.Value)
		if err != nil {
			d.release()
			switch err {
			case errNoRoom:
				return pipeline.Request{}, 0, err
			case errJSONTooLarge:
				return pipeline.Request{}, skipTooLarge, err
			}
			return pipeline.Request{}, skipUndecodable, err
		}
		*d.out = out
		if scan.Resources == 0 {
			d.release()
			return pipeline.Request{}, 0, nil
		}
		req.Body, req.Items = out, scan.Items
	} else {
		scan, err := fastpath.ScanRequest(t.Signal, r.Value, fastpath.LayoutV1, d.cfg.ScanDepth)
		if err != nil {
			return pipeline.Request{}, skipUndecodable, err
		}
		if scan.Resources == 0 {
			return pipeline.Request{}, 0, nil
		}
		req.Body, req.Items = r.Value, max(scan.Items, 0)
	}
	if ts := d.cfg.Tenants; ts != nil && d.cfg.TenantFromHeaders {
		var k tenant.Key
		for _, h := range ts.Headers() {
			ts.Add(&k, header(r.Headers, h))
		}
		tn, err := ts.Lookup(&k)
		if err != nil {
			d.release()
			return pipeline.Request{}, skipTenant, err
		}
		req.Origin.Tenant = tn
	}
	return req, 0, nil
}

// header is the value of the record header named name, compared without case as HTTP and
// gRPC header names are; nil when absent.
func header(hs []kgo.RecordHeader, name string) []byte {
	for i := range hs {
		if strings.EqualFold(hs[i].Key, name) {
			return hs[i].Value
		}
	}
	return nil
}
