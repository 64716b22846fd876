//go:build !race

package kafkacompress

const raceEnabled = false
