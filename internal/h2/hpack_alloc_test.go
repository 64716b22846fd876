//go:build !race

package h2

import (
	"bytes"
	"testing"
)

func TestHPACKDecodeAllocs(t *testing.T) {
	blocks := grpcBlocks()
	d := NewDecoder(grpcKeepConfig())
	bomb := bytes.Repeat([]byte{0xbe}, 16<<10)
	huge := literalIndexed("x-scope-orgid", string(make([]byte, 4000)))
	allocs := testing.AllocsPerRun(100, func() {
		decodeConn(t, d, blocks)
		if _, err := d.Decode(huge); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Decode(bomb); err != ErrHeaderListTooLarge {
			t.Fatal(err)
		}
		if _, err := d.Decode([]byte{0x04, 0x84, 0xff, 0xff, 0xff, 0xff}); err != ErrHuffman {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per connection's blocks", allocs)
	}
}
