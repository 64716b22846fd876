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
// persisted position is past it, or by -spool.full=drop-oldest, which counts what it drops.
//
// # Durability
//
// SyncAlways: Append returns after an fdatasync covered its record. Appends that arrive while a
// sync runs wait together for the next one (group commit), so syncs per second stay near
// 1/latency whatever the append rate. SyncInterval and SyncNone return after write(2); the
// former syncs every SyncInterval. Segment creation syncs the file and the directory (except in
// SyncNone), rotation syncs the sealed segment. A failed write is cut off again; a failed sync
// seals the segment, because after a failed fdatasync nothing in it can be trusted to reach disk.
//
// # Readers
//
// Open takes the destination names. Each gets a Reader that reads records in order into the
// caller's pooled buffer (only the record being read is in memory, whatever the backlog), and
// is told which records were finished, in any order. Its durable position is its lowest
// unfinished record; Checkpoint persists positions atomically (temporary file, sync, rename,
// directory sync) and deletes finished segments. A restart replays from the durable positions:
// at least once, the replayed records counted as possible duplicates. A destination no longer
// listed loses its cursor and its hold; a new one starts at the tail.
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
// cmd/otlpgate opens the spool with the -dest names and gives admission fastpath.NewLogged with
// feed.Log: a request is appended (stripped, as a batch carries it) before it is acknowledged,
// and nothing else is kept in memory. Package spool/feed runs one Feeder per destination that
// reads that destination's Reader and hands it batches within its share of -queue.max-bytes;
// delivered batches Finish their records, batches given up for a counted reason Drop them, and
// at shutdown the feeders stop first, the destinations drain, then Close persists positions.
//
// # File system seam
//
// All I/O goes through FS: OSFS in production, CrashFS in tests, which drops unsynced data and
// directory changes at a simulated crash and can crash after any counted operation.
//
// # Rules
//
// It imports pool/ and the Prometheus client, nothing else of otlpgate. Open starts two
// goroutines at most: the committer (SyncAlways) and the housekeeper (interval syncs and
// checkpoints every CheckpointInterval, and at once when an append finds the spool full); Close
// stops them. Append, Checkpoint, Reader and Close are safe for concurrent use; a Reader's Next
// belongs to one goroutine at a time, its Finish and Drop to any.
package spool
