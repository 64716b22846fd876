//go:build !race

package h2

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2/hpack"
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

// Checking binary values costs no allocation, valid or not: a field that fails is recorded in
// the decoder's buffer of kept values.
func TestHPACKBinaryAllocs(t *testing.T) {
	c := grpcKeepConfig()
	c.Request, c.Binary = true, true
	d := NewDecoder(c)
	trace := "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
	valid := append(grpcRequest(trace, "tenant-a"), hpack.HeaderField{Name: "grpc-trace-bin", Value: "AABhYmNkZWZnaGlqa2xtbm9w"})
	bad := append(grpcRequest(trace, "tenant-a"), hpack.HeaderField{Name: "x-b-bin", Value: "YQ=", Sensitive: true})
	blocks := xnetBlocks(4096, valid, valid, bad, bad)
	allocs := testing.AllocsPerRun(100, func() {
		d.table.setMax(0)
		d.table.setMax(d.table.bound)
		for i, blk := range blocks {
			if fs, err := d.Decode(blk); err != nil || len(fs) != 9 {
				t.Fatalf("%d fields, %v", len(fs), err)
			}
			if b, ok := d.BadBinary(); ok != (i >= 2) || ok && (string(b.Name) != "x-b-bin" || string(b.Value) != "YQ=" || b.Kept != 9) {
				t.Fatalf("block %d: %q %q %d %v", i, b.Name, b.Value, b.Kept, ok)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per connection's blocks", allocs)
	}
}

// Refusing a block for a field's name or value costs no allocation either, the value sent
// literally, Huffman-coded, or named from the dynamic table.
func TestHPACKMalformedFieldAllocs(t *testing.T) {
	c := grpcKeepConfig()
	c.Request, c.Binary = true, true
	d := NewDecoder(c)
	trace := "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
	ctl := append(grpcRequest(trace, "tenant-a"), hpack.HeaderField{Name: "x-a", Value: "0123456789abcdefghijklmnopqrstuvwxyz\n"})
	name := append(grpcRequest(trace, "tenant-a"), hpack.HeaderField{Name: "x a", Value: "v", Sensitive: true})
	blocks := xnetBlocks(4096, ctl, ctl, name)
	allocs := testing.AllocsPerRun(100, func() {
		d.table.setMax(0)
		d.table.setMax(d.table.bound)
		for _, blk := range blocks {
			if _, err := d.Decode(blk); err != ErrMalformedFields {
				t.Fatalf("%v", err)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per connection's blocks", allocs)
	}
}
