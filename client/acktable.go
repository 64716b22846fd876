package client

import "sync"

// ackTable holds the requests sent on streams and not yet answered, keyed by request id: the
// AckPending table. The request is the entry: it holds the batch (and so the payload
// reference), the send time, the attempt count and the stream it was sent on.
//
// Ids are sequential per destination, so sharding by id % shards spreads consecutive requests
// over every shard, and one lock per shard lets the senders of every stream insert while the
// receivers remove without meeting on one mutex. Within a shard, ids are kept in an
// open-addressing table with linear probing, addressed by id / shards: the live ids of a shard
// are mostly a run of consecutive values, which land in consecutive slots without colliding.
// Deletion shifts the following entries back instead of leaving tombstones, so a table that
// sees billions of inserts and deletes never degrades nor needs a rehash. Each shard starts small
// and grows by doubling (the only allocation) when more than half full, and never shrinks: its
// size follows the largest number of requests ever pending at once, not the most there could
// be. streams × window × signals bounds that, and may be hundreds of millions; sizing for it up
// front would take GiB of memory for a destination that may never have a thousand pending.
//
// Invariants:
//
//  1. An id is in at most one shard and at most one slot; 0 is never a key (ids start at 1).
//  2. Every key sits in the probe run that starts at its home slot: no empty slot lies between
//     the home slot and the key.
//  3. A request is in the table exactly while a stream owns it for an answer: whoever removes
//     it owns it and must finish it (deliver, retry, re-send or drop).
type ackTable struct {
	shards []ackShard
	shift  uint   // log2(len(shards))
	mask   uint64 // len(shards) - 1
}

type ackShard struct {
	mu struct {
		sync.Mutex
		keys []uint64 // 0 marks an empty slot
		vals []*request
		n    int
	}
	// Shards sit next to each other in one slice; keep each lock on its own cache lines so
	// that goroutines working on neighbouring shards do not invalidate each other's line.
	_ [64]byte
}

const ackShardMinSlots = 64

// newAckTable returns a table with 2^shardBits shards of ackShardMinSlots slots each; they
// grow as requests wait.
func newAckTable(shardBits uint) *ackTable {
	t := &ackTable{shards: make([]ackShard, 1<<shardBits), shift: shardBits, mask: 1<<shardBits - 1}
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.keys = make([]uint64, ackShardMinSlots)
		s.mu.vals = make([]*request, ackShardMinSlots)
	}
	return t
}

func (t *ackTable) shard(id uint64) *ackShard { return &t.shards[id&t.mask] }

// home is the first slot probed for id in a shard with len(keys) == mask+1.
func (t *ackTable) home(id uint64, mask uint64) uint64 { return (id >> t.shift) & mask }

// insert adds r under r.id. Inserting an id that is present is a bug. Safe for concurrent use.
func (t *ackTable) insert(r *request) {
	id := r.id
	if id == 0 {
		panic("BUG: client: request id 0 in the ack table")
	}
	s := t.shard(id)
	s.mu.Lock()
	if (s.mu.n+1)*2 > len(s.mu.keys) {
		t.growLocked(s)
	}
	mask := uint64(len(s.mu.keys) - 1)
	for i := t.home(id, mask); ; i = (i + 1) & mask {
		switch s.mu.keys[i] {
		case 0:
			s.mu.keys[i], s.mu.vals[i] = id, r
			s.mu.n++
			s.mu.Unlock()
			return
		case id:
			s.mu.Unlock()
			panic("BUG: client: request id inserted twice in the ack table")
		}
	}
}

// remove takes the request with id out of the table and returns it, if it is there and was
// sent on owner (any stream when owner is nil): an answer read on one stream must not settle a
// request that was re-sent on another. Safe for concurrent use.
func (t *ackTable) remove(id uint64, owner *stream) *request {
	if id == 0 {
		return nil
	}
	s := t.shard(id)
	s.mu.Lock()
	i, ok := t.findLocked(s, id)
	if !ok || (owner != nil && s.mu.vals[i].stream != owner) {
		s.mu.Unlock()
		return nil
	}
	r := s.mu.vals[i]
	t.deleteLocked(s, i)
	s.mu.Unlock()
	return r
}

// stamp records, for the request id sent on owner, when the transport took it (at) and how long
// owner had stalled by then, if that request is still in the table: its answer may have come
// already, and the request be finished and recycled. Safe for concurrent use.
func (t *ackTable) stamp(id uint64, owner *stream, at, stalled int64) {
	s := t.shard(id)
	s.mu.Lock()
	if i, ok := t.findLocked(s, id); ok && s.mu.vals[i].stream == owner {
		r := s.mu.vals[i]
		r.sentAt, r.stalledAt = at, stalled
	}
	s.mu.Unlock()
}

// takeIf removes every request for which match is true and appends it to out. It holds one
// shard lock at a time, so it is not a snapshot: requests inserted meanwhile may or may not be
// taken. match runs under the shard lock and must not call into the table. Safe for concurrent
// use.
func (t *ackTable) takeIf(match func(*request) bool, out []*request) []*request {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		start := len(out)
		for j, k := range s.mu.keys {
			if k != 0 && match(s.mu.vals[j]) {
				out = append(out, s.mu.vals[j])
			}
		}
		// Delete after the scan: a backward shift during it could move an entry past the cursor.
		for _, r := range out[start:] {
			if j, ok := t.findLocked(s, r.id); ok {
				t.deleteLocked(s, j)
			}
		}
		s.mu.Unlock()
	}
	return out
}

// len is the number of requests in the table (not a snapshot across shards).
func (t *ackTable) len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += s.mu.n
		s.mu.Unlock()
	}
	return n
}

func (t *ackTable) findLocked(s *ackShard, id uint64) (uint64, bool) {
	mask := uint64(len(s.mu.keys) - 1)
	for i := t.home(id, mask); ; i = (i + 1) & mask {
		switch s.mu.keys[i] {
		case id:
			return i, true
		case 0:
			return 0, false
		}
	}
}

// deleteLocked empties slot i and shifts back the entries of its probe run that may no longer
// be reachable from their home slot across the hole (invariant 2).
func (t *ackTable) deleteLocked(s *ackShard, i uint64) {
	keys, vals := s.mu.keys, s.mu.vals
	mask := uint64(len(keys) - 1)
	for j := (i + 1) & mask; keys[j] != 0; j = (j + 1) & mask {
		h := t.home(keys[j], mask)
		// The entry at j may move into the hole at i unless its home lies cyclically in (i, j]:
		// then it is reachable without crossing i and must stay.
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			keys[i], vals[i] = keys[j], vals[j]
			i = j
		}
	}
	keys[i], vals[i] = 0, nil
	s.mu.n--
}

func (t *ackTable) growLocked(s *ackShard) {
	oldKeys, oldVals := s.mu.keys, s.mu.vals
	n := len(oldKeys) * 2
	keys, vals := make([]uint64, n), make([]*request, n)
	mask := uint64(n - 1)
	for j, k := range oldKeys {
		if k == 0 {
			continue
		}
		i := t.home(k, mask)
		for keys[i] != 0 {
			i = (i + 1) & mask
		}
		keys[i], vals[i] = k, oldVals[j]
	}
	s.mu.keys, s.mu.vals = keys, vals
}
