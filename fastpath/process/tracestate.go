package process

// A span's trace_state is W3C tracestate, in which the ot member carries OpenTelemetry's
// sampling values: rv, an explicit randomness, and th, the threshold the trace was sampled
// with. parseTraceState reads it as the Collector-contrib pkg/sampling parser does (W3C list
// syntax and limits, then the syntax of the ot member, rv of exactly 14 hex digits, th of 1 to
// 14), so that a span the Collector refuses to decide by is refused here too; and
// appendTraceState writes the tracestate of a kept span as the Collector serializes it: the ot
// member first (rv, th, then its other values), then the other members in their order, each
// trimmed of the optional whitespace around it, empty members left out. Both work on the
// bytes and allocate nothing.

const (
	maxTracestate     = 1024 // whole header
	maxTracestateKeys = 32   // list members, counted as the Collector counts them
	maxTraceKey       = 256
	maxTenant         = 241
	maxSystem         = 14
	maxOTelValue      = 256
)

// traceState is what parseTraceState read: slices of the trace_state it was given.
type traceState struct {
	ot       []byte // the value of the ot member (the last one: it replaces those before it); nil without one
	rv, th   []byte // ot's rv and th values (the last of each); nil without
	rnd, thr uint64 // rv as randomness, th as a threshold
}

// parseTraceState reads ts into st and reports whether the Collector's parser accepts it.
func parseTraceState(ts []byte, st *traceState) bool {
	*st = traceState{}
	if len(ts) == 0 {
		return true
	}
	if len(ts) > maxTracestate {
		return false
	}
	members := 0
	for rest := ts; len(rest) > 0; {
		members++
		if members >= maxTracestateKeys {
			return false
		}
		var m []byte
		m, rest = cutByte(rest, ',')
		m = trimOWS(m)
		if len(m) == 0 {
			continue // W3C allows empty list members
		}
		eq := indexByte(m, '=')
		if eq < 1 {
			return false
		}
		key, val := m[:eq], m[eq+1:]
		if !validTraceKey(key) || !validTraceValue(val) {
			return false
		}
		if isOT(key) && !parseOTel(val, st) {
			return false
		}
	}
	return true
}

// tracestateBlocks reports whether the Collector's hash_seed mode refuses to decide a span by
// its hash because of its trace_state (and so, failing closed, drops it): the value does not
// parse, or carries rv or th, which belong to the consistent modes.
func tracestateBlocks(ts []byte) bool {
	var st traceState
	return !parseTraceState(ts, &st) || st.rv != nil || st.th != nil
}

// parseOTel reads the value of an ot member: key:value pairs separated by ';', keys of
// lower-case letters and digits starting with a letter, values of letters, digits, '.', '_'
// and '-'; rv must be 14 hex digits and th 1 to 14.
func parseOTel(v []byte, st *traceState) bool {
	if len(v) > maxOTelValue {
		return false
	}
	st.ot, st.rv, st.th, st.rnd, st.thr = v, nil, nil, 0, 0
	for rest := v; ; {
		m, more := cutByte(rest, ';')
		colon := indexByte(m, ':')
		if colon < 1 || !lcAlpha(m[0]) {
			return false
		}
		for _, c := range m[1:colon] {
			if !lcAlphaNum(c) {
				return false
			}
		}
		val := m[colon+1:]
		for _, c := range val {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return false
			}
		}
		switch key := m[:colon]; {
		case len(key) == 2 && key[0] == 'r' && key[1] == 'v':
			n, ok := parseHex(val)
			if !ok || len(val) != hexDigits {
				return false
			}
			st.rv, st.rnd = val, n
		case len(key) == 2 && key[0] == 't' && key[1] == 'h':
			n, ok := parseHex(val)
			if !ok {
				return false
			}
			// th leaves out the trailing zeros of the 14 digits.
			st.th, st.thr = val, n<<(4*(hexDigits-len(val)))
		}
		if more == nil {
			return true
		}
		rest = more
	}
}

// What a written tracestate is held to so that the next reader accepts it: the Collector's
// parser, like parseTraceState, refuses a 32nd list member, a list over 1024 bytes and an ot
// value over 256.
const (
	maxWrittenMembers = maxTracestateKeys - 1
	// W3C Trace Context: when a list must shrink, members longer than this go first.
	largeMember = 128
)

