package h2

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// fuzzKeep is what the differential fuzzing keeps: a gRPC server's fields, a tenant and an auth
// header, and names the seeds use.
var fuzzKeep = append(append([]string(nil), GRPCServerKeep...), "x-scope-orgid", "authorization", ":authority",
	":scheme", ":status", "custom-key", "cache-control", "location", "set-cookie", "grpc-status")

const fuzzMaxKept = 12

type outcome int

const (
	accepted outcome = iota
	listTooLarge
	tooManyFields
	compression
)

func (o outcome) String() string {
	return [...]string{"accepted", "list too large", "too many fields", "compression error"}[o]
}

func outcomeOf(err error) outcome {
	var e *Error
	switch {
	case err == nil:
		return accepted
	case err == ErrHeaderListTooLarge:
		return listTooLarge
	case err == ErrTooManyFields:
		return tooManyFields
	case errors.As(err, &e) && e.Code == 0x9: // COMPRESSION_ERROR
		return compression
	}
	panic(fmt.Sprintf("unexpected error %v", err))
}

// reference decodes block with x/net's decoder and applies the bounds of the decoder under test
// to what it emits: the header list size of every field, the count of kept ones. It returns the
// last field whose binary value grpc-go would refuse too (badBinaryOf).
func reference(x *hpack.Decoder, block []byte, keep map[string]bool, maxList uint64) ([]string, string, outcome, error) {
	var all []hpack.HeaderField
	x.SetEmitFunc(func(f hpack.HeaderField) { all = append(all, f) })
	_, err := x.Write(block)
	if err == nil {
		err = x.Close()
	}
	if err != nil {
		return nil, "", compression, err
	}
	var list uint64
	var kept []string
	for _, f := range all {
		list += uint64(f.Size())
		if keep[f.Name] {
			kept = append(kept, fmt.Sprintf("%s: %s %v", f.Name, f.Value, f.Sensitive))
		}
	}
	switch {
	case list > maxList:
		return nil, "", listTooLarge, nil
	case len(kept) > fuzzMaxKept:
		return nil, "", tooManyFields, nil
	}
	return kept, badBinaryOf(all, keep), accepted, nil
}

// xnetTable reads x/net's dynamic table by decoding each dynamic index until one is refused
// (indexing a field changes no table). Close resets the decoder after the refusal.
func xnetTable(x *hpack.Decoder) []string {
	var out []string
	for i := staticLen + 1; ; i++ {
		fs, err := x.DecodeFull(appendInt(nil, 7, 0x80, uint64(i)))
		if err != nil {
			x.Close()
			return out
		}
		out = append(out, fs[0].Name+": "+fs[0].Value)
	}
}

func ourTable(d *Decoder) []string {
	var out []string
	for i := range d.table.n {
		_, n, v := d.table.at(i)
		out = append(out, string(n)+": "+string(v))
	}
	return out
}

