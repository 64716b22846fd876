package pipeline

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
)

// decompress reads body, a pass-through batch of enc, as an upstream does: one stream of
// concatenated gzip members, or zstd frames behind a skippable frame.
func decompress(t *testing.T, enc Encoding, body []byte) []byte {
	t.Helper()
	var r io.Reader
	switch enc {
	case EncodingGzip:
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r = zr // multistream: every member, as net/http's and the Collector's readers
	case EncodingZstd:
		zr, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s batch of %d bytes: %v", enc, len(body), err)
	}
	return out
}

// tenantReq is one compressed request of a tenant, as sent.
type tenantReq struct {
	plain, wire []byte
}

// checkTenantBatches checks the batches a destination got against the requests each tenant
// sent, in order: every batch is of enc and of one tenant, its bytes are exactly the next
// requests of that tenant as received (behind the zstd preamble), they decompress to exactly
// those requests' bodies, and every request arrived. Returns the batches per tenant.
func checkTenantBatches(t *testing.T, got []recorded, encs []Encoding, enc Encoding, sent map[string][]tenantReq) map[string]int {
	t.Helper()
	next := map[string]int{}
	per := map[string]int{}
	for i, b := range got {
		if encs[i] != enc {
			t.Fatalf("batch %d of %q: encoding %v, want %v", i, b.tenant, encs[i], enc)
		}
		reqs := sent[b.tenant]
		k := next[b.tenant]
		if k+b.items > len(reqs) {
			t.Fatalf("batch %d of %q holds %d items, %d of its %d requests left", i, b.tenant, b.items, len(reqs)-k, len(reqs))
		}
		var wire, plain []byte
		if enc == EncodingZstd {
			wire = append(wire, ZstdPreamble[:]...)
		}
		for _, r := range reqs[k : k+b.items] {
			wire = append(wire, r.wire...)
			plain = append(plain, r.plain...)
		}
		if !bytes.Equal(b.body, wire) {
			t.Fatalf("batch %d of %q: %d bytes, want its requests %d..%d as received (%d bytes)", i, b.tenant, len(b.body), k, k+b.items-1, len(wire))
		}
		if d := decompress(t, enc, b.body); !bytes.Equal(d, plain) {
			t.Fatalf("batch %d of %q decompresses to %d bytes, want its requests' %d", i, b.tenant, len(d), len(plain))
		}
		next[b.tenant] = k + b.items
		per[b.tenant]++
	}
	for tn, reqs := range sent {
		if next[tn] != len(reqs) {
			t.Fatalf("%q: %d of %d requests arrived", tn, next[tn], len(reqs))
		}
	}
	return per
}

// Two tenants' compressed requests, and the default tenant's, interleaved, pass through into
// batches of their own tenant: no batch holds another tenant's bytes, and each batch is
// exactly its tenant's requests as received, which decompress to exactly their bodies.
func TestPassThroughTenantsApart(t *testing.T) {
	for _, enc := range []Encoding{EncodingGzip, EncodingZstd} {
		t.Run(enc.String(), func(t *testing.T) {
			ts := newTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10})
			cfg := testConfig()
			cfg.Tenants = ts
			cfg.BatchMaxItems = 4
			w := &wireRec{recorder: recorder{name: "a", ok: true}, enc: enc}
			p := newTestPipeline(t, cfg, w)
			tenants := []*tenant.Tenant{mustLookup(t, ts, "acme"), mustLookup(t, ts, "beta"), nil}
			sent := map[string][]tenantReq{}
			passed := testutil.ToFloat64(passRequestsC[1])
			fell := fallbackTotal()
			for i := range 30 {
				tn := tenants[i%len(tenants)]
				name := ""
				if tn != nil {
					name = tn.String()
				}
				// Distinct bodies: a batch that mixed tenants or lost a request shows.
				plain := entry(100+i, byte('a'+i))
				wire := compressTo(t, enc, plain)
				sent[name] = append(sent[name], tenantReq{plain, wire})
				if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: tn}, Body: plain, Items: 1, Wire: wire, Encoding: enc}); err != nil {
					t.Fatal(err)
				}
			}
			if n := tenants[0].Pins(); n != 1 {
				t.Fatalf("acme pins %d with its pass-through batch open, want 1", n)
			}
			p.Flush()
			per := checkTenantBatches(t, w.batches(), w.encs, enc, sent)
			// 10 requests each, 4 to a batch: 4+4+2.
			if per["acme"] != 3 || per["beta"] != 3 || per[""] != 3 {
				t.Fatalf("batches per tenant %v, want 3 each", per)
			}
			if d := testutil.ToFloat64(passRequestsC[1]) - passed; d != 30 {
				t.Fatalf("%v requests passed through, want 30", d)
			}
			if d := fallbackTotal() - fell; d != 0 {
				t.Fatalf("%v requests fell back, want 0", d)
			}
			for _, tn := range tenants[:2] {
				items, bytes := tn.Admitted()
				if tn.Pins() != 0 || items != 10 || bytes != int64(len(joinPlain(sent[tn.String()]))) {
					t.Fatalf("%s: pins %d, admitted %d items %d bytes; want 0, 10 and its bodies' bytes", tn, tn.Pins(), items, bytes)
				}
			}
		})
	}
}

