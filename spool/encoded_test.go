package spool

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/otlpgate/otlpgate/pool"
)

// encodedOf is how record i is appended by TestEncodedRoundTrip: its encoding (0: plain, for
// multiples of 3), the inflated length it claims, and its meta (every other record).
func encodedOf(i int) (enc uint8, plain uint32, meta []byte) {
	if i%3 != 0 {
		enc, plain = uint8(i%3), uint32(7000+i)
	}
	if i%2 == 1 {
		meta = fmt.Appendf(nil, "tenant-%d", i%5)
	}
	return enc, plain, meta
}

// readEncoded reads every readable record of r, checking each against encodedOf (records
// below plainFrom were appended plain, without meta), and finishes it.
func readEncoded(t *testing.T, r *Reader, plainFrom int) []int {
	t.Helper()
	buf := pool.GetBytes(pool.MinSize)
	defer pool.PutBytes(buf)
	var ids []int
	for range 100000 {
		*buf = (*buf)[:0]
		e, err := r.Next(buf)
		if errors.Is(err, ErrEmpty) {
			return ids
		}
		if err != nil {
			t.Fatal(err)
		}
		id := idOf(t, *buf) // the bytes alone: encoding and meta were cut off the end
		enc, plain, meta := encodedOf(id)
		if id < plainFrom {
			enc, plain, meta = 0, 0, nil
		}
		if enc == 0 {
			plain = 100
		}
		if e.Size != 100 || len(*buf) != 100 || e.Items != uint32(id) || e.Encoding != enc || e.Plain != int(plain) || !bytes.Equal(e.Meta, meta) {
			t.Fatalf("record %d: entry %+v, want encoding %d, plain %d, meta %q", id, e, enc, plain, meta)
		}
		ids = append(ids, id)
		r.Finish(e.Pos)
	}
	t.Fatal("reader never caught up")
	return nil
}

// Compressed records keep their bytes, encoding, inflated length and meta through the spool:
// read from the tail of recent appends, from the segment files, and after a kill -9; segments
// written before (version 1 and 2) are read beside them.
func TestEncodedRoundTrip(t *testing.T) {
	for _, tail := range []int64{0, 1 << 20} {
		t.Run(fmt.Sprint("tail=", tail), func(t *testing.T) {
			fs := NewCrashFS()
			old := testConfig(SyncAlways)
			old.TailBytes = tail
			s := mustOpen(t, old, fs, "a")
			appendN(t, s, 0, 4) // version 1
			old.Meta = true
			s = mustReopen(t, s, old, fs, "a")
			appendN(t, s, 4, 8) // version 2, records without meta

			cfg := old
			cfg.Encoded = true
			s = mustReopen(t, s, cfg, fs, "a")
			for i := 8; i < 40; i++ {
				enc, plain, meta := encodedOf(i)
				if _, err := s.Append(Record{Signal: uint8(i % 3), Items: uint32(i), Meta: meta, Encoding: enc, Plain: plain, Payload: payload(i)}); err != nil {
					t.Fatal(err)
				}
			}
			if ids := readEncoded(t, reader(t, s, "a"), 8); !slices.Equal(ids, seq(0, 40)) {
				t.Fatalf("read %v", ids)
			}
			abandon(s)
			fs.Crash()
			s = mustOpen(t, cfg, fs, "a")
			defer s.Close()
			if ids := readEncoded(t, reader(t, s, "a"), 8); !slices.Equal(ids, seq(0, 40)) {
				t.Fatalf("after a crash, read %v", ids)
			}
		})
	}
}

// A frame whose encoding byte is 0, or too short to hold its encoding, is corrupt even with
// a good CRC; a spool that was not opened for compressed records refuses them.
func TestEncodedFrameChecks(t *testing.T) {
	for name, mangle := range map[string]func([]byte) []byte{
		"encoding 0": func(b []byte) []byte { b[len(b)-1] = 0; return b },
		"too short": func(b []byte) []byte {
			b = b[:frameSize+3]
			b[4], b[5], b[6], b[7] = 3, 0, 0, 0
			return b
		},
	} {
		bad := mangle(appendRecordFrame(nil, 0, 1, nil, 1, 500, nil, payload(1)))
		crc := frameCRC(bad[:frameSize], bad[frameSize:])
		bad[0], bad[1], bad[2], bad[3] = byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24)
		buf := pool.GetBytes(pool.MinSize)
		if _, err := readFrame(bytes.NewReader(bad), 0, int64(len(bad)), buf); !errors.Is(err, errBadFrame) {
			t.Errorf("%s: %v", name, err)
		}
		pool.PutBytes(buf)
	}
	s := mustOpen(t, testConfig(SyncAlways), NewCrashFS(), "a")
	defer s.Close()
	defer func() {
		if recover() == nil {
			t.Error("a compressed record was appended to a spool without Config.Encoded")
		}
	}()
	s.Append(Record{Items: 1, Encoding: 1, Plain: 100, Payload: payload(0)})
}
