package pool

import (
	"bytes"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestPayloadLifecycle(t *testing.T) {
	before := testutil.ToFloat64(payloadsInUse)
	p := NewPayload(3000)
	if p.Refs() != 1 || p.Len() != 0 || cap(*p.Buf()) < 3000 {
		t.Fatalf("new payload: refs %d len %d cap %d", p.Refs(), p.Len(), cap(*p.Buf()))
	}
	b := p.Buf()
	*b = append(*b, "resource-spans"...)
	if got := string(p.Bytes()); got != "resource-spans" {
		t.Fatalf("Bytes = %q", got)
	}
	if p.Len() != len("resource-spans") {
		t.Fatalf("Len = %d", p.Len())
	}
	if got := testutil.ToFloat64(payloadsInUse) - before; got != 1 {
		t.Fatalf("payloads in use grew by %v, want 1", got)
	}

	q := p.Retain()
	if q != p || p.Refs() != 2 {
		t.Fatalf("Retain: same %v refs %d", q == p, p.Refs())
	}
	p.Retain()
	if p.Refs() != 3 {
		t.Fatalf("refs %d, want 3", p.Refs())
	}
	p.Release()
	q.Release()
	if p.Refs() != 1 {
		t.Fatalf("refs %d, want 1", p.Refs())
	}
	if got := string(p.Bytes()); got != "resource-spans" {
		t.Fatalf("Bytes after partial release = %q", got)
	}
	p.Release()
	if got := testutil.ToFloat64(payloadsInUse) - before; got != 0 {
		t.Fatalf("payloads in use after last release: delta %v, want 0", got)
	}
	if Checked && p.Refs() != poisoned {
		t.Fatalf("checked build: refs after last release = %d, want poisoned", p.Refs())
	}
}

// An append past the capacity replaces the buffer through the pointer Buf returns, and the
// payload keeps the grown buffer.
func TestPayloadGrows(t *testing.T) {
	p := NewPayload(10)
	want := bytes.Repeat([]byte("0123456789abcdef"), 200) // 3200 bytes > 1 KiB tier
	b := p.Buf()
	*b = append(*b, want...)
	if !bytes.Equal(p.Bytes(), want) {
		t.Fatalf("grown payload holds %d bytes, want %d", p.Len(), len(want))
	}
	p.Release()
}

// Many holders retain and release concurrently; the count must end where it started and the
// bytes must read the same to every holder throughout.
func TestPayloadConcurrentHolders(t *testing.T) {
	p := NewPayload(64)
	*p.Buf() = append(*p.Buf(), "shared"...)
	const holders, rounds = 8, 200
	var wg sync.WaitGroup
	errs := make(chan string, holders)
	for range holders {
		wg.Go(func() {
			for range rounds {
				q := p.Retain()
				if string(q.Bytes()) != "shared" {
					errs <- string(q.Bytes())
					q.Release()
					return
				}
				q.Release()
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("holder read %q", e)
	}
	if p.Refs() != 1 {
		t.Fatalf("refs %d after all holders released, want 1", p.Refs())
	}
	p.Release()
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic, want %q", want)
		}
		if r != want {
			t.Fatalf("panic %v, want %q", r, want)
		}
	}()
	f()
}

func TestPayloadMisuse(t *testing.T) {
	if !Checked {
		t.Skip("reference checks are on only with -race or -tags invariants")
	}
	released := func() *Payload {
		p := NewPayload(16)
		*p.Buf() = append(*p.Buf(), "stale"...)
		p.Release()
		return p
	}
	tests := []struct {
		name string
		want string
		f    func(p *Payload)
	}{
		{"Bytes", msgUseAfterRelease, func(p *Payload) { p.Bytes() }},
		{"Len", msgUseAfterRelease, func(p *Payload) { p.Len() }},
		{"Buf", msgUseAfterRelease, func(p *Payload) { p.Buf() }},
		{"Retain", msgUseAfterRelease, func(p *Payload) { p.Retain() }},
		{"Release", msgReleasedTwice, func(p *Payload) { p.Release() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := released()
			mustPanic(t, tt.want, func() { tt.f(p) })
			// The poison outlives the first detection: a second attempt fails the same way.
			mustPanic(t, tt.want, func() { tt.f(p) })
		})
	}

	t.Run("WriteShared", func(t *testing.T) {
		p := NewPayload(16)
		p.Retain()
		mustPanic(t, msgWriteShared, func() { p.Buf() })
		p.Release()
		p.Buf() // single owner again: allowed
		p.Release()
	})

	t.Run("StaleSliceReadsScribble", func(t *testing.T) {
		p := NewPayload(16)
		*p.Buf() = append(*p.Buf(), "live"...)
		stale := p.Bytes()
		p.Release()
		if !bytes.Equal(stale, []byte{scribble, scribble, scribble, scribble}) {
			t.Fatalf("stale slice reads %q, want scribble", stale)
		}
	})

	t.Run("ReleasedNeverReused", func(t *testing.T) {
		p := released()
		for range 100 {
			q := NewPayload(16)
			if q == p {
				t.Fatal("a released payload was handed out again in a checked build")
			}
			defer q.Release()
		}
	})
}

// Plain builds still catch the misuse that costs nothing to detect, as long as the Payload has
// not been handed to a new owner (nothing else runs here, so it has not).
func TestPayloadCheapChecks(t *testing.T) {
	p := NewPayload(16)
	p.Release()
	mustPanic(t, msgReleasedTwice, func() { p.Release() })
	mustPanic(t, msgUseAfterRelease, func() { p.Retain() })
}
