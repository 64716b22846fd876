package gateway

import (
	"log/slog"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/spool"
	"github.com/otlpgate/otlpgate/spool/feed"
)

// spooled is the spool with the feeders of the destinations.
type spooled struct {
	s       *spool.Spool
	feeders []*feed.Feeder
}

// openSpool opens the spool for dests, keyed by their names (a destination no longer listed
// releases its hold, a new one starts at the tail), and prepares one feeder per destination.
// The feeders share -queue.max-bytes: each may hand its destination its share, less one batch
// (a feeder may go past its share by one), and no more than the destination's own queue.
func openSpool(cfg Config, configs []client.Config, dests []fastpath.Destination, log *slog.Logger) (*spooled, error) {
	names := make([]string, len(dests))
	for i, d := range dests {
		names[i] = d.Name()
	}
	fs := cfg.SpoolFS
	if fs == nil {
		fs = spool.OSFS{GroupReadable: cfg.SpoolGroupReadable}
	}
	s, err := spool.Open(cfg.Spool, fs, names)
	if err != nil {
		return nil, err
	}
	sp := &spooled{s: s}
	share := cfg.Pipeline.QueueMaxBytes / int64(len(dests))
	for i, d := range dests {
		limit := share
		if q := destQueueBytes(cfg, configs, i); q > 0 {
			limit = min(limit, q)
		}
		fc := feed.Config{
			MaxBytes:      max(limit-int64(cfg.Pipeline.BatchMaxBytes), int64(cfg.Pipeline.BatchMaxBytes)),
			BatchMaxBytes: cfg.Pipeline.BatchMaxBytes,
			BatchMaxItems: cfg.Pipeline.BatchMaxItems,
			BatchMaxAge:   cfg.Pipeline.BatchMaxAge,
			Tenants:       cfg.Pipeline.Tenants,
			Dest:          i,
		}
		f, err := feed.New(fc, s.Reader(d.Name()), d, log)
		if err != nil {
			s.Close()
			return nil, err
		}
		sp.feeders = append(sp.feeders, f)
	}
	log.Info("spool open", "dir", cfg.Spool.Dir, "sync", cfg.Spool.Sync.String(), "max_bytes", cfg.Spool.MaxBytes,
		"full", cfg.Spool.Full.String(), "destinations", names)
	return sp, nil
}

// destQueueBytes is the queue bound of destination i of those New builds (configs, then the
// Extra ones, or the file destination alone), 0 when it has none of its own.
func destQueueBytes(cfg Config, configs []client.Config, i int) int64 {
	switch {
	case i < len(configs):
		return configs[i].QueueBytes
	case len(configs)+len(cfg.Extra) == 0:
		return cfg.File.QueueBytes
	}
	return 0
}

func (sp *spooled) start() {
	for _, f := range sp.feeders {
		f.Start()
	}
}

// stopFeeding stops every feeder; call it before the destinations shut down.
func (sp *spooled) stopFeeding() {
	for _, f := range sp.feeders {
		f.Stop()
	}
}

// close persists the destinations' positions and closes the spool, once every destination has
// finished what it held.
func (sp *spooled) close(log *slog.Logger) error {
	err := sp.s.Close()
	if err == nil {
		log.Info("spool closed")
	}
	return err
}