func checkAgainstXNet(t *testing.T, tableSize uint32, maxList uint32, blocks ...[]byte) {
	c := Config{HeaderTableSize: tableSize, MaxHeaderListSize: maxList, Keep: fuzzKeep, MaxKeptFields: fuzzMaxKept}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(c)
	// A request's decoder checking binary values, on the same blocks: where it accepts a
	// block, it finds the field grpc-go's checks find last.
	c.Request, c.Binary = true, true
	dr := NewDecoder(c)
	x := hpack.NewDecoder(tableSize, nil)
	// x/net's Framer, as grpc-go reads a call's headers, on the same blocks: the request's
	// decoder finds a field it refuses as it passes where the framer finds one.
	xf, framerOn := hpack.NewDecoder(tableSize, nil), true
	keep := map[string]bool{}
	for _, k := range fuzzKeep {
		keep[k] = true
	}
	for i, block := range blocks {
		want, wantBad, wantOutcome, xerr := reference(x, block, keep, uint64(maxList))
		fs, err := d.Decode(block)
		_, rerr := dr.Decode(block)
		if framerOn {
			xferr, xinvalid := xnetFramerVerdict(xf, maxList, block)
			if _, ok := xferr.(http2.ConnectionError); ok {
				framerOn = false // its context is lost: a COMPRESSION_ERROR, or a block far over the bound
			} else if _, invalid := dr.InvalidEnd(); invalid != xinvalid && (rerr == nil || rerr.(*Error).Stream) {
				t.Fatalf("block %d %x: %v, a field refused as it passed: %v; x/net's framer: %v", i, block, rerr, invalid, xferr)
			}
		}
		if rerr == nil && wantOutcome == accepted {
			gotBad := "none"
			if b, ok := dr.BadBinary(); ok {
				gotBad = fmt.Sprintf("%q: %q after %d", b.Name, b.Value, b.Kept)
			}
			if gotBad != wantBad {
				t.Fatalf("block %d %x: bad binary field %s, x/net's fields: %s", i, block, gotBad, wantBad)
			}
		}
		got := outcomeOf(err)
		// Where RFC 7541 §4.2 and x/net's decoder part, the decoder follows the RFC: a size
		// update after a field is refused even when x/net lets it through (its table was
		// empty), and several updates before the first field are accepted where x/net refuses
		// the second (its table was not empty). The two tables may differ after such a block.
		if err == ErrSizeUpdatePlace && wantOutcome != compression {
			return
		}
		if xerr != nil && strings.Contains(xerr.Error(), "MUST occur at the beginning") && got != compression {
			return
		}
		if got != wantOutcome {
			t.Fatalf("block %d %x: %v (%v), x/net %v (%v)", i, block, got, err, wantOutcome, xerr)
		}
		if got == compression {
			return // the connection ends
		}
		if got == accepted {
			var gotFields []string
			for _, f := range fs {
				gotFields = append(gotFields, fmt.Sprintf("%s: %s %v", f.Name, f.Value, f.Sensitive))
			}
			if strings.Join(gotFields, "\n") != strings.Join(want, "\n") {
				t.Fatalf("block %d %x: fields\n%s\nx/net\n%s", i, block, strings.Join(gotFields, "\n"), strings.Join(want, "\n"))
			}
		}
		// Refused for its size or not, the block left both tables alike.
		ours, theirs := ourTable(d), xnetTable(x)
		if strings.Join(ours, "\n") != strings.Join(theirs, "\n") {
			t.Fatalf("block %d %x: dynamic table\n%s\nx/net\n%s", i, block, strings.Join(ours, "\n"), strings.Join(theirs, "\n"))
		}
		var size uint32
		for _, e := range theirs {
			size += uint32(len(e)) - 2 + entryOverhead
		}
		if d.TableSize() != size {
			t.Fatalf("block %d: table size %d, x/net's entries add up to %d", i, d.TableSize(), size)
		}
	}
}

// grpcRequest is a call's headers as a gRPC client with a tenant and a token sends them.
func grpcRequest(path, tenant string) []hpack.HeaderField {
	return []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: path},
		{Name: ":authority", Value: "127.0.0.1:4317"}, {Name: "content-type", Value: "application/grpc"},
		{Name: "user-agent", Value: "OTel-OTLP-Exporter-Go/1.47.0 grpc-go/1.85.0"}, {Name: "te", Value: "trailers"},
		{Name: "grpc-accept-encoding", Value: "gzip"}, {Name: "grpc-encoding", Value: "gzip"},
		{Name: "grpc-timeout", Value: "9999870u"}, {Name: "x-scope-orgid", Value: tenant},
		{Name: "authorization", Value: "Bearer 0123456789abcdef", Sensitive: true},
	}
}

// xnetBlocks encodes each list of fields as one block with one x/net encoder (a connection),
// its table size limit set to limit.
func xnetBlocks(limit uint32, lists ...[]hpack.HeaderField) [][]byte {
	var buf bytes.Buffer
	e := hpack.NewEncoder(&buf)
	e.SetMaxDynamicTableSizeLimit(limit)
	var out [][]byte
	for _, l := range lists {
		buf.Reset()
		for _, f := range l {
			if err := e.WriteField(f); err != nil {
				panic(err)
			}
		}
		out = append(out, append([]byte(nil), buf.Bytes()...))
	}
	return out
}

type fuzzSeed struct {
	tableSize, maxList uint16
	b1, b2, b3         []byte
}

