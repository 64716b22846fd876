// Package spool owns the optional on-disk segment log behind acknowledgement: records appended
// with group commit, read back per destination, deleted segment by segment once every
// destination finished them.
//
// # Log
//
// Records (signal, item count, payload) are framed with their length and a CRC32C and appended
// to segment files of at most Config.SegmentBytes, named by sequence number and opened by a
// header with magic and version (record.go). A Pos (segment, offset) names a record and orders
// all of them. Nothing is ever rewritten: a segment is removed whole when every destination's
// position is past it, or by -spool.full=drop-oldest, which counts what it drops.
//
// Sequence numbers never go back: Open numbers the next segment above every segment file and
// every cursor in the directory, so that a new record always lands above every destination's
// position, whatever a life of starts and stops left there (cursors only after an idle start
// deleted the last finished segment, segments only, both, neither).
//
// A record may carry meta after its payload (Record.Meta; Config.Meta): the tenant of the
// request, with -intake.headers, handed back to the reader in Entry.Meta. A spool that takes
// meta writes segments of version 2, which earlier otlpgate releases set aside as written by a
// newer one rather than skip its records as corrupt; version 1 segments are read as before.
//
// # Durability
//
// SyncAlways: Append returns after an fdatasync covered its record. Appends that arrive while a
// sync runs wait together for the next one (group commit), so syncs per second stay near
// 1/latency whatever the append rate. SyncInterval and SyncNone return after write(2); the
// former syncs every SyncInterval. Segment creation syncs the file and the directory (except in
// SyncNone), rotation syncs the sealed segment (waiting for a sync in flight on it). A failed
// write is cut off again.
//
// A failed fdatasync is never followed by a trusted sync of the same segment: the kernel may
// have dropped the dirty pages and would report the next sync a success. The segment is sealed
// and never synced again (commit.go, syncFailedLocked). In SyncAlways nothing past its last good
// sync was acknowledged: it is cut back there and the appends it held fail. In SyncInterval
// those records were acknowledged after write(2), and rewriting them would need them all in
// memory, which the tail does not promise: the spool fails instead, loudly (Failed, Err wrapping
// ErrSyncFailed, every later Append refused), and cmd/otlpgate stops with exit status 3;
// readers still deliver what the page cache holds, each record checked by its CRC.
//
// Open syncs every segment it inherits (except in SyncNone), so that what a killed process
// acknowledged and had not synced is durable before this one appends; its directory sync, in
// every mode, does the same for the cursors that process renamed into place and the segments
// it deleted, whose numbers this process may use again. The last segment is written again
// from what it reads before its sync: a sync of it may have failed in the killed process, and
// the kernel reports that once and would take a plain sync of it now as a success.
//
// # Readers
//
// Open takes the destination names. Each gets a Reader that reads records in order into the
// caller's pooled buffer (only the record being read is in memory, whatever the backlog), and
// is told which records were finished, in any order. Its durable position is its lowest
// unfinished record. Checkpoint first deletes the segments every position in memory has passed
// (no disk space needed, so a full disk recovers as the destinations drain; why that is safe
// across crashes is argued in cursor.go), then persists the positions atomically (temporary
// file, sync, rename, directory sync). A restart replays from the persisted positions: at least
// once, the replayed records counted as possible duplicates. A destination no longer listed
// loses its cursor and its hold, what it still owed counted as dropped (reason released),
// logged and reported by ReleasedAtOpen; a new one starts at the tail, and appends wait until its first
// cursor is durable (Open does not fail on a full disk: it comes up and drains). A reader closes
// a segment's file when it moves past it, so that deleting it gives the space back.
//
// While the spool runs, AddReader adds a destination at the tail, its cursor made durable
// first. A destination that goes away (Away) keeps its hold and its records until it comes
// back (AddReader, Back), within bounds (removed.go): owing nothing, it is released at the
// next checkpoint; owing records, past Config.RemovedHold or Config.RemovedHoldBytes, and what
// it still owed is counted as dropped (reason removed) and logged. Its cursor, written while
// it is away, says where it went, so that a start that releases it counts only what was its
// own. Once back it passes over what was appended while it was away. Rewind hands out again what a stopped
// destination left unfinished, passing over what it finished out of order.
//
// # Drop-oldest
//
// Dropping a segment counts, per destination, exactly the records it will never be handed: the
// ones it had not read (counted at the drop, under every reader's lock so that none is halfway
// through reading one) and the ones it read but had not finished when the spool closes (Close;
// a restart cannot read them). Records read and then finished are delivered from memory, and
// records given up are counted by Drop under their own reason. A kill -9 while a destination
// holds records of a dropped segment loses those uncounted.
//
// # Age
//
// otlpgate_spool_oldest_unfinished_age_seconds says how far behind the slowest destination is.
// Records carry no time on disk (the segment format is unchanged): an index in memory notes,
// once a second, the position of the record being appended (age.go), so the age of any record
// is known to within a second; records recovered at Open count from Open.
//
// # Recovery
//
// Open reads the headers of all segments and the records of the last one only, so start-up time
// does not grow with the backlog. A torn tail is truncated at the last whole record; bad bytes
// between valid records are skipped by scanning for the next valid frame and counted (by
// Open for the last segment, by the first reader to cross them elsewhere); empty segments are
// removed; segments with a bad or newer header are renamed aside with suffix .unreadable and
// counted. Open never panics on what it reads.
//
// # Wiring
//
// internal/gateway opens the spool with the -dest names and puts feed.Admission in front of the
// intakes instead of a pipeline.Pipeline: a request is appended (stripped, as a batch carries
// it) before it is acknowledged, and nothing else is kept in memory. Package spool/feed runs one Feeder per destination that
// reads that destination's Reader and hands it batches within its share of -queue.max-bytes;
// delivered batches Finish their records, batches given up for a counted reason Drop them, and
// at shutdown the feeders stop first, the destinations drain, then Close persists positions.
//
// # File system seam
//
// All I/O goes through FS: OSFS in production (files 0600 in a directory 0700, or 0640 and 0750
// with GroupReadable), CrashFS in tests, which drops unsynced data and directory changes at a
// simulated crash, can crash after any counted operation, has an optional capacity (ENOSPC,
// space given back by deletes), and loses a file's unsynced writes at a failed sync as Linux
// does.
//
// # Rules
//
// It imports pool/, internal/statusmetrics (the gauges the status page reads) and the
// Prometheus client, nothing else of otlpgate. Open starts two
// goroutines at most: the committer (SyncAlways) and the housekeeper (interval syncs and
// checkpoints every CheckpointInterval, and at once when an append finds the spool or the disk
// full); Close stops them. Append, Checkpoint, Reader and Close are safe for concurrent use; a
// Reader's Next belongs to one goroutine at a time, its Finish and Drop to any. Lock order: a
// Reader's mu before the Spool's mu.
package spool