// appendTraceState appends the tracestate a kept span leaves with: ts (which parsed into st)
// with th set to tv, laid out as the Collector lays it out. It also returns how many values
// it left out to make room.
//
// The threshold always fits. A sampler that wrote it past a limit would hand the next tier a
// tracestate it refuses, and that tier, failing closed, would drop every span this one kept;
// one that left the span's tracestate as it came would hand on a threshold that is not the
// one the span was sampled with. So room is made as W3C Trace Context says a vendor that
// adds its member makes it: the ot member goes first, and the other members follow while the
// list stays within 1024 bytes and 31 members, those over 128 bytes left out first, then the
// others from the right. Within the ot value, which must stay within 256 bytes, rv and th go
// first and the other sub-keys follow while they fit, the rest left out from the right.
// Nothing is left out of a tracestate that fits. dst needs no more than maxTracestate bytes
// of room.
func appendTraceState(dst, ts []byte, st *traceState, tv []byte) (out []byte, removed int) {
	start := len(dst)
	dst = append(dst, "ot="...)
	if st.rv != nil {
		dst = append(dst, "rv:"...)
		dst = append(dst, st.rv...)
		dst = append(dst, ';')
	}
	dst = append(dst, "th:"...)
	dst = append(dst, tv...)
	for rest := st.ot; rest != nil; {
		var m []byte
		m, rest = cutByte(rest, ';')
		if k := m[:indexByte(m, ':')]; len(k) == 2 && (k[0] == 'r' && k[1] == 'v' || k[0] == 't' && k[1] == 'h') {
			continue
		}
		if removed > 0 || len(dst)-start-len("ot=")+1+len(m) > maxOTelValue {
			removed++
			continue
		}
		dst = append(dst, ';')
		dst = append(dst, m...)
	}

	// The other members, as offsets into ts; parseTraceState let at most 31 through.
	var members [maxTracestateKeys]struct{ at, n uint16 }
	k, size := 0, len(dst)-start
	for off := 0; off < len(ts); {
		end := len(ts)
		if i := indexByte(ts[off:], ','); i >= 0 {
			end = off + i
		}
		raw := ts[off:end]
		if m := trimOWS(raw); len(m) > 0 && !isOT(m[:indexByte(m, '=')]) {
			if k == len(members) {
				panic("BUG: a tracestate that parsed has more than 31 members")
			}
			members[k].at, members[k].n = uint16(off+len(raw)-len(trimLeftOWS(raw))), uint16(len(m))
			k++
			size += 1 + len(m)
		}
		off = end + 1
	}
	count := 1 + k
	var drop uint32 // bit i: member i is left out
	for pass := 0; pass < 2; pass++ {
		for i := k - 1; i >= 0 && (size > maxTracestate || count > maxWrittenMembers); i-- {
			if drop&(1<<i) == 0 && (pass == 1 || members[i].n > largeMember) {
				drop |= 1 << i
				size -= 1 + int(members[i].n)
				count--
				removed++
			}
		}
	}
	for i := range k {
		if drop&(1<<i) == 0 {
			m := members[i]
			dst = append(dst, ',')
			dst = append(dst, ts[m.at:m.at+m.n]...)
		}
	}
	return dst, removed
}

// cutByte splits b at the first c: what comes before, and what comes after (nil when there is
// no c, empty when c ends b).
func cutByte(b []byte, c byte) (before, after []byte) {
	if i := indexByte(b, c); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

func isOT(key []byte) bool { return len(key) == 2 && key[0] == 'o' && key[1] == 't' }

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func trimOWS(b []byte) []byte {
	b = trimLeftOWS(b)
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func trimLeftOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

func lcAlpha(c byte) bool    { return c >= 'a' && c <= 'z' }
func lcAlphaNum(c byte) bool { return lcAlpha(c) || c >= '0' && c <= '9' }
func keyChar(c byte) bool    { return lcAlphaNum(c) || c == '_' || c == '-' || c == '*' || c == '/' }

func keyChars(b []byte) bool {
	for _, c := range b {
		if !keyChar(c) {
			return false
		}
	}
	return true
}

// validTraceKey: simple-key or tenant@system, W3C's syntax and sizes.
func validTraceKey(k []byte) bool {
	if len(k) > maxTraceKey {
		return false
	}
	if at := indexByte(k, '@'); at >= 0 {
		tenant, system := k[:at], k[at+1:]
		return len(tenant) > 0 && len(system) > 0 && len(tenant) <= maxTenant && len(system) <= maxSystem &&
			lcAlphaNum(tenant[0]) && lcAlpha(system[0]) && keyChars(tenant[1:]) && keyChars(system[1:])
	}
	return lcAlpha(k[0]) && keyChars(k[1:])
}

func nonBlankValueChar(c byte) bool {
	return c >= 0x21 && c <= 0x2b || c >= 0x2d && c <= 0x3c || c >= 0x3e && c <= 0x7e
}

// validTraceValue: up to 256 printable characters, no ',' or '=', not ending in a space.
func validTraceValue(v []byte) bool {
	if len(v) == 0 || len(v) > 256 || !nonBlankValueChar(v[len(v)-1]) {
		return false
	}
	for _, c := range v[:len(v)-1] {
		if c != ' ' && !nonBlankValueChar(c) {
			return false
		}
	}
	return true
}
