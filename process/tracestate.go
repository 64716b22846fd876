package process

// The Collector's hash_seed mode refuses to decide by hash, and with fail_closed (its default)
// drops the span, when the span's trace_state does not parse as W3C tracestate or carries
// OpenTelemetry sampling values (ot=rv:... or ot=th:...), which belong to the consistent
// sampling modes. tracestateBlocks answers that question the way its parser does
// (pkg/sampling: W3C list syntax and limits, then the syntax of the ot member), on the bytes,
// without allocating.

const (
	maxTracestate     = 1024 // whole header
	maxTracestateKeys = 32   // list members, counted as the Collector counts them
	maxTraceKey       = 256
	maxTenant         = 241
	maxSystem         = 14
	maxOTelValue      = 256
)

// tracestateBlocks reports whether a span with this trace_state is dropped by the Collector's
// hash_seed mode whatever its trace id: the value is malformed or holds rv or th in its ot
// member.
func tracestateBlocks(ts []byte) bool {
	if len(ts) == 0 {
		return false
	}
	if len(ts) > maxTracestate {
		return true
	}
	members := 0
	for rest := ts; len(rest) > 0; {
		members++
		if members >= maxTracestateKeys {
			return true
		}
		var m []byte
		if i := indexByte(rest, ','); i >= 0 {
			m, rest = rest[:i], rest[i+1:]
		} else {
			m, rest = rest, nil
		}
		m = trimOWS(m)
		if len(m) == 0 {
			continue // W3C allows empty list members
		}
		eq := indexByte(m, '=')
		if eq < 1 {
			return true
		}
		key, val := m[:eq], m[eq+1:]
		if !validTraceKey(key) || !validTraceValue(val) {
			return true
		}
		if len(key) == 2 && key[0] == 'o' && key[1] == 't' && otelBlocks(val) {
			return true
		}
	}
	return false
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
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

// otelBlocks checks the value of the ot member: key:value pairs separated by ';', keys of
// lower-case letters and digits starting with a letter, values of letters, digits, '.', '_'
// and '-'. It blocks when that syntax fails or a key is rv or th.
func otelBlocks(v []byte) bool {
	if len(v) > maxOTelValue {
		return true
	}
	for rest := v; ; {
		var m []byte
		i := indexByte(rest, ';')
		if i >= 0 {
			m, rest = rest[:i], rest[i+1:]
		} else {
			m = rest
		}
		colon := indexByte(m, ':')
		if colon < 1 || !lcAlpha(m[0]) {
			return true
		}
		for _, c := range m[1:colon] {
			if !lcAlphaNum(c) {
				return true
			}
		}
		for _, c := range m[colon+1:] {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return true
			}
		}
		if colon == 2 && (m[0] == 'r' && m[1] == 'v' || m[0] == 't' && m[1] == 'h') {
			return true
		}
		if i < 0 {
			return false
		}
	}
}
