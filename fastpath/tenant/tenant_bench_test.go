package tenant

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkTenantLookup is what -intake.headers adds to a request of a known tenant before
// admission: its values added to a key and looked up (one and two headers), and with
// -tenant.rate the bucket's take.
func BenchmarkTenantLookup(b *testing.B) {
	for _, c := range []struct {
		name    string
		headers []string
		rate    Rate
	}{
		{"one-header", []string{"x-scope-orgid"}, Rate{}},
		{"two-headers", []string{"x-scope-orgid", "x-region"}, Rate{}},
		{"one-header+rate", []string{"x-scope-orgid"}, Rate{PerSecond: 1 << 40, Burst: 1 << 40}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ts, _ := NewTable(Config{Headers: c.headers, Max: 1000, Rate: c.rate})
			vals := [][]byte{[]byte("tenant-0042"), []byte("eu-west-1")}
			for i := range 100 { // a table of a hundred tenants
				var k Key
				for j := range c.headers {
					ts.Add(&k, fmt.Appendf(nil, "%s-%d", vals[j], i))
				}
				ts.Lookup(&k)
			}
			b.ReportAllocs()
			for b.Loop() {
				var k Key
				for j := range c.headers {
					ts.Add(&k, vals[j])
				}
				t, err := ts.Lookup(&k)
				if err != nil {
					b.Fatal(err)
				}
				t.Take(1000, 10)
			}
		})
	}
}

// BenchmarkTenantInsert is the cost of a new tenant in a table that already holds `table`
// tenants: each op interns a tuple never seen before (the table grows by b.N from there).
// Reported per new tenant; it should not grow with the table.
func BenchmarkTenantInsert(b *testing.B) {
	for _, n := range []int{100, 1000, 10000, 50000} {
		b.Run(fmt.Sprintf("table=%d", n), func(b *testing.B) {
			ts, _ := NewTable(Config{Headers: []string{"x-scope-orgid"}, Max: maxTenants})
			var k Key
			for i := range n - 1 {
				k.Reset()
				ts.Add(&k, fmt.Appendf(nil, "warm-%07d", i))
				if _, err := ts.Lookup(&k); err != nil {
					b.Fatal(err)
				}
			}
			names := make([][]byte, 0, 1<<16)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%len(names[:cap(names)]) == 0 {
					b.StopTimer()
					names = names[:0]
					for j := range cap(names) {
						names = append(names, fmt.Appendf(nil, "new-%08d", i+j))
					}
					b.StartTimer()
				}
				k.Reset()
				ts.Add(&k, names[i%cap(names)])
				i++
				if _, err := ts.Lookup(&k); err != nil {
					b.Fatal(err)
				}
				if ts.Len() >= maxTenants-1 {
					b.Fatal("the benchmark filled the table")
				}
			}
		})
	}
}

// BenchmarkTenantRefusedFull is the cost of a request with a new value at a full table of
// busy tenants (-intake.tenant-idle on): refused, without walking the table each time.
func BenchmarkTenantRefusedFull(b *testing.B) {
	const n = 20000
	ts, _ := NewTable(Config{Headers: []string{"x-scope-orgid"}, Max: n, Idle: time.Hour})
	for i := range n - 1 {
		var k Key
		ts.Add(&k, fmt.Appendf(nil, "busy-%06d", i))
		if _, err := ts.Lookup(&k); err != nil {
			b.Fatal(err)
		}
	}
	v := []byte("new-000000")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		copy(v[4:], fmt.Appendf(v[:4], "%06d", i%1000000)[4:])
		i++
		var k Key
		ts.Add(&k, v)
		if _, err := ts.Lookup(&k); err != ErrTooMany {
			b.Fatal(err)
		}
	}
}
