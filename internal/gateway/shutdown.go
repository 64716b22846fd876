package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/otlpgate/otlpgate/client"
)

// LossError reports that data acknowledged to clients was lost: at shutdown, or because the
// spool failed. Every loss was logged where it was found; cmd/otlpgate exits with status 3.
type LossError struct{ Errs []error }

func (e *LossError) Error() string { return errors.Join(e.Errs...).Error() }

// Unwrap returns the losses, so that errors.Is finds each cause.
func (e *LossError) Unwrap() []error { return e.Errs }

// Shutdown stops the gateway in phases, within ctx and Config.ShutdownTimeout:
//
//  1. /readyz fails at once, so that load balancers stop routing here.
//  2. Every intake stops accepting, in parallel, within half the time left: idle streams end
//     at once, streams answer what they accepted (with -ack=upstream, once delivered), unary
//     calls finish, and the UDS exporter's final flush and Kafka's last pushes are admitted.
//     Open batches are sealed meanwhile, so that what waits for its upstream answer is sent.
//  3. Open batches are sealed for the last time and admission ends (pipeline Close).
//  4. The destinations drain in parallel, until the deadline.
//
// It returns a *LossError when something acknowledged was not delivered, or when the spool
// failed (Failed); each loss is logged here, once. Calls after the first return the first's
// result.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.shutOnce.Do(func() { g.shutErr = g.shutdown(ctx) })
	return g.shutErr
}

func (g *Gateway) shutdown(ctx context.Context) error {
	timeout := g.cfg.ShutdownTimeout
	g.log.Info("shutting down", "timeout", timeout)
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The profiling listener stays up until the end, so that a shutdown can be profiled too.
	defer g.prof.Shutdown(context.Background())

	// What destinations return to the spool from here on stays there for the next start; what
	// they returned before (a reload replaced or removed them) their successors read again.
	returnedBefore := g.tally.Returned()
	g.adm.Drain()
	// No reload from here on: the destinations that drain are the last ones.
	close(g.stopPoll)
	g.pollers.Wait()
	g.dmu.Lock()
	g.dmu.closed = true
	members := g.dmu.members
	g.dmu.Unlock()

	deadline, _ := ctx.Deadline()
	ictx, icancel := context.WithTimeout(ctx, time.Until(deadline)/2)
	defer icancel()
	intakesDone := make(chan struct{})
	go sealWhileDraining(g.in, intakesDone)
	intakes := []intake{g.gs, g.hs, g.ks, g.us, g.kc}
	ierrs := make(chan error, len(intakes))
	for _, in := range intakes {
		go func() { ierrs <- in.Shutdown(ictx) }()
	}
	for range intakes {
		if err := <-ierrs; err != nil {
			// Not a loss: what an intake did not finish was not acknowledged, and the client
			// (or the PHP process, or the Kafka client) sends it again or counted it.
			g.log.Warn("intake did not stop cleanly", "err", err)
		}
	}
	close(intakesDone)
	g.log.Debug("intakes stopped", "took", time.Since(began))

	g.in.Close()
	spooled := g.spool != nil
	// Nothing more is read from the spool; what the destinations hold is finished as usual.
	for _, m := range members {
		if m.feeder != nil {
			m.feeder.Stop()
		}
	}
	close(g.stopWatch)
	if g.watching {
		<-g.watchDone
	}

	// Destinations drain in parallel: one slow upstream must not eat the others' time. Those a
	// reload removed go on draining meanwhile, until the same deadline.
	stopRetiring := context.AfterFunc(ctx, g.retireCancel)
	defer stopRetiring()
	defer g.retireCancel()
	var outs []outlet
	for _, m := range members {
		if m.out != nil {
			outs = append(outs, m.out)
		}
	}
	errc := make(chan error, len(outs))
	for _, d := range outs {
		go func() { errc <- d.Shutdown(ctx) }()
	}
	var lost LossError
	for range outs {
		if err := <-errc; err != nil {
			if spooled {
				// What a destination gives up at shutdown is still in the spool (it is counted as
				// returned, and is no error); what else it reports was counted and is in the stop
				// line.
				g.log.Warn("a destination did not stop cleanly", "err", err)
				continue
			}
			g.log.Error("data lost at shutdown", "err", err)
			lost.Errs = append(lost.Errs, err)
		}
	}
	g.retiring.Wait()
	g.lostMu.Lock()
	lost.Errs = append(lost.Errs, g.reloadLost...) // each logged when it happened
	g.lostMu.Unlock()
	if spooled {
		if err := g.spool.Close(); err != nil {
			g.log.Error("spool not closed cleanly: the next start replays more than needed", "err", err)
		} else {
			g.log.Info("spool closed")
		}
	}
	if q := g.in.QueuedBytes(); q > 0 && len(lost.Errs) == 0 {
		// Every destination finishes every batch it took, lost or not; bytes left over were
		// never accounted for by one.
		g.log.Error("data lost at shutdown", "err", fmt.Sprintf("%d admitted bytes were not finished by every destination", q))
		lost.Errs = append(lost.Errs, fmt.Errorf("%d bytes unaccounted for", q))
	}
	g.adm.Shutdown(ctx)
	rep := g.report(returnedBefore)
	g.log.Info("stopped", "took", time.Since(began).Round(time.Millisecond),
		"lost", len(lost.Errs) > 0 || rep.lost > 0 || g.failure != nil,
		"delivered_items", rep.delivered, "lost_items", rep.lost, "unanswered_items", rep.unanswered,
		"spooled_items", rep.spooled, "dropped", rep.dropped)
	if g.failure != nil {
		// Acknowledged records may be gone (the spool failed): a loss, whatever the
		// destinations did.
		lost.Errs = append(lost.Errs, g.failure)
	}
	if len(lost.Errs) > 0 {
		return &lost
	}
	return nil
}

