package admission

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// acquire takes n bytes from a and returns the tick to release them with, failing the test
// when refused.
func acquire(t *testing.T, a *Account, n int64) uint64 {
	t.Helper()
	tick, ok := a.Acquire(n, nil)
	if !ok {
		t.Fatalf("%d bytes refused (connection holds %d)", n, a.Held())
	}
	return tick
}

// One connection's requests hold at most -intake.max-conn-bytes together: a connection at its
// cap is refused (counted as conn_bytes) while another connection still gets the rest of the
// budget, and a refusal of the shared budget is counted as bytes and leaves the connection's
// share as it was.
func TestAccountCapsOneConnection(t *testing.T) {
	l := newTestLimiter(t, 8<<20, 1, 20*time.Millisecond)
	l.maxConn = 3 << 20
	a, b, c := l.NewAccount(IntakeGRPC), l.NewAccount(IntakeGRPC), l.NewAccount(IntakeGRPC)
	connRefused := testutil.ToFloat64(intakeRefusedC[IntakeGRPC][refusedConnBytes])
	bytesRefused := testutil.ToFloat64(intakeRefusedC[IntakeGRPC][refusedBytes])
	var ticks []uint64
	for range 3 {
		ticks = append(ticks, acquire(t, a, 1<<20))
	}
	if _, ok := a.Acquire(1, nil); ok {
		t.Fatal("a byte granted past the connection's cap")
	}
	if got := testutil.ToFloat64(intakeRefusedC[IntakeGRPC][refusedConnBytes]) - connRefused; got != 1 {
		t.Fatalf("conn_bytes refusals grew by %v, want 1", got)
	}
	if a.Held() != 3<<20 || l.Bytes() != 3<<20 {
		t.Fatalf("connection holds %d, limiter %d; want both 3MiB", a.Held(), l.Bytes())
	}
	// The other connections are served from what is left: 5MiB.
	tb := acquire(t, b, 3<<20)
	tc := acquire(t, c, 2<<20)
	if _, ok := c.Acquire(1<<20, nil); ok {
		t.Fatal("granted past the shared budget")
	}
	if got := testutil.ToFloat64(intakeRefusedC[IntakeGRPC][refusedBytes]) - bytesRefused; got != 1 {
		t.Fatalf("bytes refusals grew by %v, want 1", got)
	}
	if c.Held() != 2<<20 {
		t.Fatalf("a refused request left its connection holding %d, want the 2MiB granted before", c.Held())
	}
	for _, tick := range ticks {
		a.Release(1<<20, tick)
	}
	b.Release(3<<20, tb)
	c.Release(2<<20, tc)
	if a.Held()+b.Held()+c.Held() != 0 {
		t.Fatalf("accounts hold %d, %d, %d after every release", a.Held(), b.Held(), c.Held())
	}
	if a.Intake() != IntakeGRPC {
		t.Fatalf("Intake() = %v", a.Intake())
	}
}

// A request waiting at its connection's cap holds nothing of the shared budget, and is
// granted when its connection releases; done ends the wait.
func TestAccountWaitsAtItsCap(t *testing.T) {
	l := newTestLimiter(t, 8<<20, 1, time.Hour)
	l.maxConn = 2 << 20
	a := l.NewAccount(IntakeGRPC)
	first := acquire(t, a, 2<<20)
	got := make(chan bool)
	go func() {
		tick, ok := a.Acquire(1<<20, nil)
		if ok {
			a.Release(1<<20, tick)
		}
		got <- ok
	}()
	untilWaiters(t, &a.own, 1)
	if l.Bytes() != 2<<20 {
		t.Fatalf("a waiter at its connection's cap holds shared bytes: %d", l.Bytes())
	}
	a.Release(2<<20, first)
	if !<-got {
		t.Fatal("the waiter was refused after its connection released")
	}
	first = acquire(t, a, 2<<20)
	done := make(chan struct{})
	go func() { _, ok := a.Acquire(1<<20, done); got <- ok }()
	untilWaiters(t, &a.own, 1)
	close(done)
	if <-got {
		t.Fatal("granted after done closed")
	}
	a.Release(2<<20, first)
}

// Tick reports the age of the oldest reservation still held: reservations released in time
// leave no age behind, one held across ticks ages with every tick, and past the ticks the
// account tells apart it stays as old as that.
func TestAccountAges(t *testing.T) {
	l := newTestLimiter(t, 8<<20, 1, 0)
	a := l.NewAccount(IntakeGRPC)
	if age := a.Tick(); age != 0 {
		t.Fatalf("empty account: age %d", age)
	}
	// Short reservations, one per tick, never age.
	for range 2 * accountTicks {
		tick := acquire(t, a, 1<<10)
		a.Release(1<<10, tick)
		if age := a.Tick(); age != 0 {
			t.Fatalf("a released reservation left age %d", age)
		}
	}
	old := acquire(t, a, 1<<20)
	for i := 1; i <= 3*accountTicks; i++ {
		// A new short reservation each tick does not hide the old one.
		tick := acquire(t, a, 1<<10)
		if age := a.Tick(); age != min(i, accountTicks) {
			t.Fatalf("after %d ticks: age %d, want %d", i, age, min(i, accountTicks))
		}
		a.Release(1<<10, tick)
	}
	a.Release(1<<20, old)
	if age := a.Tick(); age != 0 {
		t.Fatalf("after the old reservation's release: age %d", age)
	}
	// A reservation released after it turned ancient is counted out of the right place.
	old = acquire(t, a, 1<<20)
	young := uint64(0)
	for i := range accountTicks + 2 {
		if i == accountTicks {
			young = acquire(t, a, 1<<10)
		}
		a.Tick()
	}
	a.Release(1<<20, old)
	if age := a.Tick(); age != 3 {
		t.Fatalf("with only the young reservation (taken 3 ticks ago) left: age %d, want 3", age)
	}
	a.Release(1<<10, young)
	if age := a.Tick(); age != 0 || a.Held() != 0 {
		t.Fatalf("all released: age %d, held %d", age, a.Held())
	}
}
