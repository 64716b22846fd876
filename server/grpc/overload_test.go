package grpcserver

import (
	"testing"
	"time"
)

// The grace of -grpc.overload-after applies to every refusal episode, including the first one
// after a long quiet period in which nothing was admitted.
func TestOverloadGraceAfterQuietPeriod(t *testing.T) {
	s := &Server{cfg: Config{OverloadAfter: 2 * time.Second}}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	at := func(d time.Duration, want bool) {
		t.Helper()
		if got := s.overloadedAt(t0 + int64(d)); got != want {
			t.Fatalf("refusal at +%v: overloaded %v, want %v", d, got, want)
		}
	}
	at(0, false)
	at(time.Second, false)
	at(2*time.Second, true) // refusals for 2s without a break
	at(3*time.Second, true)
	// The clients go quiet; nothing is admitted for an hour, then one refusal.
	at(time.Hour, false)
	at(time.Hour+1500*time.Millisecond, false)
	at(time.Hour+2*time.Second, true)
	// An admission ends the episode too.
	s.refusingSince.Store(0)
	at(time.Hour+2500*time.Millisecond, false)

	zero := &Server{cfg: Config{OverloadAfter: 0}}
	if !zero.overloadedAt(t0) || !zero.overloadedAt(t0+int64(time.Hour)) {
		t.Fatal("OverloadAfter 0 must end calls at the first refusal")
	}
}
