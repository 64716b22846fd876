package pool

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Payload is an immutable, reference-counted byte buffer shared by everyone who holds a
// reference to it. Invariants:
//
//  1. refs counts the holders; NewPayload starts it at 1.
//  2. While refs == 1 and nobody has called Retain yet, the single owner may append to Buf.
//     After the first Retain the bytes never change until the last Release.
//  3. The last Release (refs reaching 0) returns buf to the byte pools and the Payload to its
//     pool; no holder may touch it, or any slice obtained from Bytes, afterwards.
//  4. In checked builds a released Payload is poisoned (refs = poisoned) and never reused, so
//     3 is enforced by panics rather than trusted.
type Payload struct {
	refs atomic.Int32
	buf  *[]byte
}

// poisoned is far enough below zero that no run of stray Retain calls brings it back to a
// plausible count.
const poisoned = -1 << 30

// scribble is written over a released payload's bytes in checked builds, so that a stale slice
// reads garbage (and the race detector sees the write) instead of plausible data.
const scribble = 0xdb

const (
	msgUseAfterRelease = "BUG: pool: payload used after release"
	msgReleasedTwice   = "BUG: pool: payload released twice"
	msgWriteShared     = "BUG: pool: payload written after it was shared"
)

var (
	payloads        sync.Pool
	payloadsReserve reserve[*Payload]
)

func init() { payloadsReserve.init(256) }

// inUse counts payloads created and not yet released; the gauge reads it at scrape time, so
// the hot path pays one atomic add rather than a gauge's compare-and-swap loop.
var inUse atomic.Int64

var payloadsInUse = promauto.NewGaugeFunc(prometheus.GaugeOpts{
	Name: "otlpgate_pool_payloads_in_use",
	Help: "Payloads created and not yet released by their last holder; a steady climb is a leak.",
}, func() float64 { return float64(inUse.Load()) })

// NewPayload returns an empty Payload with capacity of at least size and one reference, held by
// the caller. Safe for concurrent use.
func NewPayload(size int) *Payload {
	var p *Payload
	if v := payloads.Get(); v != nil {
		p = v.(*Payload)
	} else if r, ok := payloadsReserve.get(); ok {
		p = r
	} else {
		p = new(Payload)
	}
	p.buf = GetBytes(size)
	p.refs.Store(1)
	inUse.Add(1)
	return p
}

// Buf returns the buffer for the owner to append to while building the payload. The pointer
// lets an append that outgrows the capacity replace the buffer in place. Only the single owner
// may call it, before the payload is first shared with Retain; in checked builds a call while
// another reference exists panics.
func (p *Payload) Buf() *[]byte {
	if Checked {
		switch n := p.refs.Load(); {
		case n <= 0:
			panic(msgUseAfterRelease)
		case n > 1:
			panic(msgWriteShared)
		}
	}
	return p.buf
}

// Bytes returns the payload's bytes. They are valid until the caller's own Release and must
// not be modified. Safe for concurrent use by holders of a reference.
func (p *Payload) Bytes() []byte {
	if Checked && p.refs.Load() <= 0 {
		panic(msgUseAfterRelease)
	}
	return *p.buf
}

// Len returns the number of bytes in the payload. Safe for concurrent use by holders of a
// reference.
func (p *Payload) Len() int {
	if Checked && p.refs.Load() <= 0 {
		panic(msgUseAfterRelease)
	}
	return len(*p.buf)
}

// Retain adds a reference for a new holder and returns p, so that handing out a reference
// reads `q := p.Retain()`. The caller must itself hold a reference. Safe for concurrent use.
func (p *Payload) Retain() *Payload {
	// A holder's reference keeps refs >= 1, so a result below 2 means nobody held one.
	if p.refs.Add(1) <= 1 {
		panic(msgUseAfterRelease)
	}
	return p
}

// Release gives back the caller's reference. The last one returns the bytes and the Payload to
// their pools (checked builds poison it instead, see the package doc). Safe for concurrent use.
func (p *Payload) Release() {
	n := p.refs.Add(-1)
	if n > 0 {
		return
	}
	if n < 0 {
		panic(msgReleasedTwice)
	}
	inUse.Add(-1)
	if Checked {
		p.refs.Store(poisoned)
		b := (*p.buf)[:cap(*p.buf)]
		for i := range b {
			b[i] = scribble
		}
		return
	}
	PutBytes(p.buf)
	p.buf = nil
	if !payloadsReserve.put(p) {
		payloads.Put(p)
	}
}

// Refs returns the current number of references. It is meant for tests and assertions: once
// the last reference is gone the value means nothing in plain builds (the Payload may already
// serve someone else) and is far below zero in checked builds. Safe for concurrent use.
func (p *Payload) Refs() int32 {
	return p.refs.Load()
}
