package fastpath

// Partition exposes the byte-level split to the external tests, which check its output.
func (s *Splitter) Partition(sig Signal, payload []byte, bal Balance, n int, pick Picker) (int, error) {
	return s.partition(sig, payload, bal, n, pick)
}

// Part returns part p of the last Partition (nil when it got nothing) and its item count.
func (s *Splitter) Part(p int) ([]byte, int) {
	if s.parts[p] == nil {
		return nil, s.counts[p]
	}
	return s.parts[p].Bytes(), s.counts[p]
}

// ReleaseParts releases the payloads of the last Partition.
func (s *Splitter) ReleaseParts() {
	for i, p := range s.parts {
		if p != nil {
			p.Release()
			s.parts[i] = nil
		}
	}
}

// NumBalances bounds the fuzz inputs.
const NumBalances = numBalances
