package fastpath

// asciiWindow is how many bytes of an entry one fill of an asciiMap covers: 4 KiB, 64 words of
// bits, small enough to live on the walk's stack, large enough that a fill is rare.
const (
	asciiWindow = 4096
	asciiWords  = asciiWindow / 64
)

// asciiMap answers, for the strings of one resource entry, "is this string ASCII?" from one
// bit per byte (set for bytes 0x80-0xFF), so that a short string costs two word reads and shifts
// instead of a look at its bytes. The bits are computed with vector instructions a window
// of the entry at a time; a DepthFull walk meets the strings of an entry in increasing order,
// so each window is computed once. Nearly every string of OTLP is short and ASCII: keys, names,
// values. Whatever the map does not know (long strings, text outside ASCII) goes to validUTF8.
//
// Invariants:
//  1. Every walker's b is a prefix of src, and its indexes are src's: the generated walkers
//     pass b[:e] and an offset down, never a re-slice that moves the start.
//  2. Bit k%64 of bits[k/64] stands for src[base+k]; the bits of src[base:end] are current,
//     the rest are stale and never read for an answer.
//  3. end-base <= asciiWindow, and bits has a word beyond the window's, so that the second
//     word of a read inside the window stays inside the array.
type asciiMap struct {
	src       []byte
	base, end int
	bits      [asciiWords + 1]uint64
}

// ascii reports whether src[s:e] is known to be ASCII: a string of up to 64 bytes inside the
// window, read from the two words that hold its bits. false means "not known", and check
// decides. The generated walkers are too large for the inliner to take even this (it inlines
// little into functions as big as fullSpan), so fastpath/internal/gen writes the same test out
// in them, where the scan tests and FuzzScanEquivalence check it.
func (m *asciiMap) ascii(s, e int) bool {
	k := uint(s - m.base)
	if e <= m.end && k < asciiWindow && e-s <= 64 {
		// The 64 bits from bit k on; the second word shifts in two steps so that no shift
		// count reaches 64. Then the string's bits, moved to the top: a shift by 64 (the
		// empty string) leaves 0.
		w := m.bits[k/64]>>(k%64) | m.bits[k/64+1]<<1<<(63-k%64)
		return w<<(64-uint(e-s)) == 0
	}
	return false
}

// check reports whether src[s:e], which ascii did not know, is UTF-8. A string of up to
// asciiLong bytes is looked up in the map, the window moved to start at it first when it lies
// outside; longer strings and text outside ASCII go to validUTF8, which checks whole blocks of
// ASCII about as fast as the map. The strings of 65 to asciiLong bytes come here on every
// call, since the walkers' inline test covers 64 bits: user agents, URLs and paths, which
// the map answers for in a few words where validUTF8's fixed cost (a copy of the tail, the
// vector registers set up) is most of its time.
func (m *asciiMap) check(s, e int) bool {
	if e-s <= asciiLong {
		if e > m.end || s < m.base {
			m.fill(s)
		}
		if m.asciiRun(s, e) {
			return true
		}
	}
	return validUTF8(m.src[s:e])
}

// asciiLong is the longest string check looks up in the map. Beyond it the map's loop costs
// more than it saves when the string turns out not to be ASCII (validUTF8 reads it again),
// which long text often is. A window holds several strings of this length.
const asciiLong = 256

// asciiRun reports whether the map's bits for src[s:e], which lies inside the window, are all
// clear, reading them 64 at a time with no branch on what they hold: the last read ends at e
// and overlaps the one before, which reads no bit outside the string twice to any effect.
func (m *asciiMap) asciiRun(s, e int) bool {
	if e-s <= 64 {
		return m.ascii(s, e)
	}
	k, last := uint(s-m.base), uint(e-m.base)-64
	var any uint64
	for ; k < last; k += 64 {
		any |= m.bits[k/64]>>(k%64) | m.bits[k/64+1]<<1<<(63-k%64)
	}
	any |= m.bits[last/64]>>(last%64) | m.bits[last/64+1]<<1<<(63-last%64)
	return any == 0
}

// fill computes the bits of the window that starts at src[s].
func (m *asciiMap) fill(s int) {
	m.base, m.end = s, min(s+asciiWindow, len(m.src))
	win := m.src[s:m.end]
	full := len(win) &^ 63
	highBits(m.bits[:full/64], win[:full])
	if full < len(win) {
		// The last bytes, padded to a whole word of bits: highBits reads 64 bytes a word.
		var pad [64]byte
		copy(pad[:], win[full:])
		highBits(m.bits[full/64:full/64+1], pad[:])
	}
}
