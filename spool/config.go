package spool

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// SyncMode says when an Append is durable enough to return.
type SyncMode uint8

const (
	// SyncInterval returns after write(2) and syncs every SyncInterval: a process crash loses
	// nothing, a power loss at most the last interval.
	SyncInterval SyncMode = iota
	// SyncAlways returns after fdatasync covered the record; concurrent appends share one.
	SyncAlways
	// SyncNone returns after write(2) and leaves syncing to the kernel: a process crash loses
	// nothing, a power loss whatever the kernel had not written back.
	SyncNone
)

// String returns the flag spelling of the mode.
func (m SyncMode) String() string {
	switch m {
	case SyncInterval:
		return "interval"
	case SyncAlways:
		return "always"
	case SyncNone:
		return "none"
	}
	return "unknown"
}

// ParseSyncMode parses the flag spelling of a SyncMode.
func ParseSyncMode(s string) (SyncMode, error) {
	switch s {
	case "interval":
		return SyncInterval, nil
	case "always":
		return SyncAlways, nil
	case "none":
		return SyncNone, nil
	}
	return 0, fmt.Errorf("spool: unknown sync mode %q (want always, interval or none)", s)
}

// FullPolicy says what Append does when the spool holds MaxBytes.
type FullPolicy uint8

const (
	// FullRefuse fails the append with ErrFull: backpressure to the client.
	FullRefuse FullPolicy = iota
	// FullDropOldest deletes the oldest segment(s), counting as dropped, for every
	// destination, exactly the records it will never deliver (see dropOldest).
	FullDropOldest
)

// String returns the flag spelling of the policy.
func (p FullPolicy) String() string {
	switch p {
	case FullRefuse:
		return "refuse"
	case FullDropOldest:
		return "drop-oldest"
	}
	return "unknown"
}

// ParseFullPolicy parses the flag spelling of a FullPolicy.
func ParseFullPolicy(s string) (FullPolicy, error) {
	switch s {
	case "refuse":
		return FullRefuse, nil
	case "drop-oldest":
		return FullDropOldest, nil
	}
	return 0, fmt.Errorf("spool: unknown full policy %q (want refuse or drop-oldest)", s)
}

// Config configures a Spool. Dir empty means no spool; cmd decides that, Open requires a Dir.
type Config struct {
	// Dir holds the segment and cursor files; one spool per directory.
	Dir string
	// Sync is when Append returns (default interval).
	Sync SyncMode
	// SyncInterval is the period of background syncs in SyncInterval mode (default 200ms).
	SyncInterval time.Duration
	// MaxCommitDelay is how long, in SyncAlways mode, a commit may wait for more appends to
	// join it before it syncs (default 0: an fsync in progress is the only gathering window).
	MaxCommitDelay time.Duration
	// SegmentBytes bounds a segment file (default 64 MiB). A record larger than a segment gets
	// a segment of its own.
	SegmentBytes int64
	// MaxBytes bounds the bytes of all segments (default 1 GiB).
	MaxBytes int64
	// Full is what Append does when MaxBytes is reached (default refuse).
	Full FullPolicy
	// CheckpointInterval is how often destination positions are persisted and finished
	// segments deleted (default 1s). A crash replays what was finished since the last one.
	CheckpointInterval time.Duration
	// Meta lets records carry meta (Record.Meta): the tenant of each request, with
	// -intake.headers. Segments are then written in a version that otlpgate releases without
	// meta set aside rather than read. Segments of either version are read either way.
	Meta bool
	// Encoded lets records be compressed (Record.Encoding): requests that arrived gzip- or
	// zstd-compressed, kept as they arrived for destinations that send them so. Once a process
	// appended one, it writes segments in a version that otlpgate releases without compressed
	// records set aside rather than read; a spool that never gets one writes as before.
	Encoded bool
	// TailBytes is the memory kept of the newest records, so that destinations that keep up
	// copy them from memory rather than read them back from the file (default 1 MiB; 0: always
	// read the file).
	TailBytes int64
	// RemovedHold is how long a destination removed while the spool runs (Reader.Away) keeps
	// the records it still owes (default 1h); past it they are dropped, counted under
	// reason "removed" and logged, and its hold is released. A removed destination that owes
	// nothing is released at the next checkpoint. 0: released at the next checkpoint whatever
	// it owes.
	RemovedHold time.Duration
	// RemovedHoldBytes bounds what a removed destination holds: the bytes of the segments
	// from its position to the end of the log. Past it, it is released as past RemovedHold.
	// 0 (the default): half of MaxBytes, so that a removed destination never fills the spool.
	RemovedHoldBytes int64
	// Logger receives what the spool drops on its own (a removed destination released with
	// records it owed, at Open or while it runs); nil: slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the defaults, with Dir empty.
func DefaultConfig() Config {
	return Config{
		Sync:               SyncInterval,
		SyncInterval:       200 * time.Millisecond,
		SegmentBytes:       64 << 20,
		MaxBytes:           1 << 30,
		Full:               FullRefuse,
		CheckpointInterval: time.Second,
		TailBytes:          1 << 20,
		RemovedHold:        time.Hour,
	}
}

// maxSegmentBytes keeps a record's offset within the low 32 bits of a Pos.
const maxSegmentBytes = 1 << 30

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("spool: dir is empty")
	case c.Sync > SyncNone:
		return fmt.Errorf("spool: unknown sync mode %d", c.Sync)
	case c.Sync == SyncInterval && c.SyncInterval <= 0:
		return fmt.Errorf("spool: sync interval %v must be positive", c.SyncInterval)
	case c.MaxCommitDelay < 0:
		return fmt.Errorf("spool: max commit delay %v is negative", c.MaxCommitDelay)
	case c.SegmentBytes < 1<<10 || c.SegmentBytes > maxSegmentBytes:
		return fmt.Errorf("spool: segment bytes %d (-spool.segment-bytes) outside [1KiB, 1GiB]", c.SegmentBytes)
	case c.MaxBytes < 2*c.SegmentBytes:
		return fmt.Errorf("spool: max bytes %d (-spool.max-bytes) below two segments of %d (-spool.segment-bytes)", c.MaxBytes, c.SegmentBytes)
	case c.Full > FullDropOldest:
		return fmt.Errorf("spool: unknown full policy %d", c.Full)
	case c.CheckpointInterval <= 0:
		return fmt.Errorf("spool: checkpoint interval %v must be positive", c.CheckpointInterval)
	case c.TailBytes < 0 || c.TailBytes > 1<<30:
		return fmt.Errorf("spool: tail bytes %d outside [0, 1GiB]", c.TailBytes)
	case c.RemovedHold < 0:
		return fmt.Errorf("spool: removed hold %v is negative", c.RemovedHold)
	case c.RemovedHoldBytes < 0:
		return fmt.Errorf("spool: removed hold bytes %d is negative", c.RemovedHoldBytes)
	}
	return nil
}

// removedHoldBytes is RemovedHoldBytes with its default applied.
func (c Config) removedHoldBytes() int64 {
	if c.RemovedHoldBytes > 0 {
		return c.RemovedHoldBytes
	}
	return c.MaxBytes / 2
}

func (c Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}
