package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/pool"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// answerAll answers every request still pending on every stream of u.
func answerAll(u *upstream) {
	u.mu.Lock()
	streams := append([]*srvStream(nil), u.streams...)
	u.mu.Unlock()
	for _, s := range streams {
		s.mu.Lock()
		var pend []uint64
		for id := range s.unacked {
			pend = append(pend, id)
		}
		s.mu.Unlock()
		for _, id := range pend {
			s.ack(id, otepv1.ResultCode_Success)
		}
	}
}

// Shutdown refuses new batches at once, then waits for the answers still owed and delivers
// everything that was taken.
func TestShutdownWaitsForAnswers(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		const n = 4
		u := newUpstream(t)
		u.onStream = func(*srvStream, received) error { return nil } // answered by the test
		d := startDest(t, streamConfigOn(t, tr, u.addr, 1, 8))
		f := newFeeder(t, d)
		f.send(0, n, 1, 10)
		u.waitUntil("every request", func() bool { return len(u.got) == n })
		errc := make(chan error, 1)
		go func() { errc <- shutdown(t, d, waitFor) }()
		for i := 0; !d.closing(); i++ {
			if i == 3000 {
				t.Fatal("shutdown never began")
			}
			time.Sleep(time.Millisecond)
		}
		f.send(n, 1, 1, 10) // refused with ErrClosed: the pipeline finishes it as undelivered
		if f.wait(n) {
			t.Error("a batch enqueued after Shutdown began was delivered")
		}
		answerAll(u)
		if err := <-errc; err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		for i := range n {
			if !f.wait(i) {
				t.Errorf("batch %d not delivered", i)
			}
		}
		if len(u.received()) != n {
			t.Errorf("upstream received %d requests, want %d", len(u.received()), n)
		}
	})
}

// When the deadline ends the wait, every request still held is finished as undelivered and
// counted by where it was: pending (sent, unanswered), waiting for a retry, or queued.
func TestShutdownCountsLosses(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		u := newUpstream(t)
		u.onStream = func(s *srvStream, g received) error {
			if g.tag == "b1" {
				s.ack(g.id, otepv1.ResultCode_FailedRetryable)
			}
			return nil // b0 and b2 are never answered
		}
		cfg := streamConfigOn(t, tr, u.addr, 1, 2)
		cfg.RetryInitial, cfg.RetryMax, cfg.RetryMaxElapsed = time.Hour, time.Hour, 0
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, 5, 2, 10)
		u.waitUntil("b0, b1 and b2", func() bool { return len(u.got) == 3 })
		for i := 0; value(d.m.retried[RetryFailed]) == 0; i++ {
			if i == 3000 {
				t.Fatal("b1 never scheduled for a retry")
			}
			time.Sleep(10 * time.Millisecond)
		}
		err := shutdown(t, d, 50*time.Millisecond)
		if err == nil {
			t.Fatal("shutdown reported no loss")
		}
		for i, ok := range f.waitAll() {
			if ok {
				t.Errorf("batch %d delivered", i)
			}
		}
		p, r, q := value(d.m.dropped[DropShutdownPending]), value(d.m.dropped[DropShutdownRetry]), value(d.m.dropped[DropShutdownQueued])
		if p != 2 || r != 1 || q != 2 {
			t.Errorf("lost pending %d, retry %d, queued %d; want 2, 1, 2", p, r, q)
		}
		if items := value(d.m.droppedItems[DropShutdownPending]); items != 4 {
			t.Errorf("pending items lost %d, want 4", items)
		}
		// One report says everything, by reason, including what the senders dropped as they stopped.
		// What was sent and not answered is told apart: the upstream may have it.
		want := fmt.Sprintf("client: destination %q: at the shutdown deadline 6 items (3 requests) not delivered, "+
			"and 4 items (2 requests) sent without an answer, perhaps delivered "+
			"(shutdown_queued: 2 requests, 4 items; shutdown_pending: 2 requests, 4 items; shutdown_retry: 1 requests, 2 items; "+
			"otlpgate_client_dropped_items_total)", cfg.Name)
		if err.Error() != want {
			t.Errorf("shutdown error\n%s\nwant\n%s", err, want)
		}
		if v, b := value(d.m.inFlight), value(d.m.queueBytes); v != 0 || b != 0 {
			t.Errorf("in flight %d, queue bytes %d after shutdown", v, b)
		}
	})
}

