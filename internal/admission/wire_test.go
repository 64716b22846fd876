package admission

import (
	"bytes"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// plainAdmitter is an Admitter that is no WireAdmitter, as the spool's admission: it keeps
// what it is given.
type plainAdmitter struct{ got [][]byte }

func (a *plainAdmitter) Admit(sig fastpath.Signal, req []byte, items int, l fastpath.Layout) (*fastpath.Batch, error) {
	return a.AdmitTenant(nil, sig, req, items, l)
}
func (a *plainAdmitter) AdmitTenant(_ *fastpath.Tenant, _ fastpath.Signal, req []byte, _ int, _ fastpath.Layout) (*fastpath.Batch, error) {
	a.got = append(a.got, bytes.Clone(req))
	return nil, nil
}
func (a *plainAdmitter) Ack() fastpath.AckMode     { return fastpath.AckAccept }
func (a *plainAdmitter) RetryDelay() time.Duration { return time.Second }

// wireDiscard is testkit.Discard sending gzip pass-through batches.
type wireDiscard struct{ testkit.Discard }

func (*wireDiscard) PassThrough() fastpath.Encoding { return fastpath.EncodingGzip }

// An admitter that is no WireAdmitter (the spool's admission) gets the decompressed request,
// counted as the spool fallback; through a pipeline the same request passes compressed.
func TestAdmitWireFallsBackForTheSpool(t *testing.T) {
	body := []byte{0x0a, 0x02, 0x0a, 0x00} // one empty resource entry
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(body)
	w.Close()

	var spoolLike plainAdmitter
	var c Control
	c.Init(&spoolLike, nil, time.Second)
	before := testkit.Counter(t, "otlpgate_fastpath_passthrough_fallback_requests_total", "reason", "spool")
	if _, r := c.AdmitWire(nil, fastpath.Traces, body, z.Bytes(), fastpath.EncodingGzip, 1); r != Accepted {
		t.Fatalf("reason %v", r)
	}
	if len(spoolLike.got) != 1 || !bytes.Equal(spoolLike.got[0], body) {
		t.Fatalf("the admitter got %q, want the decompressed request", spoolLike.got)
	}
	if n := testkit.Counter(t, "otlpgate_fastpath_passthrough_fallback_requests_total", "reason", "spool") - before; n != 1 {
		t.Fatalf("spool fallback counted %v times, want 1", n)
	}

	p, err := fastpath.New(fastpath.DefaultConfig(), []fastpath.Destination{&wireDiscard{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c.Init(p, nil, time.Second)
	passed := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed")
	if _, r := c.AdmitWire(nil, fastpath.Traces, body, z.Bytes(), fastpath.EncodingGzip, 1); r != Accepted {
		t.Fatalf("reason %v", r)
	}
	if n := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed") - passed; n != 1 {
		t.Fatalf("%v requests passed through the pipeline, want 1", n)
	}
}
