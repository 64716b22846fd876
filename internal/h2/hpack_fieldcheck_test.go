package h2

import (
	"bytes"
	"fmt"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// xnetFramerVerdict is what grpc-go's reading of a call's headers makes of block, decoded by
// x/net's Framer with the HPACK context x: nil when it passes, else the framer's error and
// whether it named a field that failed as it passed (the detail of its StreamError).
func xnetFramerVerdict(x *hpack.Decoder, maxList uint32, block []byte) (error, bool) {
	var buf bytes.Buffer
	w := http2.NewFramer(&buf, nil)
	w.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true})
	fr := http2.NewFramer(nil, &buf)
	fr.ReadMetaHeaders = x
	fr.MaxHeaderListSize = maxList
	_, err := fr.ReadFrame()
	if err == nil {
		return nil, false
	}
	d := fmt.Sprint(fr.ErrorDetail())
	return err, bytes.HasPrefix([]byte(d), []byte("invalid header field")) || d == "pseudo header field after regular"
}

// With Config.Request a field whose name or value x/net's framer refuses as it passes (a
// control character in the value, a name with an octet that is not a lower-case token
// character, an empty name) is refused for its stream as grpc-go refuses it, however it is
// sent: literally or Huffman-coded, indexed or not, kept or not, and again when named from the
// dynamic table; what the framer lets through (HTAB, spaces at either end, octets above 0x7f
// in a value) passes. InvalidEnd is where the field ended; the table stays in step, and x/net's
// Framer, on the same blocks, gives the same verdict.
func TestHPACKRequestFieldValues(t *testing.T) {
	req := cat(literal(0, ":method", "POST", false), literal(0, ":path", "/p", false), literal(0, "content-type", "application/grpc", false))
	long := "0123456789abcdefghijklmnopqrstuvwxyz0123456789" // Huffman-codes shorter than a control character's code
	cases := []struct {
		name, field, value string
		want               error
	}{
		{"nul", "x-a", "a\x00b", ErrMalformedFields},
		{"cr", "x-a", "a\rb", ErrMalformedFields},
		{"lf", "x-a", long + "\n", ErrMalformedFields},
		{"soh", "x-a", "\x01", ErrMalformedFields},
		{"del", "x-a", long + "\x7f" + long, ErrMalformedFields},
		{"kept", "content-type", "application/grpc\x00", ErrMalformedFields},
		{"pseudo value", ":authority", "a\nb", ErrMalformedFields},
		{"binary", "x-a-bin", "YQ\n==", ErrMalformedFields},
		{"space in name", "x a", "v", ErrMalformedFields},
		{"colon in name", "x:a", "v", ErrMalformedFields},
		{"empty name", "", "v", ErrMalformedFields},
		{"not ascii name", "x-\xc3\xa9", "v", ErrMalformedFields},
		{"nul in name", "x\x00", "v", ErrMalformedFields},
		{"tab", "x-a", "\ta\tb\t", nil},
		{"spaces", "x-a", " a b ", nil},
		{"not ascii", "x-a", "\xc3\xa9\xff", nil},
		{"empty", "x-a", "", nil},
		{"token characters", "!#$%&'*+-.^_`|~09az", long, nil},
	}
	for _, tc := range cases {
		for _, kind := range []byte{0x00, 0x10, 0x40} {
			for _, huff := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%#x/huff=%v", tc.name, kind, huff), func(t *testing.T) {
					c := DefaultConfig()
					c.Request, c.Binary = true, true
					d := NewDecoder(c)
					x := hpack.NewDecoder(4096, nil)
					f := literal(kind, tc.field, tc.value, huff)
					blocks := [][]byte{cat(req, f, literal(0, "x-after", "v", false))}
					if kind == 0x40 {
						blocks = append(blocks, cat(req, []byte{0x80 | (staticLen + 1)})) // the entry, named again
					}
					for i, b := range blocks {
						_, err := d.Decode(b)
						if err != tc.want {
							t.Fatalf("block %d: %v, want %v", i, err, tc.want)
						}
						end, invalid := d.InvalidEnd()
						if invalid != (tc.want != nil) || invalid && end != len(b)-len(literal(0, "x-after", "v", false))*(1-i) {
							t.Fatalf("block %d: invalid %v, ending at %d of %d", i, invalid, end, len(b))
						}
						xerr, xinvalid := xnetFramerVerdict(x, c.MaxHeaderListSize, b)
						if (xerr != nil) != (err != nil) || xinvalid != invalid {
							t.Fatalf("block %d: x/net's framer: %v (a field refused as it passed: %v)", i, xerr, xinvalid)
						}
					}
					if _, err := d.Decode(req); err != nil {
						t.Fatalf("next block: %v", err)
					}
				})
			}
		}
	}
}

// The first field refused as it passes gives InvalidEnd, whatever follows; a pseudo-field
// after a regular one is such a field too, an unknown pseudo-field is not (x/net's framer
// refuses it once the block is whole); a malformed field after the list passed its bound is
// not looked at, as the framer emits nothing after it.
func TestHPACKInvalidEnd(t *testing.T) {
	method := literal(0, ":method", "POST", false)
	bad := literal(0, "x-a", "\x00", false)
	c := DefaultConfig()
	c.Request, c.MaxHeaderListSize = true, 100
	for _, tc := range []struct {
		name    string
		block   []byte
		want    error
		invalid bool
		end     int
	}{
		{"first of two", cat(method, bad, literal(0, "X-B", "v", false)), ErrMalformedFields, true, len(method) + len(bad)},
		{"pseudo after regular", cat(bad[:0], literal(0, "x-a", "v", false), method, bad), ErrMalformedFields, true, len(literal(0, "x-a", "v", false)) + len(method)},
		{"unknown pseudo", cat(literal(0, ":foo", "v", false), method), ErrMalformedFields, false, 0},
		{"unknown pseudo, then invalid", cat(literal(0, ":foo", "v", false), bad), ErrMalformedFields, true, len(literal(0, ":foo", "v", false)) + len(bad)},
		{"after the bound", cat(literal(0, "x-long", string(bytes.Repeat([]byte{'v'}, 80)), false), bad), ErrHeaderListTooLarge, false, 0},
		{"before the bound", cat(bad, literal(0, "x-long", string(bytes.Repeat([]byte{'v'}, 80)), false)), ErrMalformedFields, true, len(bad)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(c)
			_, err := d.Decode(tc.block)
			end, invalid := d.InvalidEnd()
			if err != tc.want || invalid != tc.invalid || invalid && end != tc.end {
				t.Fatalf("%v, invalid %v ending at %d; want %v, %v at %d", err, invalid, end, tc.want, tc.invalid, tc.end)
			}
			xerr, xinvalid := xnetFramerVerdict(hpack.NewDecoder(4096, nil), c.MaxHeaderListSize, tc.block)
			if xinvalid != invalid || (xerr != nil) != (err == ErrMalformedFields) {
				t.Fatalf("x/net's framer: %v (a field refused as it passed: %v)", xerr, xinvalid)
			}
		})
	}
}
