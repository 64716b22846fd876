//go:build race

package kafka

// raceEnabled: the race detector makes sync.Pool drop items on purpose, so pooled decoders are
// rebuilt at random and allocation bounds cannot be checked.
const raceEnabled = true