// Without WaitOnShutdown, Shutdown does not wait for answers however long its context allows.
func TestShutdownWithoutWaiting(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		u := newUpstream(t)
		u.onStream = func(*srvStream, received) error { return nil }
		cfg := streamConfigOn(t, tr, u.addr, 1, 8)
		cfg.WaitOnShutdown = false
		d := startDest(t, cfg)
		f := newFeeder(t, d)
		f.send(0, 2, 1, 10)
		u.waitUntil("both requests", func() bool { return len(u.got) == 2 })
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		if err := d.Shutdown(ctx); err == nil {
			t.Error("no loss reported")
		}
		if ctx.Err() != nil {
			t.Error("Shutdown waited for its context")
		}
		if v := value(d.m.dropped[DropShutdownPending]); v != 2 {
			t.Errorf("pending lost %d, want 2", v)
		}
	})
}

// A destination whose endpoint refuses connections starts, queues, and shuts down cleanly.
func TestDeadEndpoint(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		for _, mode := range []string{ModeStream, ModeUnary} {
			t.Run(mode, func(t *testing.T) {
				cfg := streamConfigOn(t, tr, addr, 2, 4)
				if mode == ModeUnary {
					cfg = unaryConfig(t, addr, ProtocolV1, 2)
				}
				d := startDest(t, cfg)
				f := newFeeder(t, d)
				f.send(0, 3, 1, 10)
				err := shutdown(t, d, 100*time.Millisecond)
				if err == nil {
					t.Fatal("no loss reported")
				}
				lost := 0
				for r := range numDropReasons {
					lost += value(d.m.dropped[r])
				}
				if lost != 3 {
					t.Errorf("dropped %d, want 3", lost)
				}
				for i, ok := range f.waitAll() {
					if ok {
						t.Errorf("batch %d delivered", i)
					}
				}
			})
		}
	})
}

// Enqueue is bounded by bytes and refuses without blocking.
func TestEnqueueBounds(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		body := traceBody("b", 1, 100)
		cfg := streamConfigOn(t, tr, addr, 1, 1)
		cfg.QueueBytes = int64(3*len(body) + len(body)/2)
		d, err := New(cfg, nil) // not started: nothing leaves the queue
		if err != nil {
			t.Fatal(err)
		}
		rec := &refusals{dest: d}
		f := newFeeder(t, rec)
		f.send(0, 5, 1, 100)
		if want := []error{nil, nil, nil, pipeline.ErrFull, pipeline.ErrFull}; !errorsEqual(rec.errs, want) {
			t.Errorf("Enqueue returned %v, want %v", rec.errs, want)
		}
		held := len(f.body("b0")) + len(f.body("b1")) + len(f.body("b2"))
		if v := value(d.m.queueBytes); v != held {
			t.Errorf("queue bytes %d, want %d", v, held)
		}
		if err := shutdown(t, d, time.Second); err == nil {
			t.Error("no loss reported")
		}
		if v := value(d.m.dropped[DropShutdownQueued]); v != 3 {
			t.Errorf("queued lost %d, want 3", v)
		}
		f.send(5, 1, 1, 100)
		if err := rec.errs[5]; !errors.Is(err, pipeline.ErrClosed) {
			t.Errorf("Enqueue after Shutdown: %v", err)
		}
	})
}

// refusals wraps a destination and records what its Enqueue returned.
type refusals struct {
	dest *Dest
	errs []error
}

func (r *refusals) Name() string { return r.dest.Name() }

func (r *refusals) Enqueue(b *pipeline.Batch) error {
	err := r.dest.Enqueue(b)
	r.errs = append(r.errs, err)
	return err
}

func errorsEqual(a, b []error) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !errors.Is(a[i], b[i]) && a[i] != b[i] {
			return false
		}
	}
	return true
}

// keeper owns batches as the spool's feeder does: keeps tells whether it keeps the records of
// a batch given up (the feeder stopped), done receives each batch's outcome.
type keeper struct {
	keeps bool
	done  chan bool
}

func (k *keeper) BatchDone(delivered bool) { k.done <- delivered }
func (k *keeper) Keeps() bool              { return k.keeps }

