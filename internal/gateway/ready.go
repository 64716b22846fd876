package gateway

import (
	"errors"
	"fmt"
	"strings"

	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/bytesize"
)

// readyHighWater is the fill, as a fraction of its bound, at which a budget makes /readyz
// fail. Below the bound itself: a load balancer that reads readiness every few seconds must
// move new connections elsewhere before requests are refused here, not after.
const readyHighWater = 0.9

// ready is what /readyz asks besides draining (which the admin server checks itself): that
// otlpgate can accept now. Every intake that should listen does, and no budget a request needs
// is near its bound: the intake limiter (what requests hold while they are received), the
// pipeline's queue (what was admitted and not yet delivered by every destination) and the
// spool. The error names every check that failed, with its figures and its flag, on one line.
// Safe for concurrent use.
func (g *Gateway) ready() error {
	var failed []string
	if g.gs.Addr() == nil && g.cfg.GRPC.Listen != "" {
		failed = append(failed, "grpc intake not listening")
	}
	if g.hs.Addr() == nil && g.cfg.HTTP.Listen != "" {
		failed = append(failed, "http intake not listening")
	}
	check := func(what string, used, limit int64, flag string) {
		if limit > 0 && float64(used) >= readyHighWater*float64(limit) {
			failed = append(failed, fmt.Sprintf("%s: %s of %s in use (%.0f%%, -%s)", what,
				bytesize.Format(used), bytesize.Format(limit), 100*float64(used)/float64(limit), flag))
		}
	}
	if g.cfg.GRPC.Listen != "" || g.cfg.HTTP.Listen != "" {
		check("intake limiter", g.lim.BytesFor(admission.IntakeGRPC), g.lim.MaxBytes(), "intake.max-bytes")
	}
	if g.cfg.Kafka.Listen != "" || g.cfg.UDS.Listen != "" {
		check("unauthenticated intake limiter", g.lim.BytesFor(admission.IntakeKafka), g.lim.MaxBytesFor(admission.IntakeKafka), "intake.unauthenticated.max-bytes")
	}
	if g.spool == nil {
		// With a spool, admission holds nothing in memory: the spool is the queue.
		check("queue", g.in.QueuedBytes(), g.cfg.Pipeline.QueueMaxBytes, "queue.max-bytes")
	} else {
		check("spool", g.spool.Bytes(), g.cfg.Spool.MaxBytes, "spool.max-bytes")
	}
	if len(failed) == 0 {
		return nil
	}
	return errors.New(strings.Join(failed, "; "))
}
