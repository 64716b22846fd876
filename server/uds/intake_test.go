package uds

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/codec/ocdaemon"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// A message that does not arrive in one read is kept only with the intake limiter's bytes:
// without them it is discarded (intake_limit); with them the carry is reserved while the
// message is incomplete and given back once it is.
func TestCarryUsesIntakeLimiter(t *testing.T) {
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 1 << 20, Wait: time.Minute})
	h := start(t, func(c *Config) { c.Limiter = lim })
	hdr := ocdaemon.Header{Type: ocdaemon.TraceExport, Seq: 1, PID: 9, Time: 1795262752.5, Len: 500}
	partial := append(ocdaemon.AppendHeader(nil, &hdr), `[{"traceId":"0af7`...)

	noMemory := counter(discarded[ocdaemon.ReasonNoMemory])
	refused := intakeRefused(t, "uds", "bytes")
	if !lim.TryAcquireBytes(admission.IntakeUDS, 1<<20) {
		t.Fatal("cannot take the budget")
	}
	c := h.dial()
	write(t, c, partial, 0)
	testkit.WaitFor(t, "the partial message to be discarded", func() bool { return counter(discarded[ocdaemon.ReasonNoMemory])-noMemory == 1 })
	if got := intakeRefused(t, "uds", "bytes") - refused; got != 1 {
		t.Fatalf("otlpgate_intake_refused_total{intake=uds} grew by %v, want 1", got)
	}
	c.Close()
	lim.ReleaseBytes(admission.IntakeUDS, 1<<20)

	c = h.dial()
	defer c.Close()
	write(t, c, partial, 0)
	testkit.WaitFor(t, "the carry to be reserved", func() bool { return lim.Bytes() > 0 })
	if got := lim.Bytes(); got > 64<<10 {
		t.Fatalf("carry of a %d-byte partial message reserves %d bytes", len(partial), got)
	}
	c.Close()
	testkit.WaitFor(t, "the carry to be given back", func() bool { return lim.Bytes() == 0 })
	if got := counter(discarded[ocdaemon.ReasonNoMemory]) - noMemory; got != 1 {
		t.Fatalf("intake_limit discards %v, want 1", got)
	}
}

// Partial messages held by many connections fill the budget of the unauthenticated intakes
// (-intake.unauthenticated.max-bytes) and no more: the gRPC and OTLP/HTTP budget stays whole,
// so nobody who can write to the socket can take what authenticated clients are served from;
// and a well-behaved client beside them, whose messages arrive whole, keeps being served.
func TestStalledPartialsDoNotStarveOthers(t *testing.T) {
	const shared, open = 8 << 20, 1 << 20
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: shared, UnauthenticatedMaxBytes: open, Wait: time.Minute})
	h := start(t, func(c *Config) { c.Limiter = lim })
	hdr := ocdaemon.Header{Type: ocdaemon.TraceExport, Seq: 1, PID: 9, Time: 1795262752.5, Len: 60 << 10}
	partial := append(ocdaemon.AppendHeader(nil, &hdr), bytes.Repeat([]byte{'a'}, 30<<10)...)
	// What one capture of the well-behaved client becomes, before the others stall.
	capture := readFile(t, "trace_minimal.bin")
	h.replay(capture, 0)
	baseline := h.rec.Received()
	if len(baseline) == 0 {
		t.Fatal("the capture produced nothing")
	}
	noMemory := counter(discarded[ocdaemon.ReasonNoMemory])
	var stalled []net.Conn
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()
	// Each holds a carry of about 32KiB: 40 of them are more than the budget.
	for range 40 {
		c := h.dial()
		stalled = append(stalled, c)
		write(t, c, partial, 0)
	}
	testkit.WaitFor(t, "the partial messages to fill the unauthenticated budget", func() bool {
		return counter(discarded[ocdaemon.ReasonNoMemory]) > noMemory || lim.BytesFor(admission.IntakeUDS) >= open
	})
	if got := lim.BytesFor(admission.IntakeUDS); got > open {
		t.Fatalf("UDS partial messages hold %d bytes, budget %d", got, open)
	}
	// The authenticated intakes' budget is untouched.
	if !lim.TryAcquireBytes(admission.IntakeGRPC, shared) {
		t.Fatalf("gRPC and OTLP/HTTP could not take their whole budget while UDS clients held %d bytes", lim.BytesFor(admission.IntakeUDS))
	}
	lim.ReleaseBytes(admission.IntakeGRPC, shared)

	// A well-behaved client's messages arrive whole and need no carry: all are served.
	for range 5 {
		h.replay(capture, 0)
	}
	got := h.rec.Received()[len(baseline):]
	if len(got) != 5*len(baseline) {
		t.Fatalf("5 replays of the capture became %d payloads, want %d", len(got), 5*len(baseline))
	}
	for i, p := range got {
		if want := baseline[i%len(baseline)]; p.Signal != want.Signal || p.Items != want.Items || !bytes.Equal(p.Body, want.Body) {
			t.Fatalf("payload %d of the well-behaved client differs from what the capture gave before the stall", i)
		}
	}
	for _, c := range stalled {
		c.Close()
	}
	stalled = nil
	testkit.WaitFor(t, "the carries to be given back", func() bool { return lim.Bytes() == 0 })
}
