package spool

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/otlpgate/otlpgate/pool"
)

// metaOf is the meta record i carries: none for multiples of 3, else a few bytes naming it.
func metaOf(i int) []byte {
	if i%3 == 0 {
		return nil
	}
	return fmt.Appendf(nil, "tenant-%d", i%5)
}

// readMeta reads every readable record of r with its meta, finishing each.
func readMeta(t *testing.T, r *Reader) (ids []int, metas [][]byte) {
	t.Helper()
	buf := pool.GetBytes(pool.MinSize)
	defer pool.PutBytes(buf)
	for range 100000 {
		*buf = (*buf)[:0]
		e, err := r.Next(buf)
		if errors.Is(err, ErrEmpty) {
			return ids, metas
		}
		if err != nil {
			t.Fatal(err)
		}
		id := idOf(t, *buf) // the payload alone: the meta was cut off its end
		if e.Size != 100 || e.Items != uint32(id) {
			t.Fatalf("record %d: entry %+v", id, e)
		}
		ids = append(ids, id)
		metas = append(metas, bytes.Clone(e.Meta))
		r.Finish(e.Pos)
	}
	t.Fatal("reader never caught up")
	return nil, nil
}

// Records carry their meta through the spool, read from the tail of recent appends, from
// the segment files, and after a restart; a spool written before meta existed (version 1
// segments) is read by a spool that takes meta, its records without meta.
func TestMetaRoundTrip(t *testing.T) {
	for _, tail := range []int64{0, 1 << 20} {
		t.Run(fmt.Sprint("tail=", tail), func(t *testing.T) {
			fs := NewCrashFS()
			old := testConfig(SyncAlways)
			old.TailBytes = tail
			s := mustOpen(t, old, fs, "a")
			appendN(t, s, 0, 5) // an old spool: no meta, version 1

			cfg := old
			cfg.Meta = true
			s = mustReopen(t, s, cfg, fs, "a")
			for i := 5; i < 30; i++ {
				if _, err := s.Append(Record{Signal: uint8(i % 3), Items: uint32(i), Meta: metaOf(i), Payload: payload(i)}); err != nil {
					t.Fatal(err)
				}
			}
			check := func(ids []int, metas [][]byte, from int) {
				t.Helper()
				if !slices.Equal(ids, seq(from, 30)) {
					t.Fatalf("read %v", ids)
				}
				for j, id := range ids {
					want := metaOf(id)
					if id < 5 {
						want = nil
					}
					if !bytes.Equal(metas[j], want) {
						t.Fatalf("record %d: meta %q, want %q", id, metas[j], want)
					}
				}
			}
			ids, metas := readMeta(t, reader(t, s, "a"))
			check(ids, metas, 0)

			// A kill -9 before any checkpoint: the restart replays every record, meta and all,
			// from disk.
			abandon(s)
			fs.Crash()
			s = mustOpen(t, cfg, fs, "a")
			defer s.Close()
			ids, metas = readMeta(t, reader(t, s, "a"))
			check(ids, metas, 0)
		})
	}
}

// A spool with meta writes version 2 segments, and one with compressed records version 3, so
// that an otlpgate that cannot read them sets them aside instead of skipping their records as
// corrupt; without either it writes version 1. A spool that may take compressed records writes
// as before until it gets one: the first goes to a new segment of version 3, and so does what
// follows, plain or not.
func TestMetaSegmentVersion(t *testing.T) {
	version := func(fs *CrashFS, name string) uint32 {
		b, err := fs.ReadFile(testDir + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint32(b[4:])
	}
	for _, c := range []struct {
		meta, encoded bool
		want          uint32
	}{{false, false, segmentVersion}, {true, false, segmentVersionMeta}, {false, true, segmentVersion}, {true, true, segmentVersionMeta}} {
		fs := NewCrashFS()
		cfg := testConfig(SyncAlways)
		cfg.Meta, cfg.Encoded = c.meta, c.encoded
		s := mustOpen(t, cfg, fs, "a")
		appendN(t, s, 0, 1)
		names := segFiles(t, fs)
		if v := version(fs, names[0]); len(names) != 1 || v != c.want {
			t.Fatalf("meta=%v encoded=%v: segments %v, version %d, want one of %d", c.meta, c.encoded, names, v, c.want)
		}
		if c.encoded {
			if _, err := s.Append(Record{Signal: 1, Items: 1, Encoding: 1, Plain: 500, Payload: payload(1)}); err != nil {
				t.Fatal(err)
			}
			appendN(t, s, 2, 3)
			names = segFiles(t, fs)
			if len(names) != 2 || version(fs, names[1]) != segmentVersionEncoded {
				t.Fatalf("meta=%v: after a compressed record, segments %v, the last of version %d; want a second one of %d",
					c.meta, names, version(fs, names[len(names)-1]), segmentVersionEncoded)
			}
			if ids := drain(t, s.Reader("a"), true); !slices.Equal(ids, seq(0, 3)) {
				t.Fatalf("read %v", ids)
			}
		}
		s.Close()
	}
}

func TestMetaLimits(t *testing.T) {
	fs := NewCrashFS()
	cfg := testConfig(SyncAlways)
	cfg.Meta = true
	s := mustOpen(t, cfg, fs, "a")
	defer s.Close()
	if _, err := s.Append(Record{Items: 1, Meta: make([]byte, MaxMetaBytes+1), Payload: payload(0)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized meta: %v", err)
	}
	// A frame that claims meta longer than itself is corrupt, even with a good CRC.
	bad := appendMetaFrame(nil, 0, 1, []byte("m"), payload(1))
	binary.LittleEndian.PutUint16(bad[len(bad)-2:], 200)
	crc := frameCRC(bad[:frameSize], bad[frameSize:])
	binary.LittleEndian.PutUint32(bad, crc)
	buf := pool.GetBytes(pool.MinSize)
	defer pool.PutBytes(buf)
	if _, err := readFrame(bytes.NewReader(bad), 0, int64(len(bad)), buf); !errors.Is(err, errBadFrame) {
		t.Fatalf("meta past the record: %v", err)
	}
}
