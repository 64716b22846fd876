package feed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/fastpath/tenant"
	"github.com/otlpgate/otlpgate/pool"
	"github.com/otlpgate/otlpgate/spool"
)

// Spooled requests keep their tenant: admission appends each with its tenant, a feeder builds
// batches of one tenant each, skips (and finishes) the records of tenants its destination does
// not take, and the batches carry the tenant. Records of an old spool, without meta, are the
// default tenant's.
func TestFeederKeepsTenants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		routes := []tenant.Match{{Header: "x-scope-orgid", Values: []string{"acme"}}, {}}
		ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10, Routes: routes})
		if err != nil {
			t.Fatal(err)
		}
		tenant := func(v string) *tenant.Tenant {
			var k tenant.Key
			ts.AddString(&k, v)
			tn, err := ts.Lookup(&k)
			if err != nil {
				t.Fatal(err)
			}
			return tn
		}
		acme, beta := tenant("acme"), tenant("beta")

		fs := spool.NewCrashFS()
		c := spool.DefaultConfig()
		c.Dir, c.Sync, c.SegmentBytes, c.MaxBytes, c.CheckpointInterval = "/spool", spool.SyncNone, 4<<10, 1<<20, time.Hour
		c.Meta = true
		s, err := spool.Open(c, fs, []string{"d", "e"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Append(spool.Record{Items: 1, Payload: entryOf(rec(0, 100-2))}); err != nil { // written before tenants: no meta
			t.Fatal(err)
		}
		pc := pipeline.DefaultConfig()
		pc.Tenants = ts
		adm, err := NewAdmission(pc, s)
		if err != nil {
			t.Fatal(err)
		}
		// Records 1..8 alternate acme and beta; 9 is the default tenant's (Consume: UDS, Kafka).
		for i := 1; i <= 8; i++ {
			tn := acme
			if i%2 == 0 {
				tn = beta
			}
			if _, err := adm.Admit(pipeline.Request{Signal: 0, Origin: pipeline.Origin{Tenant: tn}, Body: entryOf(rec(i, 100-2)), Items: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := adm.Consume(pipeline.Request{Signal: 0, Body: entryOf(rec(9, 100-2)), Items: 1}); err != nil {
			t.Fatal(err)
		}

		// run feeds destination dest until it was given want records, finishing each batch.
		run := func(name string, dest, want int) map[string][]int {
			t.Helper()
			d := newDest()
			cfg := feedConfig()
			cfg.Tenants, cfg.Dest = ts, dest
			f, err := New(cfg, s.Reader(name), d, nil)
			if err != nil {
				t.Fatal(err)
			}
			f.Start()
			defer f.Stop()
			got := map[string][]int{}
			for n := 0; n < want; {
				for _, b := range d.take(t, 1) {
					if b.Tenant == nil {
						t.Fatal("a batch without a tenant")
					}
					got[b.Tenant.String()] = append(got[b.Tenant.String()], entryIDs(b)...)
					n += len(entryIDs(b))
					b.Done(true)
				}
			}
			// The feeder has read every record and waits for more: those of the tenants its
			// destination does not take are finished too.
			synctest.Wait()
			if n := s.Reader(name).Unfinished(); n != 0 {
				t.Fatalf("%s: %d records unfinished", name, n)
			}
			return got
		}
		a := run("d", 0, 4)
		if len(a) != 1 || !slices.Equal(a["acme"], []int{1, 3, 5, 7}) {
			t.Fatalf("the acme destination got %v", a)
		}
		rest := run("e", 1, 6)
		if len(rest) != 2 || !slices.Equal(rest["beta"], []int{2, 4, 6, 8}) || !slices.Equal(rest[""], []int{0, 9}) {
			t.Fatalf("the destination for the rest got %v", rest)
		}
	})
}

// entryOf wraps p as one v1 resource entry (tag and a one-byte length: p under 128 bytes),
// so that admission keeps it whole and ids reads the number it starts with at offset 2.
func entryOf(p []byte) []byte { return append([]byte{0x0a, byte(len(p))}, p...) }

// entryIDs returns the record numbers of a batch of entryOf records of 100 bytes.
func entryIDs(b *pipeline.Batch) []int {
	var out []int
	for p := b.Payload.Bytes(); len(p) >= 100; p = p[100:] {
		out = append(out, int(binary.BigEndian.Uint64(p[2:])))
	}
	return out
}

// With tenants, admission into the spool refuses the default tenant's requests (UDS, Kafka)
// when no destination takes it, rather than spool what nobody will deliver; a tenant that a
// destination takes is appended with its tenant as meta.
func TestAdmissionTenants(t *testing.T) {
	ts, err := tenant.NewTable(tenant.Config{Headers: []string{"x-scope-orgid"}, Max: 10,
		Routes: []tenant.Match{{Header: "x-scope-orgid", Values: []string{"acme"}}}})
	if err != nil {
		t.Fatal(err)
	}
	fs := spool.NewCrashFS()
	c := spool.DefaultConfig()
	c.Dir, c.Sync, c.CheckpointInterval, c.Meta = "/spool", spool.SyncNone, time.Hour, true
	s, err := spool.Open(c, fs, []string{"d"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pc := pipeline.DefaultConfig()
	pc.Tenants = ts
	adm, err := NewAdmission(pc, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.Consume(pipeline.Request{Signal: 0, Body: entryOf(rec(1, 98)), Items: 1}); !errors.Is(err, tenant.ErrNoRoute) {
		t.Fatalf("Consume: %v, want ErrNoRoute", err)
	}
	var k tenant.Key
	ts.AddString(&k, "acme")
	acme, err := ts.Lookup(&k)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Admit(pipeline.Request{Signal: 0, Origin: pipeline.Origin{Tenant: acme}, Body: entryOf(rec(2, 98)), Items: 1}); err != nil {
		t.Fatal(err)
	}
	buf := pool.GetBytes(pool.MinSize)
	defer pool.PutBytes(buf)
	e, err := s.Reader("d").Next(buf)
	if err != nil || !bytes.Equal(e.Meta, acme.Record()) || binary.BigEndian.Uint64((*buf)[2:]) != 2 {
		t.Fatalf("spooled %+v %v: want record 2 with acme's meta", e, err)
	}
	if _, err := s.Reader("d").Next(buf); !errors.Is(err, spool.ErrEmpty) {
		t.Fatalf("a second record: %v", err)
	}
}
