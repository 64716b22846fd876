package kafka

import (
	"testing"
	"testing/synctest"
	"time"
)

// The instance sweep of a Kafka intake no client talks to sleeps; the first instance created
// wakes it, it expires that instance once its ttl is past, and sleeps again.
func TestSweepSleepsWithoutInstances(t *testing.T) {
	set := testSet(t, 1, time.Second)
	synctest.Test(t, func(t *testing.T) {
		s := &Server{reg: newRegistry(10, 1<<30), stop: make(chan struct{}), now: time.Now}
		s.wg.Add(1)
		go s.sweep()
		defer func() { close(s.stop); s.wg.Wait() }()
		passes := func(d time.Duration) int64 {
			before := s.sweeps.Load()
			time.Sleep(d)
			synctest.Wait()
			return s.sweeps.Load() - before
		}
		if n := passes(time.Hour); n != 1 {
			t.Fatalf("%d sweeps in an hour without an instance, want the first only", n)
		}

		a := s.reg.get(&conn{}, &clientLabels{clientID: "x"}, [16]byte{}, set, time.Now())
		if a.plan == nil {
			t.Fatal("no instance")
		}
		// The instance is expired by the sweep after its ttl, within sweepEvery; the pass
		// that finds the registry empty is the last.
		s.reg.mu.Lock()
		ttl := s.reg.mu.byID[a.id].ttl()
		s.reg.mu.Unlock()
		n := passes(ttl + 2*sweepEvery)
		if s.reg.len() != 0 {
			t.Fatalf("the instance is still there %v after it was created (ttl %v)", ttl+2*sweepEvery, ttl)
		}
		if want := int64((ttl + sweepEvery) / sweepEvery); n < 1 || n > want+1 {
			t.Fatalf("%d sweeps while an instance lived %v, want 1 to %d", n, ttl, want+1)
		}
		if n := passes(time.Hour); n != 0 {
			t.Fatalf("%d sweeps in an hour after the last instance expired, want none", n)
		}
	})
}
