package gateway

import (
	"fmt"
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
	sc := cfg.Spool
	if sc.Logger == nil {
		sc.Logger = log // what the spool drops on its own (a removed destination's hold ending) is logged
	}
	s, err := spool.Open(sc, fs, names)
	if err != nil {
		return nil, err
	}
	attrs := []any{"dir", cfg.Spool.Dir, "sync", cfg.Spool.Sync.String(), "max_bytes", cfg.Spool.MaxBytes,
		"full", cfg.Spool.Full.String(), "destinations", names}
	if rel := s.ReleasedAtOpen(); len(rel) > 0 {
		// Destinations no longer listed: what each still owed was dropped (the spool logged it
		// too); the start line says so, so that a rename without spool-id is seen at once.
		released := make([]string, len(rel))
		for i, r := range rel {
			released[i] = fmt.Sprintf("%s:%d", r.Destination, r.Records)
			if r.Records < 0 {
				released[i] = r.Destination + ":unknown"
			}
		}
		attrs = append(attrs, "released", released)
	}
	log.Info("spool open", attrs...)
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
