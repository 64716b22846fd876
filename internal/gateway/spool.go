package gateway

import (
	"log/slog"

	"github.com/otlpgate/otlpgate/spool"
	"github.com/otlpgate/otlpgate/spool/feed"
)

// openSpool opens the spool for the destinations named, keyed by their names (a destination no
// longer listed releases its hold, a new one starts at the tail). Each member then gets a feeder
// (newFeeder).
func openSpool(cfg Config, names []string, log *slog.Logger) (*spool.Spool, error) {
	fs := cfg.SpoolFS
	if fs == nil {
		fs = spool.OSFS{GroupReadable: cfg.SpoolGroupReadable}
	}
	s, err := spool.Open(cfg.Spool, fs, names)
	if err != nil {
		return nil, err
	}
	log.Info("spool open", "dir", cfg.Spool.Dir, "sync", cfg.Spool.Sync.String(), "max_bytes", cfg.Spool.MaxBytes,
		"full", cfg.Spool.Full.String(), "destinations", names)
	return s, nil
}

// feedConfig is the configuration of the feeder of destination i of n, whose own queue holds
// queue bytes (0: no bound of its own). The feeders share -queue.max-bytes: each may hand its
// destination its share, less one batch (a feeder may go past its share by one), and no more
// than the destination's own queue.
func feedConfig(cfg Config, queue int64, i, n int) feed.Config {
	return feed.Config{
		MaxBytes:      feedShare(cfg, queue, n),
		BatchMaxBytes: cfg.Pipeline.BatchMaxBytes,
		BatchMaxItems: cfg.Pipeline.BatchMaxItems,
		BatchMaxAge:   cfg.Pipeline.BatchMaxAge,
		Tenants:       cfg.Pipeline.Tenants,
		Dest:          i,
		Router:        cfg.Pipeline.Router,
	}
}

// feedShare is feedConfig's MaxBytes.
func feedShare(cfg Config, queue int64, n int) int64 {
	limit := cfg.Pipeline.QueueMaxBytes / int64(n)
	if queue > 0 {
		limit = min(limit, queue)
	}
	return max(limit-int64(cfg.Pipeline.BatchMaxBytes), int64(cfg.Pipeline.BatchMaxBytes))
}

// newFeeder gives m, destination i of n, a feeder from its reader r.
func (g *Gateway) newFeeder(m *member, r *spool.Reader, i, n int) error {
	f, err := feed.New(feedConfig(g.cfg, m.queue, i, n), r, m.dest, g.log)
	if err != nil {
		return err
	}
	m.feeder, m.reader = f, r
	return nil
}
