package spool

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/pool"
)

// A reader takes the spool's lock under its own (Next reading the tail), so the checkpoint
// that releases removed destinations must never take a reader's lock under the spool's: it
// did, and a destination's feeder reading the tail while a removed one was released froze
// both, and every checkpoint after them (found by TestSpoolModel). Here one destination
// appends and reads at the tail while destinations are added, removed and released, a
// checkpoint each, many times; the run must end.
func TestReleaseWhileAnotherReaderReadsTheTail(t *testing.T) {
	cfg := testConfig(SyncNone)
	cfg.CheckpointInterval = time.Hour // only the test's checkpoints
	s := mustOpen(t, cfg, NewCrashFS(), "a")
	defer s.Close()
	a := reader(t, s, "a")
	stop, fed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(fed)
		buf := pool.GetBytes(pool.MinSize)
		defer pool.PutBytes(buf)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Full is fine here (the removed destinations hold until their release): the
			// subject is the locks.
			if _, err := s.Append(Record{Signal: uint8(i % 3), Items: 1, Payload: payload(i)}); err != nil && !errors.Is(err, ErrFull) {
				t.Errorf("append: %v", err)
				return
			}
			*buf = (*buf)[:0]
			if e, err := a.Next(buf); err == nil {
				a.Finish(e.Pos)
			}
		}
	}()
	released := make(chan error, 1)
	go func() {
		for i := range 3000 {
			r, err := s.AddReader(fmt.Sprintf("gone-%d", i))
			if err != nil {
				released <- err
				return
			}
			r.Away() // owes nothing: released by the checkpoint
			if err := s.Checkpoint(); err != nil {
				released <- err
				return
			}
		}
		released <- nil
	}()
	select {
	case err := <-released:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the checkpoints releasing removed destinations never finished beside a reader at the tail: a lock-order deadlock")
	}
	close(stop)
	<-fed
}
