package kafkadest

import "github.com/twmb/franz-go/pkg/kgo"

// partitioner is where records go: round robin over the partitions, or, by key, the partition
// the Collector's Kafka exporter picks for the same key. Its franz-go producer hashes keys
// with 32-bit FNV-1a and Sarama's sign convention (kgo.SaramaCompatHasher, "to avoid hashing to
// different partitions" than its older Sarama producer), so that a trace keyed by its hex id
// lands in the same partition whether a Collector or otlpgate produced it; records without a
// key stick to one partition per batch, as there.
func partitioner(byKey bool) kgo.Partitioner {
	if !byKey {
		return kgo.RoundRobinPartitioner()
	}
	return kgo.StickyKeyPartitioner(kgo.SaramaCompatHasher(fnv32a))
}

// fnv32a is FNV-1a, 32 bits, as hash/fnv's New32a computes it, without the allocation of a
// hash.Hash32 per key.
func fnv32a(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h ^= uint32(c)
		h *= 16777619
	}
	return h
}
