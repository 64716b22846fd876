package fastpath

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestSkipVarint holds skipVarint to protowire on every varint of up to ten bytes, whole, cut
// short and overflowing, at the end of a message (where an int attribute's value sits: the
// walkers cut each message at its end) and followed by more bytes, behind prefixes of 0 to 9
// bytes so that the word reads start before, at and after the start of b.
func TestSkipVarint(t *testing.T) {
	var vals [][]byte
	for n := 1; n <= 11; n++ {
		for _, last := range []byte{0x00, 0x01, 0x02, 0x7f, 0x80, 0xff} {
			v := make([]byte, n)
			for i := range v[:n-1] {
				v[i] = 0x80 | byte(i)
			}
			v[n-1] = last
			vals = append(vals, v)
		}
	}
	for _, v := range vals {
		for pre := range 10 {
			for _, post := range [][]byte{nil, {0x0a}, {0x0a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}} {
				b := make([]byte, pre, pre+len(v)+len(post))
				for i := range b {
					b[i] = 0x80 // high bits before i must not count as the varint's bytes
				}
				b = append(append(b, v...), post...)
				got, err := skipVarint(b, pre)
				_, n := protowire.ConsumeVarint(b[pre:])
				if n < 0 {
					if want := varintErr(n); err != want {
						t.Fatalf("%x at %d: %d, %v; want %v", b, pre, got, err, want)
					}
					continue
				}
				if err != nil || got != pre+n {
					t.Fatalf("%x at %d: %d, %v; want %d", b, pre, got, err, pre+n)
				}
			}
		}
	}
	if _, err := skipVarint([]byte{0x80}, 1); err != ErrTruncated {
		t.Fatalf("at the end of b: %v, want ErrTruncated", err)
	}
}

// TestReadTag holds readTag to consumeTag on every two-byte tag, the padded one-byte tags of
// field 0 among them, and on tags of three bytes and more.
func TestReadTag(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		tag, next, err := readTag(b, 1)
		num, typ, n, wantErr := consumeTag(b[1:])
		if err != wantErr {
			t.Fatalf("%x: error %v, want %v", b, err, wantErr)
		}
		if err == nil && (tag != uint64(num)<<3|uint64(typ) || next != 1+n) {
			t.Fatalf("%x: tag %#x next %d, want %#x %d", b, tag, next, uint64(num)<<3|uint64(typ), 1+n)
		}
	}
	for x := 0x80; x < 0x100; x++ {
		for y := range 0x100 {
			check([]byte{0x0a, byte(x), byte(y), 0x01})
			check([]byte{0x0a, byte(x), byte(y)})
		}
		check([]byte{0x0a, byte(x)}) // cut short
	}
	for _, b := range [][]byte{{0x0a, 0x00}, {0x0a, 0x07}, {0x0a, 0x80, 0x80, 0x01}, {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, {0x0a, 0xff, 0xff, 0xff, 0xff, 0x1f}} {
		check(b)
	}
}
