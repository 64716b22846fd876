//go:build !race && !invariants

package pool

// Checked reports whether reference-count misuse is detected and panics. It is true in builds
// with -race or -tags invariants; tests of the panics run only when it is.
const Checked = false
