package admission

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newTestLimiter(t *testing.T, maxBytes int64, decodes int, wait time.Duration) *Limiter {
	t.Helper()
	l := NewLimiter(LimiterConfig{MaxBytes: maxBytes, MaxDecodes: decodes, Wait: wait})
	t.Cleanup(func() {
		if b, d := l.Bytes(), l.Decodes(); b != 0 || d != 0 {
			t.Errorf("limiter still holds %d bytes and %d decodes at the end", b, d)
		}
	})
	return l
}

// waiters counts the waiters queued on g.
func (g *gate) waiters() int { return g.waiting() }

// untilWaiters polls (bounded) until g has n waiters queued.
func untilWaiters(t *testing.T, g *gate, n int) {
	t.Helper()
	for range 20000 {
		if g.waiters() == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("gate has %d waiters, want %d", g.waiters(), n)
}

func TestLimiterRefusesWithoutWait(t *testing.T) {
	l := newTestLimiter(t, 1<<20, 2, 0)
	refused := testutil.ToFloat64(intakeRefusedC[IntakeUDS][refusedBytes])
	if !l.TryAcquireBytes(IntakeUDS, 700<<10) {
		t.Fatal("first 700KiB refused")
	}
	if l.TryAcquireBytes(IntakeUDS, 400<<10) {
		t.Fatal("400KiB more granted past 1MiB")
	}
	if !l.TryAcquireBytes(IntakeUDS, 324<<10) {
		t.Fatal("the exact rest (324KiB) refused")
	}
	if got := l.Bytes(); got != 1<<20 {
		t.Fatalf("Bytes() = %d, want %d", got, 1<<20)
	}
	if l.TryAcquireBytes(IntakeUDS, 1) {
		t.Fatal("one byte granted past the limit")
	}
	if got := testutil.ToFloat64(intakeRefusedC[IntakeUDS][refusedBytes]) - refused; got != 2 {
		t.Fatalf("otlpgate_intake_refused_total{intake=uds,resource=bytes} grew by %v, want 2", got)
	}
	l.ReleaseBytes(IntakeUDS, 700<<10)
	l.ReleaseBytes(IntakeUDS, 324<<10)
	if got := l.HighWaterBytes(); got != 1<<20 {
		t.Fatalf("HighWaterBytes() = %d, want %d", got, 1<<20)
	}
	// Larger than the whole budget: refused at once, even when nothing is held.
	if l.AcquireBytes(IntakeGRPC, 1<<20+1, nil) {
		t.Fatal("a request larger than MaxBytes was granted")
	}
}

func TestLimiterDecodes(t *testing.T) {
	l := newTestLimiter(t, 1<<20, 2, 0)
	refused := testutil.ToFloat64(intakeRefusedC[IntakeKafka][refusedDecodes])
	for i := range 2 {
		if !l.AcquireDecode(IntakeKafka, nil) {
			t.Fatalf("decode %d refused with MaxDecodes 2", i+1)
		}
	}
	if l.AcquireDecode(IntakeKafka, nil) {
		t.Fatal("a third decode granted with MaxDecodes 2")
	}
	if got := l.Decodes(); got != 2 {
		t.Fatalf("Decodes() = %d, want 2", got)
	}
	l.ReleaseDecode()
	if !l.AcquireDecode(IntakeKafka, nil) {
		t.Fatal("decode refused after a release")
	}
	l.ReleaseDecode()
	l.ReleaseDecode()
	if got := testutil.ToFloat64(intakeRefusedC[IntakeKafka][refusedDecodes]) - refused; got != 1 {
		t.Fatalf("otlpgate_intake_refused_total{intake=kafka,resource=decodes} grew by %v, want 1", got)
	}
	if d := NewLimiter(DefaultLimiterConfig()).decodes.max; d < 2 || d%2 != 0 {
		t.Fatalf("default decode cap %d, want twice GOMAXPROCS", d)
	}
}

// A waiter is granted by a release, in arrival order: a large request at the head is not
// overtaken by a small one that would fit.
func TestLimiterWaitFIFO(t *testing.T) {
	l := newTestLimiter(t, 1<<20, 1, time.Hour)
	if !l.AcquireBytes(IntakeKafka, 900<<10, nil) {
		t.Fatal("first acquire refused")
	}
	order := make(chan int64, 2)
	var wg sync.WaitGroup
	acquire := func(n int64) {
		defer wg.Done()
		if !l.AcquireBytes(IntakeKafka, n, nil) {
			t.Errorf("AcquireBytes(%d) refused within an hour's wait", n)
			return
		}
		order <- n
	}
	wg.Add(1)
	go acquire(600 << 10)
	untilWaiters(t, &l.bytes[budgetOpen], 1)
	wg.Add(1)
	go acquire(100 << 10) // would fit now, but must queue behind the 600KiB
	untilWaiters(t, &l.bytes[budgetOpen], 2)
	if got := l.Bytes(); got != 900<<10 {
		t.Fatalf("Bytes() = %d while waiting, want %d", got, 900<<10)
	}
	l.ReleaseBytes(IntakeKafka, 900<<10)
	wg.Wait()
	close(order)
	var got []int64
	for n := range order {
		got = append(got, n)
	}
	if len(got) != 2 || l.Bytes() != 700<<10 {
		t.Fatalf("granted %v, holding %d; want both granted, 700KiB held", got, l.Bytes())
	}
	l.ReleaseBytes(IntakeKafka, 600<<10)
	l.ReleaseBytes(IntakeKafka, 100<<10)
}

func TestLimiterWaitEnds(t *testing.T) {
	l := newTestLimiter(t, 1<<20, 1, 5*time.Millisecond)
	if !l.AcquireBytes(IntakeGRPC, 1<<20, nil) {
		t.Fatal("first acquire refused")
	}
	refused := testutil.ToFloat64(intakeRefusedC[IntakeGRPC][refusedBytes])
	// The bounded wait passes.
	if l.AcquireBytes(IntakeGRPC, 1, nil) {
		t.Fatal("granted while the budget was held")
	}
	// done closes before the wait ends.
	l2 := newTestLimiter(t, 1<<20, 1, time.Hour)
	l2.AcquireBytes(IntakeGRPC, 1<<20, nil)
	done := make(chan struct{})
	close(done)
	if l2.AcquireBytes(IntakeGRPC, 1, done) {
		t.Fatal("granted after done closed")
	}
	if n := l.bytes[budgetShared].waiters() + l2.bytes[budgetShared].waiters(); n != 0 {
		t.Fatalf("%d waiters left queued after giving up", n)
	}
	if got := testutil.ToFloat64(intakeRefusedC[IntakeGRPC][refusedBytes]) - refused; got != 2 {
		t.Fatalf("refusals grew by %v, want 2", got)
	}
	l.ReleaseBytes(IntakeGRPC, 1<<20)
	l2.ReleaseBytes(IntakeGRPC, 1<<20)
	// A waiter that gave up must not block the next one.
	if !l.AcquireBytes(IntakeGRPC, 1<<20, nil) {
		t.Fatal("acquire refused with nothing held")
	}
	l.ReleaseBytes(IntakeGRPC, 1<<20)
}

// A waiter giving up at the head lets the ones behind it through when they fit.
func TestLimiterGiveUpUnblocksNext(t *testing.T) {
	l := newTestLimiter(t, 1<<20, 1, time.Hour)
	l.AcquireBytes(IntakeKafka, 512<<10, nil)
	done := make(chan struct{})
	first := make(chan bool)
	go func() { first <- l.AcquireBytes(IntakeKafka, 1<<20, done) }()
	untilWaiters(t, &l.bytes[budgetOpen], 1)
	second := make(chan bool)
	go func() { second <- l.AcquireBytes(IntakeKafka, 256<<10, nil) }()
	untilWaiters(t, &l.bytes[budgetOpen], 2)
	close(done)
	if <-first {
		t.Fatal("the 1MiB waiter was granted")
	}
	if !<-second {
		t.Fatal("the 256KiB waiter was not granted once the head gave up")
	}
	l.ReleaseBytes(IntakeKafka, 512<<10)
	l.ReleaseBytes(IntakeKafka, 256<<10)
}

func TestLimiterConcurrent(t *testing.T) {
	const max = 1 << 20
	l := newTestLimiter(t, max, 3, time.Hour)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				n := int64((g*7919+i*104729)%(max/2) + 1)
				if !l.AcquireBytes(IntakeGRPC, n, nil) {
					t.Error("refused within an hour's wait")
					return
				}
				if !l.AcquireDecode(IntakeGRPC, nil) {
					t.Error("decode refused within an hour's wait")
					return
				}
				if b, d := l.Bytes(), l.Decodes(); b > max || d > 3 {
					t.Errorf("holding %d bytes and %d decodes, limits %d and 3", b, d, max)
				}
				l.ReleaseDecode()
				l.ReleaseBytes(IntakeGRPC, n)
			}
		}()
	}
	wg.Wait()
	if h := l.HighWaterBytes(); h > max {
		t.Fatalf("high water %d above %d", h, max)
	}
}

