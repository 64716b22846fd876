package h2

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// The code table agrees with x/net's encoder on every octet, alone and in runs, and decodes
// back: a wrong entry shows here rather than as a field decoded wrong.
func TestHuffmanAgreesWithXNet(t *testing.T) {
	var all []byte
	for c := range 256 {
		s := string([]byte{byte(c), byte(c), byte(255 - c)})
		all = append(all, s...)
		mine, theirs := appendHuffman(nil, s), hpack.AppendHuffmanString(nil, s)
		if !bytes.Equal(mine, theirs) || huffmanLen(s) != len(theirs) {
			t.Fatalf("%q: %x (len %d), x/net %x", s, mine, huffmanLen(s), theirs)
		}
		dst := make([]byte, 3)
		if n, err := huffmanDecode(dst, mine); err != nil || n != 3 || string(dst) != s {
			t.Fatalf("%q decoded to %q, %d, %v", s, dst, n, err)
		}
	}
	coded := appendHuffman(nil, string(all))
	// Decoding into a short buffer measures the whole and keeps what fits.
	dst := make([]byte, 100)
	if n, err := huffmanDecode(dst, coded); err != nil || n != len(all) || !bytes.Equal(dst, all[:100]) {
		t.Fatalf("n=%d err=%v", n, err)
	}
	if n, err := huffmanDecode(nil, coded); err != nil || n != len(all) {
		t.Fatalf("count only: n=%d err=%v", n, err)
	}
}
