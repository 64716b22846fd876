// Package bytesize reads and writes byte sizes as flags and -dest options spell them: a number
// with an optional binary (KiB, MiB, GiB) or decimal (KB, MB, GB) unit, or B.
//
// It imports nothing of otlpgate and starts no goroutines; its functions are safe for
// concurrent use.
package bytesize