func TestLimiterConfigValidate(t *testing.T) {
	f := func(c LimiterConfig, ok bool) {
		t.Helper()
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", c, err, ok)
		}
	}
	f(DefaultLimiterConfig(), true)
	f(LimiterConfig{MaxBytes: 1 << 19}, false)
	f(LimiterConfig{MaxBytes: 1 << 20, MaxDecodes: -1}, false)
	f(LimiterConfig{MaxBytes: 1 << 20, Wait: -1}, false)
	f(LimiterConfig{MaxBytes: 1 << 20}, true)
	f(LimiterConfig{MaxBytes: 1 << 20, UnauthenticatedMaxBytes: 1 << 19}, false)
	f(LimiterConfig{MaxBytes: 1 << 20, UnauthenticatedMaxBytes: 8 << 20}, true)
	f(LimiterConfig{MaxBytes: 8 << 20, MaxConnBytes: 1 << 19}, false)
	f(LimiterConfig{MaxBytes: 8 << 20, MaxConnBytes: 16 << 20}, false)
	f(LimiterConfig{MaxBytes: 8 << 20, MaxConnBytes: 8 << 20}, true)
	f(LimiterConfig{MaxBytes: 1 << 20, ProgressTimeout: -1}, false)
}

func BenchmarkLimiterAcquireRelease(b *testing.B) {
	l := NewLimiter(LimiterConfig{MaxBytes: 1 << 30, Wait: time.Second})
	b.ReportAllocs()
	b.SetBytes(64 << 10)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if l.AcquireBytes(IntakeGRPC, 64<<10, nil) {
				l.ReleaseBytes(IntakeGRPC, 64<<10)
			}
		}
	})
}

