package fastpath

import (
	"errors"
	"fmt"

	"github.com/otlpgate/otlpgate/pool"
)

// Log is a durable log that admission appends every request to before acknowledging it: the
// spool (-spool.dir). With a Log the pipeline neither batches nor fans out: whatever feeds the
// destinations reads the log back (see NewLogged).
type Log interface {
	// Append makes payload (a run of v1 resource entries, items spans, data points or log
	// records) as durable as the log promises and returns nil, or fails with ErrLogFull (no
	// room), ErrLogIO (the disk refused; a later Append may succeed), ErrTooLarge or
	// ErrClosed. payload is only read during the call. Safe for concurrent use.
	Append(sig Signal, items int, payload []byte) error
}

// Errors a Log returns when it cannot take a request now. Both are ErrFull to the intakes
// (errors.Is), which answer with backpressure; the pipeline counts each under its own reason.
var (
	ErrLogFull = fmt.Errorf("%w: the spool is full (-spool.max-bytes)", ErrFull)
	ErrLogIO   = fmt.Errorf("%w: the spool could not write", ErrFull)
)

// NewLogged returns a pipeline that admits every request by appending its stripped v1 form
// (AppendEntries) to log, and answers only once Append returned. It holds nothing in memory
// after admission: the caller delivers from the log, and QueueMaxBytes bounds only what a
// single request may be. -ack=upstream has no meaning here and is refused. Close stops it.
func NewLogged(cfg Config, log Log) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Ack == AckUpstream {
		return nil, errors.New("fastpath: -ack=upstream cannot be combined with a spool: requests are acknowledged once spooled")
	}
	if log == nil {
		return nil, errors.New("fastpath: no log")
	}
	p := &Pipeline{cfg: cfg, log: log, m: newPipelineMetrics(), stop: make(chan struct{})}
	p.wg.Add(1)
	go func() { // nothing to seal: the flusher only waits for Close
		defer p.wg.Done()
		<-p.stop
	}()
	return p, nil
}

// appendLog is admission with a Log: strip into a pooled buffer, append, answer.
// pst is what processing stripped before (Config.Processor).
func (p *Pipeline) appendLog(sig Signal, req []byte, items int, layout Layout, pst Stripped) error {
	buf := pool.GetBytes(len(req))
	var st Stripped
	var err error
	*buf, _, st, err = AppendEntries((*buf)[:0], req, layout)
	if err != nil {
		pool.PutBytes(buf)
		return err
	}
	if len(*buf) > 0 {
		err = p.log.Append(sig, items, *buf)
	}
	pool.PutBytes(buf)
	switch {
	case err == nil:
	case errors.Is(err, ErrLogFull):
		p.m.refused(sig, reasonSpoolFull, items)
		return err
	case errors.Is(err, ErrLogIO):
		p.m.refused(sig, reasonSpoolIO, items)
		return err
	case errors.Is(err, ErrTooLarge):
		p.m.refused(sig, reasonTooLarge, items)
		return err
	default:
		return err
	}
	p.m.admitted(sig, items, len(req))
	if st.Fields += pst.Fields; st.Fields > 0 {
		st.Bytes += pst.Bytes
		p.m.stripped(sig, st)
	}
	return nil
}
