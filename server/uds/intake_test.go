package uds

import (
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
	"github.com/otlpgate/otlpgate/fastpath"
)

// A message that does not arrive in one read is kept only with the intake limiter's bytes:
// without them it is discarded (intake_limit); with them the carry is reserved while the
// message is incomplete and given back once it is.
func TestCarryUsesIntakeLimiter(t *testing.T) {
	lim := fastpath.NewLimiter(fastpath.LimiterConfig{MaxBytes: 1 << 20, Wait: time.Minute})
	h := start(t, func(c *Config) { c.Limiter = lim })
	hdr := ocdaemon.Header{Type: ocdaemon.TraceExport, Seq: 1, PID: 9, Time: 1795262752.5, Len: 500}
	partial := append(ocdaemon.AppendHeader(nil, &hdr), `[{"traceId":"0af7`...)

	noMemory := counter(discarded[ocdaemon.ReasonNoMemory])
	refused := counter(fastpath.IntakeRefusedCounter(fastpath.IntakeUDS))
	if !lim.TryAcquireBytes(fastpath.IntakeUDS, 1<<20) {
		t.Fatal("cannot take the budget")
	}
	c := h.dial()
	write(t, c, partial, 0)
	waitFor(t, "the partial message to be discarded", func() bool { return counter(discarded[ocdaemon.ReasonNoMemory])-noMemory == 1 })
	if got := counter(fastpath.IntakeRefusedCounter(fastpath.IntakeUDS)) - refused; got != 1 {
		t.Fatalf("otlpgate_intake_refused_total{intake=uds} grew by %v, want 1", got)
	}
	c.Close()
	lim.ReleaseBytes(1 << 20)

	c = h.dial()
	defer c.Close()
	write(t, c, partial, 0)
	waitFor(t, "the carry to be reserved", func() bool { return lim.Bytes() > 0 })
	if got := lim.Bytes(); got > 64<<10 {
		t.Fatalf("carry of a %d-byte partial message reserves %d bytes", len(partial), got)
	}
	c.Close()
	waitFor(t, "the carry to be given back", func() bool { return lim.Bytes() == 0 })
	if got := counter(discarded[ocdaemon.ReasonNoMemory]) - noMemory; got != 1 {
		t.Fatalf("intake_limit discards %v, want 1", got)
	}
}
