package bench

import (
	"os"
	"testing"
)

// The /proc reading of this very process agrees with getrusage to the tick.
func TestProcUsageMatchesSelf(t *testing.T) {
	x := 0
	for i := range 50_000_000 { // burn some CPU so both readings are well above zero
		x += i ^ x
	}
	_ = x
	before := SelfUsage()
	proc, err := ProcUsage(os.Getpid())
	after := SelfUsage()
	if err != nil {
		t.Fatal(err)
	}
	tick := int64(1e9 / clockTicks)
	if p := proc.Total().Nanoseconds(); p < before.Total().Nanoseconds()-2*tick || p > after.Total().Nanoseconds()+2*tick {
		t.Fatalf("/proc says %v, getrusage %v..%v", proc.Total(), before.Total(), after.Total())
	}
	rss, err := PeakRSS(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Fatalf("peak RSS %d, %v", rss, err)
	}
	if _, err := ProcUsage(-1); err == nil {
		t.Fatal("no error for a missing process")
	}
}