func joinPlain(reqs []tenantReq) []byte {
	var b []byte
	for _, r := range reqs {
		b = append(b, r.plain...)
	}
	return b
}

func fallbackTotal() float64 {
	var n float64
	for _, c := range passFallbackC {
		n += testutil.ToFloat64(c)
	}
	return n
}

// With match-header, a tenant's pass-through batches go to its destinations only, and only
// those decide whether it passes: acme's destination sends gzip, so acme's requests pass
// through; beta's destination compresses for itself, so beta's go the plain way, counted as
// the destinations fallback; the default tenant, which neither takes, is refused.
func TestPassThroughTenantRoutes(t *testing.T) {
	ts := newTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10,
		Routes: []tenant.Match{{Header: "x-scope-orgid", Values: []string{"acme"}}, {Header: "x-scope-orgid", Values: []string{"beta"}}}})
	cfg := testConfig()
	cfg.Tenants = ts
	gz := &wireRec{recorder: recorder{name: "acme", ok: true}, enc: EncodingGzip}
	rest := &wireRec{recorder: recorder{name: "rest", ok: true}, enc: EncodingNone}
	p := newTestPipeline(t, cfg, gz, rest)
	acme, beta := mustLookup(t, ts, "acme"), mustLookup(t, ts, "beta")
	fell := testutil.ToFloat64(passFallbackC[FallbackDestinations])
	sent := map[string][]tenantReq{}
	var betaPlain []byte
	for i := range 6 {
		plain := entry(50+i, byte('a'+i))
		wire := gzipped(t, plain)
		tn := acme
		if i%2 == 1 {
			tn = beta
			betaPlain = append(betaPlain, plain...)
		} else {
			sent["acme"] = append(sent["acme"], tenantReq{plain, wire})
		}
		if _, err := p.Admit(Request{Signal: fastpath.Logs, Origin: Origin{Tenant: tn}, Body: plain, Items: 1, Wire: wire, Encoding: EncodingGzip}); err != nil {
			t.Fatal(err)
		}
	}
	p.Flush()
	if per := checkTenantBatches(t, gz.batches(), gz.encs, EncodingGzip, sent); per["acme"] != 1 {
		t.Fatalf("acme's destination got batches %v, want one of acme", per)
	}
	got := rest.batches()
	if len(got) != 1 || got[0].tenant != "beta" || rest.encs[0] != EncodingNone || !bytes.Equal(got[0].body, betaPlain) {
		t.Fatalf("the other destination got %d batches, want beta's plain requests", len(got))
	}
	if d := testutil.ToFloat64(passFallbackC[FallbackDestinations]) - fell; d != 3 {
		t.Fatalf("destinations fallback counted %v times, want 3 (beta's)", d)
	}
	// As on the plain way.
	if _, err := p.Admit(Request{Signal: fastpath.Logs, Body: entry(5, 1), Items: 1, Wire: gzipped(t, entry(5, 1)), Encoding: EncodingGzip}); !errors.Is(err, tenant.ErrNoRoute) {
		t.Fatalf("the default tenant: %v, want tenant.ErrNoRoute", err)
	}
}

