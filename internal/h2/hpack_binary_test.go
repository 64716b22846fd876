package h2

import (
	"encoding/base64"
	"fmt"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// grpcGoBinary is grpc-go's decodeBinHeader: padded base64 when the length is a multiple of 4,
// unpadded otherwise.
func grpcGoBinary(v []byte) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(string(v))
	}
	return base64.RawStdEncoding.DecodeString(string(v))
}

var binarySeeds = []string{
	"", "YQ", "YQ==", "YQ=", "YQ=a", "YWI", "YWI=", "YWJj", "YWJjZA", "YWJjZA==", "YWJjZA=",
	"Y", "Y===", "YQ===", "YWJjZ", "YR==", "YQ==YQ==", "YQ==\n", "YQ=\n=", "Y\nQ==", "YQ\r\n==",
	"\n", "\r\n\r\n", "YQ==x", "-_-_", "YQ!!", "abc=", "ab==", "a===", "====", "AAAA\nAAAA",
	"AAAAAAAAAAAAAAAA", "AAAAAAAA=AAAAAAA", "AAAAAAAAAAAAAA==", "AAAAAAAAAAAAAAA=", "\xff\xfe",
}

// ValidBinary decides as grpc-go's decoding does, case by case and on fuzzed values.
func TestValidBinary(t *testing.T) {
	for _, v := range binarySeeds {
		_, err := grpcGoBinary([]byte(v))
		if got := ValidBinary([]byte(v)); got != (err == nil) {
			t.Errorf("%q: valid %v, grpc-go's decoding: %v", v, got, err)
		}
	}
	for v, want := range map[string]bool{"YQ": true, "YQ==": true, "YQ=": false, "Y": false, "YWJj": true, "YR==": true, "YQ==YQ==": false} {
		if ValidBinary([]byte(v)) != want {
			t.Errorf("%q: not %v", v, want)
		}
	}
}

func FuzzValidBinary(f *testing.F) {
	for _, v := range binarySeeds {
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		_, err := grpcGoBinary(v)
		if got := ValidBinary(v); got != (err == nil) {
			t.Fatalf("%q: valid %v, grpc-go's decoding: %v", v, got, err)
		}
	})
}

// literal encodes a literal field: kind is 0x00 (without indexing), 0x10 (never indexed) or
// 0x40 (with incremental indexing); name and value are Huffman-coded when huff.
func literal(kind byte, name, value string, huff bool) []byte {
	b := []byte{kind}
	for _, s := range []string{name, value} {
		if huff {
			b = appendInt(b, 7, 0x80, uint64(huffmanLen(s)))
			b = appendHuffman(b, s)
		} else {
			b = appendInt(b, 7, 0, uint64(len(s)))
			b = append(b, s...)
		}
	}
	return b
}

