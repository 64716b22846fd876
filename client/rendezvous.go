package client

import "github.com/otlpgate/otlpgate/fastpath"

// rendezvous is highest-random-weight hashing over a fixed set of backends: a key belongs to
// the backend whose weight, a hash of the key's hash mixed with the backend's, is highest.
//
// It is chosen over a ring with virtual nodes and over jump hash because its promises need no
// tuning and hold for any change: when a backend leaves, exactly its keys move, each to the
// backend that was second for it, so they spread evenly over the rest; when one joins, it
// takes about 1/N of the keys, from every other backend alike, and no key moves between two
// old backends. A ring needs many virtual nodes per backend for the same evenness, and jump
// hash only removes the last bucket. The cost, N weights per key, is small for the fleets a
// gateway tier has, and the splitter asks once per trace run, not per span.
//
// A backend is identified by its address, so every otlpgate that resolves the same set sends a
// trace to the same gateway, whatever order it learned the addresses in.
type rendezvous struct {
	seeds []uint64 // per backend, from its address
}

func newRendezvous(addrs []string) rendezvous {
	r := rendezvous{seeds: make([]uint64, len(addrs))}
	for i, a := range addrs {
		r.seeds[i] = mix64(fastpath.HashKey([]byte(a)))
	}
	return r
}

// Pick implements fastpath.Picker: the index of the backend with the highest weight for key.
// Ties, which need two equal 64-bit weights, go to the lower index. Safe for concurrent use.
func (r *rendezvous) Pick(key uint64) int {
	best, at := uint64(0), 0
	for i, s := range r.seeds {
		if w := mix64(key ^ s); w > best || i == 0 {
			best, at = w, i
		}
	}
	return at
}

// mix64 is the finalizer of MurmurHash3: every input bit flips each output bit with
// probability close to one half, so that weights of one key under different seeds are
// independent enough for the rendezvous to be fair.
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