// An open pass-through batch pins its tenant as an open plain batch does: the tenant is not
// swept however long it is idle, and its batch reaches the destination as its own; once the
// batch is sealed the tenant's place goes to a new one. A tenant held past its expiry (its
// id now another's) still gets pass-through batches apart from the new holder of its id.
func TestPassThroughTenantIdle(t *testing.T) {
	ts, clock := idleTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 2})
	cfg := testConfig()
	cfg.Tenants = ts
	w := &wireRec{recorder: recorder{name: "r", ok: true}, enc: EncodingGzip}
	p := newTestPipeline(t, cfg, w)
	a := mustLookup(t, ts, "a")
	first := tenantReq{entry(10, 'a'), gzipped(t, entry(10, 'a'))}
	if _, err := p.Admit(Request{Signal: fastpath.Logs, Origin: Origin{Tenant: a}, Body: first.plain, Items: 1, Wire: first.wire, Encoding: EncodingGzip}); err != nil {
		t.Fatal(err)
	}
	clock.Add(int64(testIdle) * 10)
	if _, err := lookup(ts, "b"); !errors.Is(err, tenant.ErrTooMany) {
		t.Fatalf("b while a's pass-through batch is open: %v, want tenant.ErrTooMany", err)
	}
	if a.Expired() || a.Pins() != 1 {
		t.Fatalf("a with an open pass-through batch: expired %v, pins %d", a.Expired(), a.Pins())
	}
	p.Flush()
	checkTenantBatches(t, w.batches(), w.encs, EncodingGzip, map[string][]tenantReq{"a": {first}})
	b := mustLookup(t, ts, "b")
	if !a.Expired() || b.ID() != a.ID() || a.Pins() != 0 || !a.Expired() {
		t.Fatalf("after the flush: a expired %v (pins %#x), b id %d (a's %d)", a.Expired(), a.Pins(), b.ID(), a.ID())
	}

	// a, held by a request that looked it up before it left, and b, with a's old id.
	w.got, w.encs, w.plains = nil, nil, nil
	sent := map[string][]tenantReq{}
	for i := range 6 {
		tn, fill := b, byte('b')
		if i%2 == 0 {
			tn, fill = a, 'a'
		}
		r := tenantReq{entry(10+i, fill), gzipped(t, entry(10+i, fill))}
		sent[tn.String()] = append(sent[tn.String()], r)
		if _, err := p.Admit(Request{Signal: fastpath.Logs, Origin: Origin{Tenant: tn}, Body: r.plain, Items: 1, Wire: r.wire, Encoding: EncodingGzip}); err != nil {
			t.Fatal(err)
		}
	}
	if b.Expired() || b.Pins() != 1 || a.Pins() != 1 || !a.Expired() {
		t.Fatalf("b: expired %v, pins %d; a pins %#x", b.Expired(), b.Pins(), a.Pins())
	}
	p.Flush()
	if per := checkTenantBatches(t, w.batches(), w.encs, EncodingGzip, sent); per["a"] != 1 || per["b"] != 1 {
		t.Fatalf("batches per tenant %v, want one each", per)
	}
	if a.Pins() != 0 || !a.Expired() || b.Pins() != 0 {
		t.Fatalf("after the flush: a pins %#x, b pins %d", a.Pins(), b.Pins())
	}
	clock.Add(int64(testIdle) + 1)
	if n := ts.Sweep(); n != 1 || !b.Expired() {
		t.Fatalf("swept %d, b expired %v: want b gone once its batch left", n, b.Expired())
	}
}

