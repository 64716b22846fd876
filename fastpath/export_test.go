package fastpath

// RefScanRequest exports refScanRequest to the benchmarks of package fastpath_test, which
// measure the reference walker beside the generated one.
var RefScanRequest = refScanRequest
