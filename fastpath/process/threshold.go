package process

import (
	"encoding/binary"
	"math"
)

// Consistent probability sampling (OTEP 235, the W3C trace context's random trace id) compares
// two 56-bit numbers: the randomness of a trace, the low 56 bits of its trace id or an explicit
// rv in its tracestate, and a rejection threshold, the number of the 2^56 randomness values a
// sampler rejects. A span is kept when its randomness is at least the threshold, so every
// sampler of a trace, wherever it runs, keeps or drops the same traces, and a stricter
// sampler keeps a subset of what a more lenient one kept. The threshold travels in the
// tracestate as th: its 14 hex digits with the trailing zeros left out.
//
// The arithmetic below is the Collector-contrib pkg/sampling's, operation for operation in
// float64 where it uses floats, so that a threshold computed here is the one it computes.
const (
	maxAdjusted    = 1 << 56         // randomness values; a threshold of this rejects everything
	neverThreshold = maxAdjusted     // what a span that must not be kept is held to
	maxRandomness  = maxAdjusted - 1 // admitted by every threshold but neverThreshold
	hexDigits      = 14              // of a threshold or a randomness value
	minProbability = 1.0 / maxAdjusted

	// DefaultSamplePrecision is the Collector's default sampling_precision: thresholds keep
	// four significant hex digits, after the leading 0s or fs.
	DefaultSamplePrecision = 4
)

// thresholdFor returns the rejection threshold of the sampling probability p, rounded half up
// to precision significant hex digits (1 to 14; other values: 14). A probability near 0 or
// near 1 starts with hex fs or 0s, which do not count as significant: each adds a digit. ok is
// false for a probability below 2^-56 or above 1, which no threshold expresses.
func thresholdFor(p float64, precision int) (th uint64, ok bool) {
	if precision < 1 || precision > hexDigits {
		precision = hexDigits
	}
	if !(p >= minProbability && p <= 1) {
		return 0, false
	}
	if p == 1 {
		return 0, true
	}
	// A value below 16^-k (2^-4k) has k leading hex zeros, and Frexp's exponent of it is at
	// most -4k: exponent/-4, truncated, counts them. The zeros of p become leading fs of the
	// threshold, those of 1-p its leading zeros.
	_, ep := math.Frexp(p)
	_, eq := math.Frexp(1 - p)
	precision = min(hexDigits, precision+max(ep/-4, eq/-4))
	th = maxAdjusted - uint64(math.Round(p*maxAdjusted))
	if shift := 4 * (hexDigits - precision); shift > 0 {
		unit := uint64(1) << shift
		th = (th + unit/2) &^ (unit - 1)
	}
	return th, true
}

// thresholdProbability is the sampling probability a threshold stands for.
func thresholdProbability(th uint64) float64 {
	return float64(maxAdjusted-th) / maxAdjusted
}

// traceRandomness is the randomness of a 16-byte trace id: its last seven bytes.
func traceRandomness(tid []byte) uint64 {
	return binary.BigEndian.Uint64(tid[8:16]) & maxRandomness
}

// appendTValue appends the th value of a threshold below neverThreshold: 0 for keeping
// everything, else its 14 hex digits without the trailing zeros.
func appendTValue(dst []byte, th uint64) []byte {
	if th == 0 {
		return append(dst, '0')
	}
	n := hexDigits
	for th&0xf == 0 {
		th >>= 4
		n--
	}
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, "0123456789abcdef"[th>>(4*i)&0xf])
	}
	return dst
}

// parseHex reads a hex number of at most 14 digits, either case (strconv.ParseUint's base 16,
// which the Collector uses, takes both).
func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > hexDigits {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(c)
	}
	return v, true
}
