package main

import (
	"log/slog"

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
func openSpool(cfg config, dests []fastpath.Destination, log *slog.Logger) (*spooled, error) {
	names := make([]string, len(dests))
	for i, d := range dests {
		names[i] = d.Name()
	}
	fs := cfg.spoolFS
	if fs == nil {
		fs = spool.OSFS{GroupReadable: cfg.spoolGroupReadable}
	}
	s, err := spool.Open(cfg.spool, fs, names)
	if err != nil {
		return nil, err
	}
	sp := &spooled{s: s}
	share := cfg.pipeline.QueueMaxBytes / int64(len(dests))
	for i, d := range dests {
		limit := share
		if q := destQueueBytes(cfg, i); q > 0 {
			limit = min(limit, q)
		}
		fc := feed.Config{
			MaxBytes:      max(limit-int64(cfg.pipeline.BatchMaxBytes), int64(cfg.pipeline.BatchMaxBytes)),
			BatchMaxBytes: cfg.pipeline.BatchMaxBytes,
			BatchMaxItems: cfg.pipeline.BatchMaxItems,
			BatchMaxAge:   cfg.pipeline.BatchMaxAge,
			Tenants:       cfg.pipeline.Tenants,
			Dest:          i,
		}
		f, err := feed.New(fc, s.Reader(d.Name()), d, log)
		if err != nil {
			s.Close()
			return nil, err
		}
		sp.feeders = append(sp.feeders, f)
	}
	log.Info("spool open", "dir", cfg.spool.Dir, "sync", cfg.spool.Sync.String(), "max_bytes", cfg.spool.MaxBytes,
		"full", cfg.spool.Full.String(), "destinations", names)
	return sp, nil
}

// destQueueBytes is the queue bound of destination i (the file destination when no -dest is
// given).
func destQueueBytes(cfg config, i int) int64 {
	if len(cfg.clients) == 0 {
		return cfg.file.QueueBytes
	}
	return cfg.clients[i].QueueBytes
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
