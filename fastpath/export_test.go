package fastpath

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

// NumSplitKeys bounds the fuzz inputs.
const NumSplitKeys = numSplitKeys

// RefScanRequest exports refScanRequest to the benchmarks of package fastpath_test, which
// measure the reference walker beside the generated one.
var RefScanRequest = refScanRequest

// WalkEntry and RefWalkEntry walk b as a resource entry of sig with the generated walkers and
// with the reference walker, for FuzzScanEquivalence.
func WalkEntry(sig Signal, b []byte, full bool) (int, error) {
	return walkEntry(resourceMsg[sig], b, full)
}

func RefWalkEntry(sig Signal, b []byte, full bool) (int, error) {
	return refWalk(resourceMsg[sig], b, 1, full)
}

// ThreadCPU exports threadCPU to the benchmarks of package fastpath_test.
var ThreadCPU = threadCPU