// What Shutdown gives up on is dropped (shutdown_*, an error) unless the batch's owner keeps
// it, as the spool does once its feeder stopped: then it is counted as returned to the spool,
// in the metric and the tally, nothing is dropped, and Shutdown reports no loss. One request
// pending and two queued, either way.
func TestShutdownReturnsKeptBatches(t *testing.T) {
	transports(t, func(t *testing.T, tr string) {
		for _, keeps := range []bool{true, false} {
			t.Run(fmt.Sprintf("keeps=%v", keeps), func(t *testing.T) {
				u := newUpstream(t)
				u.onStream = func(*srvStream, received) error { return nil } // never answers
				cfg := streamConfigOn(t, tr, u.addr, 1, 1)
				var tally Tally
				cfg.Tally = &tally
				d := startDest(t, cfg)
				k := &keeper{keeps: keeps, done: make(chan bool, 3)}
				for i := range 3 {
					body := traceBody("b"+fmt.Sprint(i), 2, 10)
					p := pool.NewPayload(len(body))
					*p.Buf() = append((*p.Buf())[:0], body...)
					if err := d.Enqueue(pipeline.NewBatch(fastpath.Traces, 2, p, k)); err != nil {
						t.Fatal(err)
					}
				}
				u.waitUntil("the first request", func() bool { return len(u.got) == 1 })
				err := shutdown(t, d, 50*time.Millisecond)
				for range 3 {
					if <-k.done {
						t.Error("a batch delivered")
					}
				}
				dropped := 0
				for _, r := range DropReasons() {
					dropped += value(d.m.droppedItems[r])
				}
				returned, returnedItems := value(d.m.returnedRequests), value(d.m.returnedItems)
				if keeps {
					if err != nil || dropped != 0 || returned != 3 || returnedItems != 6 || tally.Returned() != 6 {
						t.Errorf("err %v, dropped %d items, returned %d requests %d items (tally %d); want nil, 0, 3, 6, 6",
							err, dropped, returned, returnedItems, tally.Returned())
					}
					return
				}
				if err == nil || dropped != 6 || returned != 0 || tally.Returned() != 0 ||
					tally.Dropped(DropShutdownPending) != 2 || tally.Dropped(DropShutdownQueued) != 4 {
					t.Errorf("err %v, dropped %d items (pending %d, queued %d), returned %d (tally %d); want a loss, 6 (2, 4), 0, 0",
						err, dropped, tally.Dropped(DropShutdownPending), tally.Dropped(DropShutdownQueued), returned, tally.Returned())
				}
			})
		}
	})
}

// A balanced destination with no backend holds what it is given; at Shutdown the held batches
// whose owner keeps them (the spool's) are returned, not refused, and no loss is reported.
func TestFleetShutdownReturnsKeptBatches(t *testing.T) {
	for _, keeps := range []bool{true, false} {
		t.Run(fmt.Sprintf("keeps=%v", keeps), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gateways")
			writeEndpoints(t, path)
			cfg := fleetConfig(t, "fleet_kept_"+strconv.FormatInt(destSeq.Add(1), 10))
			cfg.Resolver, cfg.EndpointsFile, cfg.ResolveInterval = ResolverFile, path, time.Hour
			var tally Tally
			cfg.Tally = &tally
			f, err := NewFleet(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			f.Start()
			k := &keeper{keeps: keeps, done: make(chan bool, 2)}
			for i := range 2 {
				body := traceBody("b"+fmt.Sprint(i), 2, 10)
				p := pool.NewPayload(len(body))
				*p.Buf() = append((*p.Buf())[:0], body...)
				if err := f.Enqueue(pipeline.NewBatch(fastpath.Traces, 2, p, k)); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			err = f.Shutdown(ctx)
			for range 2 {
				if <-k.done {
					t.Error("a batch delivered")
				}
			}
			refused := value(f.m.refused[fleetRefusedShutdown])
			returned := int(testutil.ToFloat64(returnedItems.WithLabelValues(cfg.Name, "")))
			if keeps {
				if err != nil || refused != 0 || returned != 4 || tally.Returned() != 4 {
					t.Errorf("err %v, refused %d items, returned %d (tally %d); want nil, 0, 4, 4", err, refused, returned, tally.Returned())
				}
				return
			}
			if err == nil || refused != 4 || returned != 0 || tally.Returned() != 0 {
				t.Errorf("err %v, refused %d items, returned %d (tally %d); want a loss, 4, 0, 0", err, refused, returned, tally.Returned())
			}
		})
	}
}
