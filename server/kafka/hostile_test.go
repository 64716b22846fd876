package kafka

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/codec/kafkacompress"
	"github.com/otlpgate/otlpgate/internal/testkit"
)

// bombCap is the telemetry cap of the bomb tests: small enough that every codec can blow 1 KiB
// past it (snappy grows its input at most about 21 times).
const bombCap = 16 << 10

// kafkaBombs returns compressed pushes of at most 1 KiB that each expand past bombCap.
func kafkaBombs(t testing.TB) map[string]struct {
	codec kafkacompress.Codec
	in    []byte
} {
	t.Helper()
	var gz bytes.Buffer
	gw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	gw.Write(make([]byte, 900<<10))
	gw.Close()
	var lz bytes.Buffer
	lw := lz4.NewWriter(&lz)
	lw.Apply(lz4.CompressionLevelOption(lz4.Level9), lz4.BlockSizeOption(lz4.Block64Kb))
	lw.Write(make([]byte, 200<<10))
	lw.Close()
	// zstd: a frame without a content size and 250 RLE blocks of 128 KiB (4 bytes each).
	zs := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x50}
	for i := range 250 {
		h := uint32(128<<10)<<3 | 1<<1
		if i == 249 {
			h |= 1
		}
		zs = append(zs, byte(h), byte(h>>8), byte(h>>16), 'A')
	}
	bombs := map[string]struct {
		codec kafkacompress.Codec
		in    []byte
	}{
		"gzip":   {kafkacompress.Gzip, gz.Bytes()},
		"lz4":    {kafkacompress.LZ4, lz.Bytes()},
		"snappy": {kafkacompress.Snappy, snappy.Encode(nil, make([]byte, 20000))},
		"zstd":   {kafkacompress.Zstd, zs},
	}
	for name, b := range bombs {
		if len(b.in) > 1024 {
			t.Fatalf("%s bomb is %d bytes", name, len(b.in))
		}
	}
	return bombs
}

// TestDecompressionBombs: a 1 KiB push of every codec that expands past the cap is answered
// TELEMETRY_TOO_LARGE, counted, forwards nothing, and costs the server memory in the order of
// the cap, not of what the bomb would expand to (8 MiB to 32 MiB).
func TestDecompressionBombs(t *testing.T) {
	cfg := testConfig()
	cfg.TelemetryMaxBytes = bombCap
	cfg.MaxRequestBytes = 64 << 10
	rec := &testkit.Recorder{}
	s, clk := startServer(t, cfg, rec)
	c := dial(t, s, "bomber")
	sub := c.get([16]byte{})
	// No collection between a warm-up and its measure: it would empty the pools.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for name, b := range kafkaBombs(t) {
		t.Run(name, func(t *testing.T) {
			before := counterValue(t, errTooLarge)
			// Once to warm the pools, once measured.
			clk.Advance(cfg.DefaultInterval)
			if code := c.push(sub.ClientInstanceID, sub.SubscriptionID, int8(b.codec), b.in, false); code != errTelemetryTooLarge {
				t.Fatalf("code %d, want TELEMETRY_TOO_LARGE", code)
			}
			clk.Advance(cfg.DefaultInterval)
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			code := c.push(sub.ClientInstanceID, sub.SubscriptionID, int8(b.codec), b.in, false)
			runtime.ReadMemStats(&m1)
			if code != errTelemetryTooLarge {
				t.Fatalf("code %d, want TELEMETRY_TOO_LARGE", code)
			}
			if d := counterValue(t, errTooLarge) - before; d != 2 {
				t.Fatalf("too_large counted %v, want 2", d)
			}
			// The client's request and response, the server's request buffer and decoding,
			// and zstd's one block past the cap all fit in 4 caps plus 256 KiB.
			if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 4*bombCap+256<<10 && !raceEnabled {
				t.Fatalf("a %d-byte push cost %d bytes of allocation", len(b.in), alloc)
			}
		})
	}
	if n := rec.Count(); n != 0 {
		t.Fatalf("%d payloads forwarded", n)
	}
}

// TestArrayCounts: array and byte-string counts of 2^31 and around it, where the request
// holds nothing of the kind, reserve nothing: they close the connection as malformed, or (a
// negative count, which Kafka reads as null) are answered as an empty array.
func TestArrayCounts(t *testing.T) {
	s, _ := startServer(t, testConfig(), &testkit.Recorder{})
	header := func(key, version int16, flexible bool) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 9)      // correlation id
		b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
		if flexible {
			b = append(b, 0) // no header tags
		}
		return b
	}
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	// Metadata v1..v8: topics is an int32 array.
	for _, n := range []uint32{1 << 31, 1<<31 - 1, 1<<32 - 2} {
		t.Run("metadata v1 count "+itoa(uint64(n)), func(t *testing.T) {
			c := dial(t, s, "x")
			before := counterValue(t, badMalformed)
			c.write(frame(binary.BigEndian.AppendUint32(header(keyMetadata, 1, false), n)))
			if int32(n) > 0 {
				c.expectClosed()
				if d := counterValue(t, badMalformed) - before; d != 1 {
					t.Fatalf("malformed %v, want 1", d)
				}
				return
			}
			// Negative: null, all topics; this broker has none.
			var md kmsg.MetadataResponse
			md.Version = 1
			if err := md.ReadFrom(c.readResponse(9, false)); err != nil || len(md.Topics) != 0 || len(md.Brokers) != 1 {
				t.Fatalf("answer %+v, %v", md, err)
			}
		})
	}
	// Metadata v12: a compact array, uvarint count+1.
	for _, n := range []uint64{1<<31 + 1, 1 << 32, 1<<63 + 1} {
		t.Run("metadata v12 count "+itoa(n), func(t *testing.T) {
			c := dial(t, s, "x")
			before := counterValue(t, badMalformed)
			body := binary.AppendUvarint(header(keyMetadata, 12, true), n)
			c.write(frame(append(body, 0, 0, 0)))
			c.expectClosed()
			if d := counterValue(t, badMalformed) - before; d != 1 {
				t.Fatalf("malformed %v, want 1", d)
			}
		})
	}
	// PushTelemetry: metrics bytes announcing 2^31 bytes.
	t.Run("push metrics length 2^31", func(t *testing.T) {
		c := dial(t, s, "x")
		before := counterValue(t, badMalformed)
		body := header(keyPushTelemetry, 0, true)
		body = append(body, make([]byte, 16+4+1+1)...) // instance id, subscription id, terminating, codec
		body = binary.AppendUvarint(body, 1<<31+1)
		c.write(frame(append(body, 1, 2, 3, 0)))
		c.expectClosed()
		if d := counterValue(t, badMalformed) - before; d != 1 {
			t.Fatalf("malformed %v, want 1", d)
		}
	})
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
