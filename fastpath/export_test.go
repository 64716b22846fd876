package fastpath

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
