package h2

import (
	"testing"

	"golang.org/x/net/http2/hpack"
)

// grpcBlocks are three calls' header blocks from one x/net encoder: the first all literals
// (Huffman-coded, inserted), the others mostly indices into the dynamic table.
func grpcBlocks() [][]byte {
	trace := "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
	return xnetBlocks(4096, grpcRequest(trace, "tenant-a"), grpcRequest(trace, "tenant-a"), grpcRequest(trace, "tenant-b"))
}

func grpcKeepConfig() Config {
	c := DefaultConfig()
	c.Keep = append(c.Keep, "x-scope-orgid", "authorization")
	return c
}

// decodeConn decodes the blocks on a fresh table each time, as a new connection does; the
// table is reset in place.
func decodeConn(b testing.TB, d *Decoder, blocks [][]byte) {
	d.table.setMax(0)
	d.table.setMax(d.table.bound)
	for _, blk := range blocks {
		if fs, err := d.Decode(blk); err != nil || len(fs) != 9 {
			b.Fatalf("%d fields, %v", len(fs), err)
		}
	}
}

func BenchmarkHPACKDecodeGRPCCalls(b *testing.B) {
	blocks := grpcBlocks()
	d := NewDecoder(grpcKeepConfig())
	n := 0
	for _, blk := range blocks {
		n += len(blk)
	}
	b.ReportAllocs()
	b.SetBytes(int64(n))
	for b.Loop() {
		decodeConn(b, d, blocks)
	}
}

// BenchmarkHPACKDecodeRequestCalls is BenchmarkHPACKDecodeGRPCCalls with a gRPC server's
// checks: the names of a request (Config.Request), and with binary the values of binary
// metadata too (Config.Binary), on the same blocks and on blocks that carry an OpenCensus
// grpc-trace-bin (trace-bin).
func BenchmarkHPACKDecodeRequestCalls(b *testing.B) {
	trace := "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
	withBin := func(tenant string) []hpack.HeaderField {
		return append(grpcRequest(trace, tenant), hpack.HeaderField{Name: "grpc-trace-bin", Value: "AABhYmNkZWZnaGlqa2xtbm9wAWFiY2RlZmdoAgE"})
	}
	for _, bc := range []struct {
		name   string
		binary bool
		blocks [][]byte
	}{
		{"request", false, grpcBlocks()},
		{"binary", true, grpcBlocks()},
		{"request-trace-bin", false, xnetBlocks(4096, withBin("tenant-a"), withBin("tenant-a"), withBin("tenant-b"))},
		{"binary-trace-bin", true, xnetBlocks(4096, withBin("tenant-a"), withBin("tenant-a"), withBin("tenant-b"))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := grpcKeepConfig()
			c.Request, c.Binary = true, bc.binary
			d := NewDecoder(c)
			n := 0
			for _, blk := range bc.blocks {
				n += len(blk)
			}
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for b.Loop() {
				decodeConn(b, d, bc.blocks)
			}
		})
	}
}

// BenchmarkHPACKDecodeIndexedCall is the common case on a busy connection: a call whose
// fields are all in the dynamic table.
func BenchmarkHPACKDecodeIndexedCall(b *testing.B) {
	blocks := grpcBlocks()
	d := NewDecoder(grpcKeepConfig())
	decodeConn(b, d, blocks)
	blk := blocks[1]
	b.ReportAllocs()
	b.SetBytes(int64(len(blk)))
	for b.Loop() {
		if _, err := d.Decode(blk); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHPACKDecodeXNet is x/net's decoder on the same blocks, for comparison.
func BenchmarkHPACKDecodeXNet(b *testing.B) {
	blocks := grpcBlocks()
	n := 0
	for _, blk := range blocks {
		n += len(blk)
	}
	var fields int
	x := hpack.NewDecoder(4096, func(hpack.HeaderField) { fields++ })
	b.ReportAllocs()
	b.SetBytes(int64(n))
	for b.Loop() {
		x.SetMaxDynamicTableSize(0)
		x.SetMaxDynamicTableSize(4096)
		for _, blk := range blocks {
			if _, err := x.Write(blk); err != nil {
				b.Fatal(err)
			}
			if err := x.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkHPACKRefuseBomb: 16 KiB of references to a 4000-byte entry, refused.
func BenchmarkHPACKRefuseBomb(b *testing.B) {
	d := NewDecoder(grpcKeepConfig())
	if _, err := d.Decode(literalIndexed("x-scope-orgid", string(make([]byte, 4000)))); err != nil {
		b.Fatal(err)
	}
	bomb := make([]byte, 16<<10)
	for i := range bomb {
		bomb[i] = 0xbe
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(bomb)))
	for b.Loop() {
		if _, err := d.Decode(bomb); err != ErrHeaderListTooLarge {
			b.Fatal(err)
		}
	}
}