func fuzzSeeds(t testing.TB) []fuzzSeed {
	var seeds []fuzzSeed
	add := func(tableSize, maxList uint16, blocks [][]byte) {
		for len(blocks) < 3 {
			blocks = append(blocks, nil)
		}
		seeds = append(seeds, fuzzSeed{tableSize, maxList, blocks[0], blocks[1], blocks[2]})
	}
	for _, set := range []struct {
		size  uint16
		conns [][]rfcExample
	}{{4096, rfcRequests}, {256, rfcResponses}} {
		for _, conn := range set.conns {
			var blocks [][]byte
			for _, ex := range conn {
				blocks = append(blocks, unhex(t, ex.hex))
			}
			add(set.size, 16<<10, blocks)
		}
	}
	trace := "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
	stream := "/opentelemetry.proto.experimental.otlp.v1.StreamExporter/ExportTraces"
	calls := [][]hpack.HeaderField{grpcRequest(trace, "tenant-a"), grpcRequest(trace, "tenant-b"), grpcRequest(stream, "tenant-a")}
	add(4096, 16<<10, xnetBlocks(4096, calls...))
	add(4096, 300, xnetBlocks(4096, calls...)) // over the list bound, the table still follows
	add(512, 16<<10, xnetBlocks(512, calls...))
	// A table smaller than the peer's default: the encoder's first block starts with a size
	// update.
	var buf bytes.Buffer
	e := hpack.NewEncoder(&buf)
	e.SetMaxDynamicTableSizeLimit(100)
	e.SetMaxDynamicTableSize(100)
	for _, f := range calls[0] {
		e.WriteField(f)
	}
	add(100, 16<<10, [][]byte{append([]byte(nil), buf.Bytes()...)})
	// A response and its trailers.
	add(4096, 16<<10, xnetBlocks(4096,
		[]hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: "application/grpc"}},
		[]hpack.HeaderField{{Name: "grpc-status", Value: "0"}, {Name: "grpc-message", Value: ""}}))
	// A bomb: one large entry inserted, then indexed many times.
	bomb := append(appendInt(nil, 6, 0x40, 0), appendInt(nil, 7, 0, 4)...)
	bomb = append(bomb, "x-aa"...)
	bomb = append(bomb, appendInt(nil, 7, 0, 3000)...)
	bomb = append(bomb, bytes.Repeat([]byte{'a'}, 3000)...)
	add(4096, 16<<10, [][]byte{bomb, bytes.Repeat([]byte{0xbe}, 200)})
	// Kept values sent as they are (x/net's encoder Huffman-codes what that shortens): one
	// to index larger than a small table, one without indexing a byte past a list bound of 100.
	lit := func(first byte, prefix uint, idx uint64, v string) []byte {
		b := appendInt(nil, prefix, first, idx)
		return append(appendInt(b, 7, 0, uint64(len(v))), v...)
	}
	add(27, 16<<10, [][]byte{lit(0x40, 6, 1, strings.Repeat("0", 23)), {0x82}})
	add(100, 99, [][]byte{lit(0x00, 4, 23, strings.Repeat("a", 56)), lit(0x00, 4, 23, strings.Repeat("a", 55))})
	// Edge cases: a size update after a field, two before, the EOS symbol, integer bounds.
	add(4096, 16<<10, [][]byte{{0x82, 0x3f, 0xe1, 0x1f}, {0x20, 0x3f, 0xe1, 0x1f, 0x82}})
	add(4096, 16<<10, [][]byte{{0x04, 0x84, 0xff, 0xff, 0xff, 0xff}, {0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}})
	// Binary metadata, valid and not, inserted and then referenced from the table.
	bin := []hpack.HeaderField{{Name: "grpc-trace-bin", Value: "AABhYmNk"}, {Name: "x-a-bin", Value: "YQ="},
		{Name: "custom-key", Value: "v"}, {Name: "x-b-bin", Value: "Y", Sensitive: true}, {Name: "x-c-bin", Value: "YQ"}}
	add(4096, 16<<10, xnetBlocks(4096, append(grpcRequest(trace, "tenant-a"), bin...), bin[:3], bin[2:]))
	return seeds
}

func TestHPACKSeedsAgainstXNet(t *testing.T) {
	for i, s := range fuzzSeeds(t) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			checkAgainstXNet(t, uint32(s.tableSize)%8193, 1+uint32(s.maxList)%(1<<15), s.b1, s.b2, s.b3)
		})
	}
}

// FuzzHPACKAgainstXNet decodes up to three blocks on one connection with the decoder and with
// x/net's, and requires the same decision for each (accepted, refused for size, refused as a
// compression error), the same kept fields in the same order, and the same dynamic table.
func FuzzHPACKAgainstXNet(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.tableSize, s.maxList, s.b1, s.b2, s.b3)
	}
	f.Fuzz(func(t *testing.T, tableSize, maxList uint16, b1, b2, b3 []byte) {
		checkAgainstXNet(t, uint32(tableSize)%8193, 1+uint32(maxList)%(1<<15), b1, b2, b3)
	})
}