// Kafka and UDS, which cannot authenticate their clients, draw from a budget of their own:
// filling it to the last byte leaves the gRPC and OTLP/HTTP budget whole, and the reverse.
func TestLimiterUnauthenticatedBudgetApart(t *testing.T) {
	l := NewLimiter(LimiterConfig{MaxBytes: 4 << 20, UnauthenticatedMaxBytes: 1 << 20, Wait: time.Millisecond})
	refused := testutil.ToFloat64(intakeRefusedC[IntakeKafka][refusedBytes])
	if !l.TryAcquireBytes(IntakeKafka, 512<<10) || !l.TryAcquireBytes(IntakeUDS, 512<<10) {
		t.Fatal("the unauthenticated budget refused its own size")
	}
	if l.AcquireBytes(IntakeKafka, 1, nil) {
		t.Fatal("a Kafka byte granted past -intake.unauthenticated.max-bytes")
	}
	if got := testutil.ToFloat64(intakeRefusedC[IntakeKafka][refusedBytes]) - refused; got != 1 {
		t.Fatalf("kafka byte refusals grew by %v, want 1", got)
	}
	// The other budget is untouched: the whole of it is granted.
	if !l.AcquireBytes(IntakeGRPC, 3<<20, nil) || !l.AcquireBytes(IntakeHTTP, 1<<20, nil) {
		t.Fatal("gRPC and HTTP refused while only Kafka and UDS held bytes")
	}
	if got, want := l.BytesFor(IntakeHTTP), int64(4<<20); got != want {
		t.Fatalf("grpc_http budget holds %d, want %d", got, want)
	}
	if got, want := l.BytesFor(IntakeUDS), int64(1<<20); got != want {
		t.Fatalf("kafka_uds budget holds %d, want %d", got, want)
	}
	if got, want := l.Bytes(), int64(5<<20); got != want || l.HighWaterBytes() != want {
		t.Fatalf("Bytes %d, high water %d, want both %d", got, l.HighWaterBytes(), want)
	}
	if l.MaxBytesFor(IntakeUDS) != 1<<20 || l.MaxBytesFor(IntakeGRPC) != 4<<20 || l.MaxBytes() != 4<<20 {
		t.Fatalf("MaxBytesFor: uds %d, grpc %d", l.MaxBytesFor(IntakeUDS), l.MaxBytesFor(IntakeGRPC))
	}
	l.ReleaseBytes(IntakeGRPC, 3<<20)
	l.ReleaseBytes(IntakeHTTP, 1<<20)
	l.ReleaseBytes(IntakeKafka, 512<<10)
	l.ReleaseBytes(IntakeUDS, 512<<10)
	if l.Bytes() != 0 {
		t.Fatalf("holding %d after every release", l.Bytes())
	}
	// Unset, the unauthenticated budget is as large as the other.
	if d := NewLimiter(LimiterConfig{MaxBytes: 2 << 20}); d.MaxBytesFor(IntakeKafka) != 2<<20 || d.MaxConnBytes() != 2<<20 {
		t.Fatalf("unset budgets: kafka %d, conn %d, want both 2MiB", d.MaxBytesFor(IntakeKafka), d.MaxConnBytes())
	}
}

