//go:build !race

package spool

// modelRuns is how many scripts TestSpoolModel runs by default.
const modelRuns = 3000
