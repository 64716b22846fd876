package kafkaconsume

import (
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// decoder turns a record into the request admission takes. Owned by the poll goroutine.
type decoder struct {
	cfg  *Config
	json fastpath.JSONTranscoder
	out  []byte // an OTLP/JSON record's protobuf form; valid until the next decode
	grow jsonGrower
}

// keepJSONOut bounds the output buffer kept between OTLP/JSON records.
const keepJSONOut = 4 << 20

var (
	errTooLarge     = errors.New("kafkaconsume: record value past -kafka.consume.max-record-bytes")
	errJSONTooLarge = errors.New("kafkaconsume: OTLP/JSON record's protobuf form past four times -kafka.consume.max-record-bytes")
)

func (d *decoder) init(cfg *Config) {
	d.cfg = cfg
	d.grow.limit = 4 * cfg.MaxRecordBytes
}

// decode checks r's value as an Export request of t's signal and encoding and returns the
// request to admit, whose Body is valid until the next decode (r's value, or the decoder's
// buffer for OTLP/JSON). A request with no resource entry is returned empty. On error the
// reason says why the record can never be admitted.
func (d *decoder) decode(t *Topic, r *kgo.Record) (pipeline.Request, skipReason, error) {
	if len(r.Value) > d.cfg.MaxRecordBytes {
		return pipeline.Request{}, skipTooLarge, errTooLarge
	}
	req := pipeline.Request{Signal: t.Signal}
	if t.JSON {
		out, scan, err := d.json.AppendRequestWithin(&d.grow, d.out[:0], t.Signal, r.Value)
		if err != nil {
			if err == errJSONTooLarge {
				return pipeline.Request{}, skipTooLarge, err
			}
			return pipeline.Request{}, skipUndecodable, err
		}
		if cap(out) <= keepJSONOut {
			d.out = out
		} else {
			d.out = nil
		}
		if scan.Resources == 0 {
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

// jsonGrower gives the transcoder's output room up to limit: packed numbers write up to four
// times their text, so the output, not the record, is what must be bounded.
type jsonGrower struct{ limit int }

// Grow implements fastpath.Grower.
func (g *jsonGrower) Grow(dst []byte, n int) ([]byte, error) {
	need := len(dst) + n
	if need > g.limit {
		return dst, errJSONTooLarge
	}
	nb := make([]byte, len(dst), min(max(2*cap(dst), need, 4<<10), g.limit))
	copy(nb, dst)
	return nb, nil
}