// With Config.Binary every field whose name ends in -bin has its value checked as grpc-go
// decodes binary metadata, however it is sent: literally or Huffman-coded, indexed or not,
// named by an entry of the dynamic table, referenced whole from it, kept or not. The block is
// still accepted, and BadBinary names the last field that failed and its place among the kept
// fields; the next block starts clean.
func TestHPACKBinaryFields(t *testing.T) {
	ct := []byte{0x0f, 31 - 15, 16} // content-type (static 31), literal without indexing, kept
	ct = append(ct, "application/grpc"...)
	type bad struct {
		name, value string
		kept        int
	}
	none := bad{}
	for _, tc := range []struct {
		name   string
		blocks [][]byte
		want   []bad // per block; none: no field failed
	}{
		{"valid", [][]byte{cat(ct, literal(0, "x-trace-bin", "YQ", false), literal(0, "x-b-bin", "YWJj", true),
			literal(0x10, "x-c-bin", "YQ==", true), literal(0, "x-d-bin", "", false))}, []bad{none}},
		{"raw", [][]byte{cat(ct, literal(0, "x-trace-bin", "YQ=", false))}, []bad{{"x-trace-bin", "YQ=", 1}}},
		{"huffman never indexed", [][]byte{cat(literal(0x10, "x-trace-bin", "YQ=x", true), ct)}, []bad{{"x-trace-bin", "YQ=x", 0}}},
		{"not binary", [][]byte{cat(ct, literal(0, "x-binary", "!!", false), literal(0, "x-bin-x", "!", true))}, []bad{none}},
		{"status details", [][]byte{cat(ct, literal(0, "grpc-status-details-bin", "Y", false))}, []bad{{"grpc-status-details-bin", "Y", 1}}},
		{"the last", [][]byte{cat(literal(0, "x-a-bin", "Y", false), ct, literal(0, "x-b-bin", "YQ=", true), literal(0, "x-c-bin", "YQ", false))},
			[]bad{{"x-b-bin", "YQ=", 1}}},
		{"kept", [][]byte{cat(ct, literal(0, "x-tenant-bin", "a b", false), ct)}, []bad{{"x-tenant-bin", "a b", 1}}},
		// Inserted (raw, then Huffman-coded), then referenced from the table: checked again.
		{"indexed", [][]byte{
			cat(ct, literal(0x40, "x-a-bin", "YQ=", false)),
			cat(ct, []byte{0xbe}, ct),
			cat(literal(0x40, "x-b-bin", "YQ", true)),
			cat([]byte{0xbe, 0xbf}, ct), // x-b-bin: YQ, x-a-bin: YQ=
			cat(ct),
		}, []bad{{"x-a-bin", "YQ=", 1}, {"x-a-bin", "YQ=", 1}, none, {"x-a-bin", "YQ=", 0}, none}},
		// A new value under a name of the table (x-b-bin, then x-a-bin), not indexed, indexed.
		{"table name", [][]byte{
			cat(literal(0x40, "x-a-bin", "YQ", false), literal(0x40, "x-b-bin", "YQ", false)),
			cat(ct, []byte{0x0f, 62 - 15, 0x01, '@'}),
			cat(ct, []byte{0x7f, 0x00}, appendInt(nil, 7, 0x80, uint64(huffmanLen("YQ="))), appendHuffman(nil, "YQ="), ct),
			cat([]byte{0xbe, 0xbf, 0xc0}), // x-a-bin: YQ=, x-b-bin: YQ, x-a-bin: YQ
		}, []bad{none, {"x-b-bin", "@", 1}, {"x-a-bin", "YQ=", 1}, {"x-a-bin", "YQ=", 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Keep = append(c.Keep, "x-tenant-bin")
			c.Request, c.Binary = true, true
			d := NewDecoder(c)
			off := NewDecoder(Config{HeaderTableSize: 4096, MaxHeaderListSize: 16 << 10, Keep: c.Keep, MaxKeptFields: 64, Request: true})
			for i, block := range tc.blocks {
				fs, err := d.Decode(block)
				if err != nil {
					t.Fatalf("block %d: %v", i, err)
				}
				want := fieldStrings(fs)
				b, ok := d.BadBinary()
				got := none
				if ok {
					got = bad{string(b.Name), string(b.Value), b.Kept}
				}
				if got != tc.want[i] {
					t.Fatalf("block %d: bad %+v, want %+v", i, got, tc.want[i])
				}
				// The same fields without the check, and nothing found.
				fs, err = off.Decode(block)
				if err != nil || fmt.Sprint(fieldStrings(fs)) != fmt.Sprint(want) {
					t.Fatalf("block %d without the check: %v %v, with: %v", i, fieldStrings(fs), err, want)
				}
				if _, ok := off.BadBinary(); ok {
					t.Fatalf("block %d: a bad field found without Config.Binary", i)
				}
			}
		})
	}
}

// badBinaryOf is what BadBinary must find in the fields x/net's decoder emitted.
func badBinaryOf(all []hpack.HeaderField, keep map[string]bool) string {
	kept, last := 0, "none"
	for _, f := range all {
		if isBinaryName(f.Name) {
			if _, err := grpcGoBinary([]byte(f.Value)); err != nil {
				last = fmt.Sprintf("%q: %q after %d", f.Name, f.Value, kept)
			}
		}
		if keep[f.Name] {
			kept++
		}
	}
	return last
}
