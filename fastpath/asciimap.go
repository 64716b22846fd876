package fastpath

// asciiWindow is how many bytes of an entry one fill of an asciiMap covers: 4 KiB, 64 words of
// bits, small enough to live on the walk's stack, large enough that a fill is rare.
const (
	asciiWindow = 4096
	asciiWords  = asciiWindow / 64
)

// asciiMap answers, for the strings of one resource entry, "is this string ASCII?" from one
// bit per byte (set for bytes 0x80-0xFF), so that a short string costs a two-word read and a
// mask instead of a look at its bytes. The bits are computed with vector instructions a window
// of the entry at a time; a DepthFull walk meets the strings of an entry in increasing order,
// so each window is computed once. Nearly every string of OTLP is short and ASCII: keys, names,
// values. Whatever the map does not know (long strings, text outside ASCII) goes to validUTF8.
//
// Invariants:
//  1. Every walker's b is a prefix of src, and its indexes are src's: the generated walkers
//     pass b[:e] and an offset down, never a re-slice that moves the start.
//  2. bits[0] bit 0 stands for src[base]; the bits of src[base:end] are current, the rest are
//     stale and never read for an answer.
//  3. end-base <= asciiWindow, so a string inside the window has its bits in words
//     0..asciiWords, the last one padding a read at the window's end.
type asciiMap struct {
	src       []byte
	base, end int
	bits      [asciiWords + 1]uint64
}

// ascii reports whether src[s:e] is known to be ASCII; false means "not known", and validUTF8
// decides. Small enough to be inlined into the walkers.
func (m *asciiMap) ascii(s, e int) bool {
	k, n := uint(s-m.base), uint(e-s)
	if e > m.end || k >= asciiWindow || n > 64 {
		return m.fill(s, e)
	}
	// The 64 bits from bit k on, from two words; the second shifts in two steps so that no
	// shift count reaches 64.
	j, r := k/64, k%64
	w := m.bits[j]>>r | m.bits[j+1]<<1<<(63-r)
	return w&(1<<n-1) == 0
}

// fill computes the window starting at the string src[s:e] and answers for it; strings longer
// than 64 bytes go straight to validUTF8, which checks whole blocks of ASCII as fast.
func (m *asciiMap) fill(s, e int) bool {
	n := uint(e - s)
	if n > 64 {
		return false
	}
	m.base, m.end = s, min(s+asciiWindow, len(m.src))
	win := m.src[s:m.end]
	full := len(win) &^ 63
	highBits(m.bits[:full/64], win[:full])
	if full < len(win) {
		var pad [64]byte
		copy(pad[:], win[full:])
		highBits(m.bits[full/64:full/64+1], pad[:])
	}
	return m.bits[0]&(1<<n-1) == 0
}
