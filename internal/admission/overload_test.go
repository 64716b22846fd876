package admission

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// The grace of -grpc.overload-after (and -http.overload-after) applies to every refusal
// episode, including the first one after a long quiet period in which nothing was admitted.
func TestOverloadGraceAfterQuietPeriod(t *testing.T) {
	var s Control
	s.Init(nil, nil, 2*time.Second)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	at := func(d time.Duration, want bool) {
		t.Helper()
		if got := s.OverloadedAt(t0 + int64(d)); got != want {
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
	s.endEpisode()
	at(time.Hour+2500*time.Millisecond, false)

	var zero Control
	zero.Init(nil, nil, 0)
	if !zero.OverloadedAt(t0) || !zero.OverloadedAt(t0+int64(time.Hour)) {
		t.Fatal("OverloadAfter 0 must end calls at the first refusal")
	}
}

// Both intakes map admission errors and size Retry-After the same way.
func TestReasonsAndRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Reason
		name string
	}{
		{nil, Accepted, "accepted"},
		{pipeline.ErrFull, Full, "queue_full"},
		{fmt.Errorf("wrapped: %w", pipeline.ErrTooLarge), TooLarge, "too_large"},
		{pipeline.ErrClosed, Closed, "closed"},
		{pipeline.ErrSpoolFull, SpoolFull, "spool_full"},
		{fmt.Errorf("wrapped: %w", pipeline.ErrSpoolIO), SpoolIO, "spool_io"},
		{pipeline.ErrBudget, Busy, "intake_bytes"},
		{errors.New("a re-tag failure"), Invalid, "invalid"},
	} {
		if got := Of(tc.err); got != tc.want || got.String() != tc.name {
			t.Errorf("Of(%v) = %d %q, want %d %q", tc.err, got, got, tc.want, tc.name)
		}
	}
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {1001 * time.Millisecond, 2}, {5 * time.Second, 5}, {29500 * time.Millisecond, 30}} {
		if got := RetryAfterSeconds(tc.d); got != tc.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

// endEpisode ends the current refusal episode, as an admission does.
func (c *Control) endEpisode() { c.refusingSince.Store(0) }