// A tenant's plain and pass-through batches are open at once, each pinning it; neither holds
// the other's requests.
func TestPassThroughTenantPlainBeside(t *testing.T) {
	ts := newTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10})
	cfg := testConfig()
	cfg.Tenants = ts
	w := &wireRec{recorder: recorder{name: "r", ok: true}, enc: EncodingGzip}
	p := newTestPipeline(t, cfg, w)
	a := mustLookup(t, ts, "a")
	r := tenantReq{entry(20, 'w'), gzipped(t, entry(20, 'w'))}
	if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: a}, Body: r.plain, Items: 1, Wire: r.wire, Encoding: EncodingGzip}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: a}, Body: entry(20, 'p'), Items: 1}); err != nil {
		t.Fatal(err)
	}
	if n := a.Pins(); n != 2 {
		t.Fatalf("a pins %d with a plain and a pass-through batch open, want 2", n)
	}
	p.Flush()
	got := w.batches()
	if len(got) != 2 {
		t.Fatalf("%d batches, want 2", len(got))
	}
	for i, b := range got {
		want := entry(20, 'p')
		if w.encs[i] == EncodingGzip {
			want = r.wire
		}
		if b.tenant != "a" || !bytes.Equal(b.body, want) {
			t.Fatalf("batch %d (%v) of %q: %q, want %q", i, w.encs[i], b.tenant, b.body, want)
		}
	}
	if n := a.Pins(); n != 0 {
		t.Fatalf("a pins %d after the flush", n)
	}
	if w.encs[0] == w.encs[1] {
		t.Fatalf("encodings %v, want one plain and one gzip", w.encs)
	}
}

// Lookups, compressed and plain admissions and sweeps at once: every batch, pass-through or
// plain, holds its own tenant's requests only, every request arrives, and no pin is left.
// Run with -race.
func TestPassThroughTenantIdleConcurrent(t *testing.T) {
	ts, clock := idleTenants(t, tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 6})
	cfg := testConfig()
	cfg.Tenants = ts
	cfg.BatchMaxItems = 3
	w := &wireRec{recorder: recorder{name: "r", ok: true}, enc: EncodingGzip}
	p := newTestPipeline(t, cfg, w)
	expired := metricValue(t, "otlpgate_tenants_expired_total")
	// The compressed form of each tenant's entry, made once: entry(10, 'a'+n).
	wires := make([][]byte, 40)
	for n := range wires {
		wires[n] = gzipped(t, entry(10, byte('a'+n)))
	}
	admitted := churnTenants(t, p, ts, clock, func(tn *tenant.Tenant, n, i int) error {
		plain := entry(10, byte('a'+n))
		if i%3 == 0 {
			_, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: tn}, Body: plain, Items: 1})
			return err
		}
		_, err := p.Admit(Request{Signal: fastpath.Traces, Origin: Origin{Tenant: tn}, Body: plain, Items: 1, Wire: wires[n], Encoding: EncodingGzip})
		return err
	})
	p.Flush()
	items, wired := 0, 0
	for _, b := range w.batches() {
		want := byte('a' + mustAtoi(t, b.tenant[1:]))
		body := b.body
		if b.enc == EncodingGzip {
			body = decompress(t, EncodingGzip, body)
			wired++
		}
		if len(body) != 12*b.items {
			t.Fatalf("a batch of %s: %d bytes for %d items", b.tenant, len(body), b.items)
		}
		for e := body; len(e) > 0; e = e[12:] {
			if e[2] != want || e[11] != want {
				t.Fatalf("a %v batch of %s holds %q", b.enc, b.tenant, e[:12])
			}
		}
		items += b.items
	}
	if metricValue(t, "otlpgate_tenants_expired_total") == expired || wired == 0 {
		t.Fatalf("expired %v, %d pass-through batches: the test did not test expiry with pass-through", metricValue(t, "otlpgate_tenants_expired_total")-expired, wired)
	}
	if int64(items) != admitted || admitted == 0 {
		t.Fatalf("%d items in batches, %d admitted", items, admitted)
	}
	for _, tn := range ts.All() {
		if n := tn.Pins(); n != 0 {
			t.Fatalf("%s pins %d with no batch open", tn, n)
		}
	}
}
