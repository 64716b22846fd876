package uds

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/statusmetrics"
)

// consumeOutcome indexes what became of a payload handed to the data path.
type consumeOutcome uint8

const (
	consumeAccepted consumeOutcome = iota
	consumeFull
	consumeTooLarge
	consumeError
	consumeSpoolFull
	consumeSpoolIO
	consumeIntakeBytes
	consumeUnserved
	numConsumeOutcomes
)

var consumeNames = [numConsumeOutcomes]string{"accepted", "full", "too_large", "error", "spool_full", "spool_io", "intake_bytes", "unserved"}

var (
	itemsVec = statusmetrics.Auto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_uds_items_total",
		Help: "Spans and metric data points the OpenCensus intake handed to the data path, by signal and outcome (accepted, or dropped as full, too_large, error, spool_full: -spool.max-bytes reached, spool_io: the spool could not write, intake_bytes: -intake.unauthenticated.max-bytes had no room for what processing writes, unserved: no destination takes the signal, -dest signals=).",
	}, []string{"signal", "outcome"})
	// itemsCounters[signal][outcome], resolved once: no label formatting on the hot path.
	itemsCounters = func() (c [2][numConsumeOutcomes]prometheus.Counter) {
		for i, sig := range []fastpath.Signal{fastpath.Traces, fastpath.Metrics} {
			for o := range c[i] {
				c[i][o] = itemsVec.WithLabelValues(sig.String(), consumeNames[o])
			}
		}
		return c
	}()
)

// countConsume counts the items of one Consume call by its result.
func (s *Server) countConsume(sig fastpath.Signal, err error, items int) {
	o := consumeAccepted
	switch {
	case err == nil:
	case errors.Is(err, pipeline.ErrSpoolFull):
		o = consumeSpoolFull
	case errors.Is(err, pipeline.ErrSpoolIO):
		o = consumeSpoolIO
	case errors.Is(err, pipeline.ErrBudget):
		o = consumeIntakeBytes
	case errors.Is(err, pipeline.ErrFull):
		o = consumeFull
	case errors.Is(err, pipeline.ErrTooLarge):
		o = consumeTooLarge
	case errors.Is(err, pipeline.ErrUnserved):
		// The configuration has no destination for the signal: counted under the reason
		// the pipeline counts it by, apart from failures.
		o = consumeUnserved
	default:
		o = consumeError
	}
	i := 0
	if sig == fastpath.Metrics {
		i = 1
	}
	itemsCounters[i][o].Add(float64(items))
}

// udsBudget lends the intake limiter to a connection's Splitter for its carry buffer.
type udsBudget struct{ lim *admission.Limiter }

func (b udsBudget) TryReserve(n int) bool {
	return b.lim.TryAcquireBytes(admission.IntakeUDS, int64(n))
}

func (b udsBudget) Unreserve(n int) { b.lim.ReleaseBytes(admission.IntakeUDS, int64(n)) }
