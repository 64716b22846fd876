//go:build race

package spool

// modelRuns is how many scripts TestSpoolModel runs by default under the race detector, which
// slows the spool's goroutine hand-offs several times over.
const modelRuns = 600
