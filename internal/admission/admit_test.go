package admission

import (
	"bytes"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// wireDiscard is testkit.Discard sending gzip pass-through batches.
type wireDiscard struct{ testkit.Discard }

func (*wireDiscard) PassThrough() pipeline.Encoding { return pipeline.EncodingGzip }

// A compressed request handed to Admit passes through the pipeline compressed, when every
// destination sends its encoding as it is.
func TestAdmitPassesCompressedThrough(t *testing.T) {
	body := []byte{0x0a, 0x02, 0x0a, 0x00} // one empty resource entry
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(body)
	w.Close()

	p, err := pipeline.New(pipeline.DefaultConfig(), []pipeline.Destination{&wireDiscard{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var c Control
	c.Init(p, nil, time.Second)
	passed := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed")
	if _, r := c.Admit(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 1, Wire: z.Bytes(), Encoding: pipeline.EncodingGzip}); r != Accepted {
		t.Fatalf("reason %v", r)
	}
	if n := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed") - passed; n != 1 {
		t.Fatalf("%v requests passed through the pipeline, want 1", n)
	}
}

// A tenant's compressed request is charged to its rate (-tenant.rate) as the same request sent
// plain is: by its decompressed bytes, given back when admission refuses it. A burst of two
// requests' bytes lets two through and throttles the third, though the compressed bytes of
// ten would fit; the requests refused as too large leave the bucket as it was.
func TestAdmitWireTenantRate(t *testing.T) {
	body := append([]byte{0x0a, 0xe8, 0x07}, bytes.Repeat([]byte{0}, 1000)...) // one entry of 1000 zero bytes
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(body)
	w.Close()
	wire := z.Bytes()
	if 10*len(wire) > 2*len(body) {
		t.Fatalf("the request compresses to %d bytes of %d: too little for the test", len(wire), len(body))
	}
	run := func(name string, admit func(c *Control, tn *tenant.Tenant) Reason) {
		t.Run(name, func(t *testing.T) {
			ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10,
				Rate: tenant.Rate{PerSecond: 1e-6, Burst: float64(2 * len(body))}})
			if err != nil {
				t.Fatal(err)
			}
			acme, err := lookupTenant(ts, "acme")
			if err != nil {
				t.Fatal(err)
			}
			tiny := pipeline.DefaultConfig()
			tiny.Tenants = ts
			tiny.QueueMaxBytes = int64(len(wire)) - 1
			tiny.BatchMaxBytes = len(wire) - 1
			small, err := pipeline.New(tiny, []pipeline.Destination{&wireDiscard{}})
			if err != nil {
				t.Fatal(err)
			}
			defer small.Close()
			var c Control
			c.Init(small, nil, time.Second)
			for range 5 {
				if r := admit(&c, acme); r != TooLarge {
					t.Fatalf("into a queue smaller than the request: %v, want too_large", r)
				}
			}
			cfg := pipeline.DefaultConfig()
			cfg.Tenants = ts
			p, err := pipeline.New(cfg, []pipeline.Destination{&wireDiscard{}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			c.Init(p, nil, time.Second)
			for i, want := range []Reason{Accepted, Accepted, Throttled, Throttled} {
				if r := admit(&c, acme); r != want {
					t.Fatalf("request %d: %v, want %v", i, r, want)
				}
			}
			if n := acme.Throttled(); n != 2 {
				t.Fatalf("acme throttled %d times, want 2", n)
			}
		})
	}
	passed := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed")
	run("compressed", func(c *Control, tn *tenant.Tenant) Reason {
		_, r := c.Admit(pipeline.Request{Signal: fastpath.Traces, Origin: pipeline.Origin{Tenant: tn}, Body: body, Items: 1, Wire: wire, Encoding: pipeline.EncodingGzip})
		return r
	})
	if n := testkit.Counter(t, "otlpgate_fastpath_passthrough_requests_total", "way", "compressed") - passed; n != 2 {
		t.Fatalf("%v requests passed through, want the 2 admitted", n)
	}
	run("plain", func(c *Control, tn *tenant.Tenant) Reason {
		_, r := c.Admit(pipeline.Request{Signal: fastpath.Traces, Origin: pipeline.Origin{Tenant: tn}, Body: body, Items: 1})
		return r
	})
}

func lookupTenant(ts *tenant.Table, v string) (*tenant.Tenant, error) {
	var k tenant.Key
	ts.AddString(&k, v)
	return ts.Lookup(&k)
}
