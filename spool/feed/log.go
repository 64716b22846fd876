package feed

import (
	"errors"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/spool"
)

// Log is a spool.Spool as admission's fastpath.Log.
type Log struct{ Spool *spool.Spool }

var _ fastpath.Log = Log{}

// Append implements fastpath.Log, mapping the spool's errors onto admission's. Safe for
// concurrent use.
func (l Log) Append(sig fastpath.Signal, items int, payload []byte) error {
	_, err := l.Spool.Append(uint8(sig), uint32(items), payload)
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
