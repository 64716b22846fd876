package uds

import "time"

// clock is the time source of the metric exporter. Tests replace it to make export times and
// schedules deterministic.
type clock interface {
	Now() time.Time
	// At returns a channel that receives once t is reached, and a function that releases it.
	At(t time.Time) (<-chan time.Time, func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) At(t time.Time) (<-chan time.Time, func()) {
	tm := time.NewTimer(time.Until(t))
	return tm.C, func() { tm.Stop() }
}
