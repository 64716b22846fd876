package h2

import (
	"errors"
	"strings"
	"testing"
)

// A new name longer than the decoder's scratch, in a field to index, sent as it is or
// Huffman-coded: the decoder cannot keep it, and refuses the block (no request has such a
// name), but it still reads the name's kind as x/net's framer does, so that one with an upper
// case letter, or a pseudo-field name after a regular field, is a field refused as it passes
// (InvalidEnd) exactly where the framer refuses it. Held to x/net by checkAgainstXNet, and on a
// decoder with no scratch at all (table size 0, nothing kept).
func TestHPACKLongNewNameKind(t *testing.T) {
	long := strings.Repeat("a", 5000)
	regular := appendString(appendInt([]byte{}, 4, 0x00, 0), "x-before") // a short regular field first
	regular = appendString(regular, "v")
	for _, c := range []struct {
		name    string
		invalid bool
	}{
		{"x-" + long, false},
		{"X-" + long, true},
		{"x-" + long + " ", true},
		{":" + long, false}, // a pseudo-field first: malformed, not refused as it passes
	} {
		for _, huff := range []bool{false, true} {
			field := []byte{0x40}
			if huff {
				field = appendHuffman(appendInt(field, 7, 0x80, uint64(huffmanLen(c.name))), c.name)
			} else {
				field = append(appendInt(field, 7, 0x00, uint64(len(c.name))), c.name...)
			}
			field = append(field, 0x00) // an empty value
			for _, prefix := range [][]byte{nil, regular} {
				block := append(append([]byte{}, prefix...), field...)
				checkAgainstXNet(t, 4096, 1<<15, block)
				d := NewDecoder(Config{MaxHeaderListSize: 1 << 15, MaxKeptFields: 1, Request: true})
				_, err := d.Decode(block)
				if !errors.Is(err, ErrMalformedFields) {
					t.Errorf("%.8q huffman %v: %v, want %v", c.name, huff, err, ErrMalformedFields)
				}
				// A pseudo-field after a regular one is refused as it passes too.
				want := c.invalid || (prefix != nil && c.name[0] == ':')
				if end, invalid := d.InvalidEnd(); invalid != want || (invalid && end != len(block)) {
					t.Errorf("%.8q huffman %v after a regular field %v: refused as it passed %v at %d, want %v at %d",
						c.name, huff, prefix != nil, invalid, end, want, len(block))
				}
			}
		}
	}
}
