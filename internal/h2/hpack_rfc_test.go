package h2

import (
	"encoding/hex"
	"strings"
	"testing"
)

// rfcExample is one header block of RFC 7541 Appendix C: its bytes, the header list it decodes
// to and the dynamic table's size after it.
type rfcExample struct {
	hex    string
	fields []string // "name: value"
	size   uint32
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	rfcDate21  = "date: Mon, 21 Oct 2013 20:13:21 GMT"
	rfcDate22  = "date: Mon, 21 Oct 2013 20:13:22 GMT"
	rfcCookie  = "set-cookie: foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"
	rfcLocaton = "location: https://www.example.com"
)

// Appendix C.3 (requests, literal strings) and C.4 (the same with Huffman coding), on one
// connection each, table size 4096.
var rfcRequests = [][]rfcExample{{
	{"8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
		[]string{":method: GET", ":scheme: http", ":path: /", ":authority: www.example.com"}, 57},
	{"8286 84be 5808 6e6f 2d63 6163 6865",
		[]string{":method: GET", ":scheme: http", ":path: /", ":authority: www.example.com", "cache-control: no-cache"}, 110},
	{"8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
		[]string{":method: GET", ":scheme: https", ":path: /index.html", ":authority: www.example.com", "custom-key: custom-value"}, 164},
}, {
	{"8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
		[]string{":method: GET", ":scheme: http", ":path: /", ":authority: www.example.com"}, 57},
	{"8286 84be 5886 a8eb 1064 9cbf",
		[]string{":method: GET", ":scheme: http", ":path: /", ":authority: www.example.com", "cache-control: no-cache"}, 110},
	{"8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
		[]string{":method: GET", ":scheme: https", ":path: /index.html", ":authority: www.example.com", "custom-key: custom-value"}, 164},
}}

// Appendix C.5 (responses, literal strings) and C.6 (Huffman), table size 256: evictions.
var rfcResponses = [][]rfcExample{{
	{"4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
		[]string{":status: 302", "cache-control: private", rfcDate21, rfcLocaton}, 222},
	{"4803 3330 37c1 c0bf",
		[]string{":status: 307", "cache-control: private", rfcDate21, rfcLocaton}, 222},
	{"88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
		[]string{":status: 200", "cache-control: private", rfcDate22, rfcLocaton, "content-encoding: gzip", rfcCookie}, 215},
}, {
	{"4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
		[]string{":status: 302", "cache-control: private", rfcDate21, rfcLocaton}, 222},
	{"4883 640e ffc1 c0bf",
		[]string{":status: 307", "cache-control: private", rfcDate21, rfcLocaton}, 222},
	{"88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
		[]string{":status: 200", "cache-control: private", rfcDate22, rfcLocaton, "content-encoding: gzip", rfcCookie}, 215},
}}

// rfcKeep keeps every name the examples use.
var rfcKeep = []string{":method", ":scheme", ":path", ":authority", ":status", "cache-control", "custom-key",
	"date", "location", "content-encoding", "set-cookie", "password"}

func decoderFor(t testing.TB, tableSize uint32, keep []string) *Decoder {
	t.Helper()
	c := DefaultConfig()
	c.HeaderTableSize = tableSize
	c.Keep = keep
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return NewDecoder(c)
}

func fieldStrings(fs []Field) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Name+": "+string(f.Value))
	}
	return out
}

func TestHPACKAppendixC(t *testing.T) {
	run := func(name string, tableSize uint32, conns [][]rfcExample) {
		for i, conn := range conns {
			d := decoderFor(t, tableSize, rfcKeep)
			for j, ex := range conn {
				fs, err := d.Decode(unhex(t, ex.hex))
				if err != nil {
					t.Fatalf("%s %d.%d: %v", name, i, j+1, err)
				}
				if got := strings.Join(fieldStrings(fs), "\n"); got != strings.Join(ex.fields, "\n") {
					t.Fatalf("%s %d.%d:\n%s\nwant\n%s", name, i, j+1, got, strings.Join(ex.fields, "\n"))
				}
				if d.TableSize() != ex.size {
					t.Fatalf("%s %d.%d: table size %d, want %d", name, i, j+1, d.TableSize(), ex.size)
				}
			}
		}
	}
	run("C.3/C.4 requests", 4096, rfcRequests)
	run("C.5/C.6 responses", 256, rfcResponses)
}

// C.2: one representation of each kind, on a fresh table.
func TestHPACKAppendixC2(t *testing.T) {
	for _, c := range []struct {
		hex       string
		field     string
		size      uint32
		sensitive bool
	}{
		{"400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572", "custom-key: custom-header", 55, false},
		{"040c 2f73 616d 706c 652f 7061 7468", ":path: /sample/path", 0, false},
		{"1008 7061 7373 776f 7264 0673 6563 7265 74", "password: secret", 0, true},
		{"82", ":method: GET", 0, false},
	} {
		d := decoderFor(t, 4096, rfcKeep)
		fs, err := d.Decode(unhex(t, c.hex))
		if err != nil || len(fs) != 1 || fieldStrings(fs)[0] != c.field || fs[0].Sensitive != c.sensitive || d.TableSize() != c.size {
			t.Fatalf("%s: %v %v, table %d", c.field, fieldStrings(fs), err, d.TableSize())
		}
	}
}