// stopReport is what the stop line says the upstream destinations did with what they were
// handed since the start, in items, those a reload removed included (client.Tally). Every
// dropped item is in exactly one of lost and unanswered; spooled is not dropped.
type stopReport struct {
	delivered int64 // acknowledged by an upstream
	// lost is what no upstream has: refused for good, given up on while running (each
	// logged when it happened), or at the stop never sent, or refused or unanswered and
	// waiting to be sent again (without a spool).
	lost int64
	// unanswered was sent and not answered when the stop gave up on it (shutdown_pending):
	// the upstream may have taken it, or not. Counted as lost by the exit status, but apart,
	// so that a slow upstream's backlog is not reported as never sent.
	unanswered int64
	// spooled is what the destinations gave back to the spool at the stop (client.Tally
	// Returned since the stop began): never dropped, it stays on disk and is sent after the
	// next start. What they gave back at a reload before is not in it: their replacements
	// read it again.
	spooled int64
	dropped string // every dropped item by reason: "rejected=100 shutdown_queued=3"
}

// report reads the gateway's tally once every destination has stopped.
// returnedBefore is what the tally counted as returned to the spool when the stop began.
func (g *Gateway) report(returnedBefore int64) stopReport {
	rep := stopReport{delivered: g.tally.Delivered(), spooled: g.tally.Returned() - returnedBefore}
	var by []string
	for _, r := range client.DropReasons() {
		n := g.tally.Dropped(r)
		if n == 0 {
			continue
		}
		by = append(by, fmt.Sprintf("%s=%d", r, n))
		switch {
		case r.Unanswered():
			rep.unanswered += n
		default:
			rep.lost += n
		}
	}
	rep.dropped = strings.Join(by, " ")
	return rep
}

// sealEvery is how often open batches are sealed while the intakes stop: requests that wait for
// their upstream answer (-ack=upstream) must not wait for -batch.max-age as well.
const sealEvery = 5 * time.Millisecond

// sealWhileDraining seals the open batches every sealEvery until done is closed.
func sealWhileDraining(p admitter, done <-chan struct{}) {
	t := time.NewTicker(sealEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			p.Flush()
		}
	}
}
