//go:build !race

package client

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// Insert and acknowledge, the path every streamed request takes, allocates nothing once the
// table has its size.
func TestAckTableZeroAlloc(t *testing.T) {
	tab := newAckTable(ackShardBits)
	s := &stream{}
	reqs := make([]request, 64)
	id := uint64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range reqs {
			id++
			reqs[i] = request{id: id, stream: s}
			tab.insert(&reqs[i])
		}
		// Out of order, as answers come.
		for i := len(reqs) - 1; i >= 0; i-- {
			if tab.remove(reqs[i].id, s) == nil {
				panic("lost")
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 64 inserts and acks", allocs)
	}
}

// Marshalling an OTEP frame by views, the send path of every streamed request, allocates
// nothing once the pools are warm; nor does the copy path.
func TestFrameZeroAlloc(t *testing.T) {
	for name, body := range map[string][]byte{
		"views": traceBody("v", 8, 1500),
		"copy":  traceBody("c", 40, 8),
	} {
		t.Run(name, func(t *testing.T) {
			p := payloadOf(body, 64<<10)
			defer p.Release()
			c := newFrameCodec()
			allocs := testing.AllocsPerRun(1000, func() {
				f, err := newFrame(9, p)
				if err != nil {
					panic(err)
				}
				bufs, _ := c.Marshal(f)
				f.unref()
				bufs.Free()
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per frame", allocs)
			}
		})
	}
}

// The destination's own part of a request's life, from Enqueue through the queue to an
// acknowledged Done, allocates nothing once the pools are warm. The senders are not started:
// the test takes the request from the queue itself, as a sender would, and delivers it, as a
// receiver would on Success; a second round goes through a retry.
func TestDestCycleZeroAlloc(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Name, cfg.Endpoint = "alloc_cycle", "127.0.0.1:1"
	cfg.RetryInitial, cfg.RetryMax = time.Nanosecond, time.Nanosecond
	d, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	pc := pipeline.DefaultConfig()
	pc.BatchMaxItems = 1
	p, err := pipeline.New(pc, []pipeline.Destination{d})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	body := traceBody("z", 1, 100)
	timer := stoppedTimer()
	allocs := testing.AllocsPerRun(1000, func() {
		if err := p.Consume(pipeline.Request{Signal: fastpath.Traces, Body: body, Items: 1}); err != nil {
			panic(err)
		}
		r := d.next(fastpath.Traces, timer)
		r.attempt, r.taken = 1, nanotime()
		d.retry(r, RetryFailed)
		r = d.next(fastpath.Traces, timer)
		d.deliver(r)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request", allocs)
	}
}

// Picking the owner of a key allocates nothing.
func TestRendezvousAllocs(t *testing.T) {
	r := newRendezvous([]string{"a:1", "b:1", "c:1"})
	var p fastpath.Picker = &r
	if n := testing.AllocsPerRun(100, func() { _ = p.Pick(12345) }); n != 0 {
		t.Fatalf("%v allocations per pick", n)
	}
}

// A unary call's own part of its context costs nothing: begin, grpc-go's registration of its
// derived context (AfterFunc) and its removal when the call ends, and end. The derived context
// itself is grpc-go's allocation, so the test registers as grpc-go's context does, without one.
func TestCallContextZeroAlloc(t *testing.T) {
	c, release := newCallContext(context.Background())
	defer release()
	f := func() {}
	allocs := testing.AllocsPerRun(1000, func() {
		c.begin()
		stop := c.AfterFunc(f)
		if c.Err() != nil || c.Done() == nil {
			panic("cancelled")
		}
		if !stop() {
			panic("stop found nothing registered")
		}
		if c.end() != nil {
			panic("cancelled")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per call", allocs)
	}
}

// Streams re-opened while answers lag behind stay alive at once, one for each batch of
// answers still due, up to one per in-flight request: all of them go back to the free list,
// and the next re-opens, after collections too, take them from there instead of making
// streams (with their contexts and timers) again.
func TestStreamsRecycledAfterLagZeroAlloc(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Name, cfg.Endpoint = "alloc_streams", "127.0.0.1:1"
	d, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Shutdown(context.Background())
	alive := make([]*stream, 16*cfg.Streams*int(fastpath.NumSignals)) // four times what the list once kept
	cycle := func() {
		for i := range alive {
			alive[i] = d.getStream()
		}
		for _, s := range alive {
			d.putStream(s)
		}
	}
	cycle()
	allocs := testing.AllocsPerRun(10, func() {
		runtime.GC()
		runtime.GC()
		cycle()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per %d streams re-opened after collections", allocs, len(alive))
	}
}
