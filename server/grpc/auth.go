package grpcserver

import (
	"crypto/subtle"
	"unsafe"

	"google.golang.org/grpc/metadata"

	"github.com/otlpgate/otlpgate/internal/h2"
)

// callMeta is a call's request headers, read in place by their lower-case names: grpc-go's
// metadata of the call (mdMeta), or the fields otlpgate's own transport decoded (fieldMeta).
// Authorization and the tenant are read through it, so that both transports decide them by
// the same code.
type callMeta interface {
	// value returns the i-th value of the header name, false past the last. The string is
	// valid while the call's headers are: until the handler returns (grpc-go), until the
	// connection decodes its next header block (otlpgate); copy to retain.
	value(name string, i int) (string, bool)
}

// mdMeta is grpc-go's metadata of a call, as it filed it (incomingMD).
type mdMeta metadata.MD

func (m mdMeta) value(name string, i int) (string, bool) {
	vs := m[name]
	if i < len(vs) {
		return vs[i], true
	}
	return "", false
}

// fieldMeta is the fields an h2.Decoder kept of a call's header block.
type fieldMeta struct{ fields []h2.Field }

func (m *fieldMeta) value(name string, i int) (string, bool) {
	for _, f := range m.fields {
		if f.Name != name {
			continue
		}
		if i > 0 {
			i--
			continue
		}
		if len(f.Value) == 0 {
			return "", true
		}
		// A view of the decoder's buffer, not a copy: nothing it is handed to keeps it
		// (the tenant table copies a value into its key; the token is compared).
		return unsafe.String(&f.Value[0], len(f.Value)), true
	}
	return "", false
}

// firstValue is the first of a header's values, "" for none.
func firstValue(m callMeta, name string) string {
	v, _ := m.value(name, 0)
	return v
}

// checkToken compares the call's authorization values with want in constant time. The token
// is never logged.
func checkToken(m callMeta, want string) bool {
	for i := 0; ; i++ {
		v, ok := m.value("authorization", i)
		if !ok {
			return false
		}
		if subtle.ConstantTimeCompare([]byte(v), []byte(want)) == 1 {
			return true
		}
	}
}
