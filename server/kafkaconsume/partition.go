package kafkaconsume

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/otlpgate/otlpgate/fastpath/pipeline"
)

// partition is what the consumer knows of one partition assigned to it. Guarded by the
// consumer's mu. Invariants:
//
//  1. pending[head:] are the records admitted and not yet acknowledged, in offset order; a
//     record with nothing to wait for is only a ticket when records before it are pending.
//  2. acked is the offset to commit: every record below it was delivered, made durable or
//     skipped. It only grows, but for a rewind, which sets it to the first record to read
//     again, never below committed.
//  3. committed is the offset last committed to the group; acked >= committed.
//  4. rewind >= 0 while the partition waits to be read again from rewind: records the poll
//     loop meets meanwhile are neither admitted nor tracked.
//  5. read is the offset after the last record the poll loop took (or a rewind's offset);
//     watchRead and movedAt are read and the time at the watch that last saw it move, and
//     stalled says whether the partition counts in otlpgate_kafka_consume_stalled_partitions
//     (watch.go).
//  6. fetched is false from the assignment until the poll loop takes the partition's first
//     record: nothing read yet. Meanwhile read, acked and committed are the offset the client
//     starts from (the group's committed offset, or the log start offset without one), or -1
//     until the watch learned it; once fetched they follow the records as above.
type partition struct {
	topic string
	id    int32

	pending   []ticket
	head      int
	acked     int64
	epoch     int32 // leader epoch of the record before acked, for the commit
	committed int64
	hwm       int64 // the brokers' high watermark at the last fetch or listing
	rewind    int64

	read      int64
	watchRead int64
	movedAt   time.Time
	listedAt  time.Time // when the brokers last answered its end offset
	stalled   bool
	fetched   bool

	lag prometheus.Gauge
}

// ticket is one admitted record that waits for its batch.
type ticket struct {
	offset int64
	epoch  int32
	b      *pipeline.Batch // nil: nothing to wait for (skipped, durable, dropped by processing)
}

func newPartition(topic string, id int32, first int64, now time.Time) *partition {
	return &partition{topic: topic, id: id, acked: first, committed: first, rewind: -1, epoch: -1,
		read: first, watchRead: first, movedAt: now, fetched: true}
}

// newAssignedPartition is a partition assigned at now and not fetched yet, whose start the
// watch has still to learn (startLocked).
func newAssignedPartition(topic string, id int32, now time.Time) *partition {
	return &partition{topic: topic, id: id, acked: -1, committed: -1, rewind: -1, epoch: -1,
		read: -1, watchRead: -1, movedAt: now}
}

// startLocked sets the offset a partition not fetched yet starts from, once known: its read
// position until the first record, which the watch compares with the end offset.
func (p *partition) startLocked(start int64) {
	if p.fetched || p.read >= 0 {
		return
	}
	p.acked, p.committed, p.read, p.watchRead = start, start, start, start
}

// fetchedLocked takes the first record a partition made at its assignment fetched, at first.
func (p *partition) fetchedLocked(first int64) {
	if p.fetched {
		return
	}
	p.fetched = true
	p.acked, p.committed, p.read = first, first, first
}

// trackLocked follows the record at offset, admitted into b (nil: nothing to wait for).
func (p *partition) trackLocked(offset int64, epoch int32, b *pipeline.Batch) {
	p.read = offset + 1
	if p.rewind >= 0 {
		// A rewind to an earlier record came while this one was admitted: it is read again.
		if b != nil {
			b.Unref()
		}
		return
	}
	if b == nil && p.head == len(p.pending) {
		p.acked, p.epoch = offset+1, epoch
		return
	}
	if p.head == len(p.pending) {
		clear(p.pending)
		p.pending, p.head = p.pending[:0], 0
	} else if p.head > 1024 && p.head > len(p.pending)/2 {
		n := copy(p.pending, p.pending[p.head:])
		clear(p.pending[n:])
		p.pending, p.head = p.pending[:n], 0
	}
	p.pending = append(p.pending, ticket{offset: offset, epoch: epoch, b: b})
}

// advanceLocked moves acked past the records whose batches ended, in order, and reports
// whether records are still pending. A batch that ended undelivered, and not refused for
// good, sets rewind to its record: the records from there on are read again, and what is
// pending after it is let go (its outcome no longer matters).
func (p *partition) advanceLocked() (busy bool) {
	for p.head < len(p.pending) {
		t := p.pending[p.head]
		if t.b != nil {
			done, delivered, rejected := t.b.Outcome()
			if !done {
				return true
			}
			t.b.Unref()
			p.pending[p.head].b = nil
			if !delivered && !rejected {
				p.head++
				p.releaseLocked()
				p.rewind = t.offset
				rewinds.Inc()
				return false
			}
			if !delivered {
				undeliverable.Inc()
			}
		}
		p.acked, p.epoch = t.offset+1, t.epoch
		p.head++
	}
	return false
}

// releaseLocked lets go of every pending record's batch.
func (p *partition) releaseLocked() {
	for i := p.head; i < len(p.pending); i++ {
		if b := p.pending[i].b; b != nil {
			b.Unref()
		}
	}
	clear(p.pending)
	p.pending, p.head = p.pending[:0], 0
}

// lagLocked is how many records the partition holds past its committed offset.
func (p *partition) lagLocked() int64 {
	if p.committed < 0 || p.hwm <= p.committed { // committed < 0: the start is not known yet
		return 0
	}
	return p.hwm - p.committed
}
