package kafkacompress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// bombLimit is an output cap every bomb below expands past: snappy cannot grow 1 KiB by more
// than about 21 times.
const bombLimit = 16 << 10

// zstdBlockMax is the largest block a zstd frame may hold (RFC 8878, Block_Maximum_Size):
// the decoder checks the cap between blocks, so one block is the most it can overshoot by.
const zstdBlockMax = 128 << 10

// zstdRLEBomb hand-writes a zstd frame with a 1 MiB window and n RLE blocks of 128 KiB each,
// 4 bytes apiece; with fcs, the header announces the content size.
func zstdRLEBomb(n int, fcs bool) []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x50} // magic, no FCS/checksum/dict, window 2^20
	if fcs {
		b[4] = 3 << 6 // an 8-byte content size follows the window descriptor
		b = binary.LittleEndian.AppendUint64(b, uint64(n)*zstdBlockMax)
	}
	for i := range n {
		h := uint32(zstdBlockMax)<<3 | 1<<1 // block size, type RLE
		if i == n-1 {
			h |= 1 // last block
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 'A')
	}
	return b
}

// bomb is a compressed input of at most 1 KiB that expands past bombLimit.
type bomb struct {
	name  string
	codec Codec
	in    []byte
}

func bombs(t testing.TB) []bomb {
	t.Helper()
	var gz bytes.Buffer
	gw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	gw.Write(make([]byte, 900<<10))
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	var lz bytes.Buffer
	lw := lz4.NewWriter(&lz)
	if err := lw.Apply(lz4.CompressionLevelOption(lz4.Level9), lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
		t.Fatal(err)
	}
	lw.Write(make([]byte, 200<<10))
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	var zs bytes.Buffer
	zw, err := zstd.NewWriter(&zs, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(make([]byte, 8<<20))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	// xerial: blocks that each fit, until the third passes the cap.
	xerial := xerialOf(make([]byte, 18000), 6000)
	bs := []bomb{
		{"gzip", Gzip, gz.Bytes()},
		{"lz4", LZ4, lz.Bytes()},
		{"snappy raw", Snappy, snappy.Encode(nil, make([]byte, 20000))},
		{"snappy raw, lying length", Snappy, binary.AppendUvarint(nil, 1<<31)},
		{"snappy xerial", Snappy, xerial},
		{"zstd stream", Zstd, zs.Bytes()},
		{"zstd RLE blocks", Zstd, zstdRLEBomb(250, false)},
		{"zstd with content size", Zstd, zstdRLEBomb(250, true)},
	}
	for _, b := range bs {
		if len(b.in) > 1024 {
			t.Fatalf("%s bomb is %d bytes, want at most 1 KiB", b.name, len(b.in))
		}
	}
	return bs
}

// TestBombs: every 1 KiB bomb stops at the cap with ErrTooLarge, and the memory allocated for
// it stays within a few times the cap (zstd: plus the one block it checks the cap after).
func TestBombs(t *testing.T) {
	// No collection between the warm-up and the measure: it would empty the decoder pools.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	d := mustNew(t, bombLimit)
	for _, b := range bombs(t) {
		t.Run(b.name, func(t *testing.T) {
			// Warm the decoder pools, then measure one call.
			if _, err := d.Decompress(nil, b.codec, b.in); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err %v, want ErrTooLarge", err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			out, err := d.Decompress(nil, b.codec, b.in)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err %v, want ErrTooLarge", err)
			}
			if len(out) > bombLimit {
				t.Fatalf("%d bytes returned, limit %d", len(out), bombLimit)
			}
			// Four times the cap covers the output doubling its way past the limit. Each codec
			// may add one block of its own: zstd decodes a whole block (up to 128 KiB) before
			// checking the cap, and lz4 reserves a block buffer (64 KiB at this cap) should its
			// pool be empty.
			bound := uint64(4 * bombLimit)
			switch b.codec {
			case Zstd:
				bound += 2 * zstdBlockMax
			case LZ4:
				bound += uint64(lz4MaxBlock(bombLimit))
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			if alloc > bound && !raceEnabled {
				t.Fatalf("allocated %d bytes for a %d-byte input, bound %d", alloc, len(b.in), bound)
			}
			t.Logf("%d-byte input: %d bytes allocated", len(b.in), alloc)
		})
	}
}

// TestZstdBombAtDefaultCap: at the intake's default cap of 1 MiB, a 1 KiB zstd input that
// would expand to 32 MiB costs little more than the cap.
func TestZstdBombAtDefaultCap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const limit = 1 << 20
	d := mustNew(t, limit)
	in := zstdRLEBomb(250, false)
	if _, err := d.Decompress(nil, Zstd, in); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err %v, want ErrTooLarge", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := d.Decompress(nil, Zstd, in)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err %v, want ErrTooLarge", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3*limit && !raceEnabled {
		t.Fatalf("allocated %d bytes, cap %d", alloc, limit)
	}
	// The hand-written frames are valid: without a cap in the way they decode in full.
	for _, fcs := range []bool{false, true} {
		out, err := mustNew(t, 64<<20).Decompress(nil, Zstd, zstdRLEBomb(250, fcs))
		if err != nil || len(out) != 250*zstdBlockMax || bytes.Count(out, []byte{'A'}) != len(out) {
			t.Fatalf("fcs %v: err %v, %d bytes", fcs, err, len(out))
		}
	}
}