// A budget's release is counted against that budget only, and a release past what was
// granted is a bug, whichever the budget.
func TestLimiterReleaseWrongBudgetPanics(t *testing.T) {
	l := NewLimiter(LimiterConfig{MaxBytes: 1 << 20})
	l.TryAcquireBytes(IntakeGRPC, 100)
	defer func() {
		if recover() == nil {
			t.Fatal("releasing Kafka bytes that only gRPC took did not panic")
		}
	}()
	l.ReleaseBytes(IntakeKafka, 100)
}

// gRPC messages inflate into a budget of their own: a full -intake.max-bytes (every call's
// reservation taken) does not keep a call from inflating its message, and the inflate budget
// refuses past its size (counted as inflate_bytes).
func TestLimiterInflateBudgetApart(t *testing.T) {
	l := NewLimiter(LimiterConfig{MaxBytes: 4 << 20, InflateMaxBytes: 2 << 20, Wait: time.Millisecond})
	if !l.AcquireBytes(IntakeGRPC, 4<<20, nil) {
		t.Fatal("cannot take the shared budget")
	}
	refused := testutil.ToFloat64(intakeRefusedC[IntakeGRPC][refusedInflate])
	if !l.AcquireInflate(IntakeGRPC, 2<<20, time.Millisecond, nil) {
		t.Fatal("inflate refused while only the shared budget was full")
	}
	if l.AcquireInflate(IntakeGRPC, 1, time.Millisecond, nil) {
		t.Fatal("inflate granted past -intake.inflate-bytes")
	}
	if got := testutil.ToFloat64(intakeRefusedC[IntakeGRPC][refusedInflate]) - refused; got != 1 {
		t.Fatalf("inflate_bytes refusals grew by %v, want 1", got)
	}
	if l.Bytes() != 6<<20 || l.InflateBytes() != 2<<20 || l.HighWaterBytes() != 6<<20 {
		t.Fatalf("Bytes %d, InflateBytes %d, high water %d", l.Bytes(), l.InflateBytes(), l.HighWaterBytes())
	}
	l.ReleaseInflate(2 << 20)
	l.ReleaseBytes(IntakeGRPC, 4<<20)
	if l.Bytes() != 0 {
		t.Fatalf("holding %d after the releases", l.Bytes())
	}
	if d := NewLimiter(LimiterConfig{MaxBytes: 8 << 20}); d.MaxInflateBytes() != 8<<20 {
		t.Fatalf("unset inflate budget %d, want as large as MaxBytes", d.MaxInflateBytes())
	}
}
