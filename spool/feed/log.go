package feed

import (
	"errors"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/spool"
)

// Log is a spool.Spool as admission's fastpath.Log.
type Log struct{ Spool *spool.Spool }

var _ fastpath.Log = Log{}

// Append implements fastpath.Log, mapping the spool's errors onto admission's. A tenant is
// kept as the record's meta (its Record), for the feeders to read back. Safe for concurrent
// use.
func (l Log) Append(sig fastpath.Signal, t *fastpath.Tenant, items int, payload []byte) error {
	var meta []byte
	if t != nil {
		meta = t.Record()
	}
	_, err := l.Spool.AppendMeta(uint8(sig), uint32(items), meta, payload)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, spool.ErrFull):
		return fastpath.ErrLogFull
	case errors.Is(err, spool.ErrTooLarge):
		return fastpath.ErrTooLarge
	case errors.Is(err, spool.ErrClosed):
		return fastpath.ErrClosed
	}
	return fastpath.ErrLogIO // counted by the spool with its cause
}