func TestLZ4MaxBlock(t *testing.T) {
	f := func(limit, want int) {
		t.Helper()
		if got := lz4MaxBlock(limit); got != want {
			t.Errorf("lz4MaxBlock(%d) = %d, want %d", limit, got, want)
		}
	}
	f(1, 64<<10)
	f(64<<10, 64<<10)
	f(64<<10+1, 256<<10)
	f(1<<20, 1<<20)
	f(1<<20+1, 4<<20)
	f(MaxLimit, 4<<20)
}

// lz4Frame compresses b into one frame with the given writer options.
func lz4Frame(t testing.TB, b []byte, opts ...lz4.Option) []byte {
	t.Helper()
	var out bytes.Buffer
	w := lz4.NewWriter(&out)
	if err := w.Apply(opts...); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestLZ4Framing: the frame walk accepts every frame layout the format allows (checksums,
// content size, skippable frames, several frames), refuses a block size the cap does not need
// before reserving its buffer, and refuses broken framing.
func TestLZ4Framing(t *testing.T) {
	const limit = 1 << 20
	d := mustNew(t, limit)
	a, b := payload(100_000, 3), payload(5000, 4)
	skippable := binary.LittleEndian.AppendUint32(nil, lz4SkipMagic|7)
	skippable = binary.LittleEndian.AppendUint32(skippable, 3)
	skippable = append(skippable, 1, 2, 3)
	for _, tc := range []struct {
		name string
		in   []byte
		want []byte
	}{
		{"64 KiB blocks", lz4Frame(t, a, lz4.BlockSizeOption(lz4.Block64Kb)), a},
		{"1 MiB blocks", lz4Frame(t, a, lz4.BlockSizeOption(lz4.Block1Mb)), a},
		{"block checksums", lz4Frame(t, a, lz4.BlockSizeOption(lz4.Block64Kb), lz4.BlockChecksumOption(true)), a},
		{"no content checksum", lz4Frame(t, a, lz4.BlockSizeOption(lz4.Block256Kb), lz4.ChecksumOption(false)), a},
		{"content size", lz4Frame(t, a, lz4.BlockSizeOption(lz4.Block64Kb), lz4.SizeOption(uint64(len(a)))), a},
		{"skippable frame first", append(append([]byte(nil), skippable...), lz4Frame(t, b, lz4.BlockSizeOption(lz4.Block64Kb))...), b},
		{"empty input", nil, nil},
	} {
		got, err := d.Decompress(nil, LZ4, tc.in)
		if err != nil || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: err %v, %d bytes, want %d", tc.name, err, len(got), len(tc.want))
		}
	}

	// A tiny frame declaring 4 MiB blocks, under a 1 MiB cap, is refused without reserving
	// anything; with a cap that needs such blocks, it decodes.
	big := lz4Frame(t, b, lz4.BlockSizeOption(lz4.Block4Mb))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// TotalAlloc counts every goroutine of the process (the race detector's and the testing
	// package's too), so the least of a few tries is what the refusal itself allocated.
	least := uint64(1 << 62)
	for range 5 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := d.Decompress(nil, LZ4, big)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("4 MiB blocks under a 1 MiB cap: err %v, want ErrTooLarge", err)
		}
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	if least > 1024 {
		t.Fatalf("refusing a %d-byte frame allocated %d bytes", len(big), least)
	}
	if got, err := mustNew(t, 2<<20).Decompress(nil, LZ4, big); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("4 MiB blocks under a 2 MiB cap: err %v", err)
	}

	good := lz4Frame(t, b, lz4.BlockSizeOption(lz4.Block64Kb), lz4.BlockChecksumOption(true))
	legacy := binary.LittleEndian.AppendUint32(nil, 0x184c2102)
	legacy = binary.LittleEndian.AppendUint32(legacy, 4)
	legacy = append(legacy, 0x10, 'a', 0, 0)
	dict := append([]byte(nil), good...)
	dict[4] |= lz4FlagDictID
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"legacy frame", legacy},
		{"dictionary id", dict},
		{"cut in the magic", good[:3]},
		{"cut in the header", good[:6]},
		{"cut in a block", good[:len(good)-10]},
		{"no end mark", good[:len(good)-8]},
		{"trailing garbage", append(append([]byte(nil), good...), 'x', 'y', 'z', 'w', 'v')},
		{"block over its declared size", append(append(append([]byte(nil), good[:7]...), 0, 0, 2, 0), make([]byte, 64)...)},
		{"skippable frame longer than the input", skippable[:9]},
		{"block size index 3", append([]byte{0x04, 0x22, 0x4d, 0x18, 0x60, 0x30, 0}, 0, 0, 0, 0)},
	} {
		if _, err := d.Decompress(nil, LZ4, tc.in); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err %v, want ErrCorrupt", tc.name, err)
		}
	}
}
