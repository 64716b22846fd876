package kafkacompress

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecompress feeds arbitrary input to every codec. Whatever the input: no panic, no output
// past the limit, only the package's sentinel errors, and the prefix in dst is kept.
func FuzzDecompress(f *testing.F) {
	for _, c := range loadCaptures(f) {
		f.Add(int8(c.codec), c.in)
	}
	f.Add(int8(Snappy), xerialOf(payload(3000, 9), 1024))
	const limit = 4096
	d := mustNew(f, limit)
	prefix := []byte("prefix")
	f.Fuzz(func(t *testing.T, codec int8, in []byte) {
		out, err := d.Decompress(append([]byte(nil), prefix...), Codec(codec), in)
		if err != nil && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
			t.Fatalf("unexpected error %v", err)
		}
		if !bytes.HasPrefix(out, prefix) {
			t.Fatalf("prefix lost")
		}
		if err == nil && len(out)-len(prefix) > limit {
			t.Fatalf("%d bytes out, limit %d", len(out)-len(prefix), limit)
		}
		if err == nil && Codec(codec) == None && !bytes.Equal(out[len(prefix):], in) {
			t.Fatalf("none altered the input")
		}
	})
}
