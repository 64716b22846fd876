// Package allocattr attributes allocations to the code that made them, exactly.
//
// Classification (Allocator) is shared by the benchmark tool, which reads pprof profiles of a
// running otlpgate, and by the tests, which read the runtime's own records. The rule is strict:
// an allocation is otlpgate's own when the innermost frame of its stack outside the runtime and
// the standard library is in this module (or is the program's main package), since
// runtime.makeslice and newobject allocate for their caller, and so do context.WithTimeout,
// fmt.Sprintf and strconv.Itoa. The runtime's type-switch caches and a sync.Pool's per-P array,
// made on the collector's schedule rather than per call, are nobody's.
//
// A Recorder measures a phase of a test binary that runs with runtime.MemProfileRate = 1, so
// that every allocation is recorded with its stack (not a sample of one per 512 KiB): it
// diffs the cumulative records taken before and after the phase and reports, per stack, the
// objects the phase allocated. The test binary must set the rate itself, before anything it
// measures allocates (a package-level variable initialiser of the test package); this package
// never changes it, because the benchmark tool links it too.
//
// One kind of allocation escapes any record: the runtime packs small pointer-free objects
// (under 16 bytes: short strings, escaped integers) into a shared 16-byte block and records
// only the allocation that opens a block. Report.Tiny counts the others, process-wide and
// without a stack. Records keep the innermost 32 frames of a stack.
//
// It imports the standard library only. A Recorder is used by one goroutine.
package allocattr
