package grpcserver

import (
	"net"
	"testing"
	"testing/synctest"
	"time"
)

// The receive-timeout sweep makes no pass while no connection is open: an idle intake wakes
// nobody. The first connection wakes it, it passes once a tick while the connection is open, and
// it sleeps again after the pass that finds the connection gone.
func TestConnsSweepSleepsWithoutConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.RecvTimeout = 4 * time.Second // a pass a second
		cs := newConns(&cfg)
		go cs.sweep()
		defer func() {
			close(cs.stop)
			<-cs.done
		}()
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := cs.passes.Load(); n != 1 {
			t.Fatalf("%d passes in an hour without a connection, want 1 (the first finds none and sleeps)", n)
		}
		a, b := net.Pipe()
		defer b.Close()
		c, ok := cs.add(a)
		if !ok {
			t.Fatal("the connection was refused")
		}
		time.Sleep(10*time.Second + time.Second/2)
		synctest.Wait()
		if n := cs.passes.Load(); n != 11 {
			t.Fatalf("%d passes after 10.5 s with a connection open, want 11 (1 + one a second)", n)
		}
		c.Close()
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := cs.passes.Load(); n != 12 {
			t.Fatalf("%d passes an hour after the connection closed, want 12 (one more finds none)", n)
		}
	})
}
