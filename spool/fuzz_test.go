package spool

import (
	"bytes"
	"testing"
)

// segmentBytes builds a real segment of records, as Append writes them.
func segmentBytes(n int) []byte {
	b := appendSegmentHeader(nil, 1)
	for i := range n {
		b = appendFrame(b, uint8(i%3), uint32(i), payload(i)[:10+i*7%90])
	}
	return b
}

// metaSegmentBytes builds a segment of version 2 whose odd records carry meta.
func metaSegmentBytes(n int) []byte {
	b := appendSegmentHeaderVersion(nil, 1, segmentVersionMeta)
	for i := range n {
		var meta []byte
		if i%2 == 1 {
			meta = []byte{1, 1, 13, 'x', '-', 's', 'c', 'o', 'p', 'e', '-', 'o', 'r', 'g', 'i', 'd', byte(i), 'a' + byte(i)}[:16+i%3]
		}
		b = appendMetaFrame(b, uint8(i%3), uint32(i), meta, payload(i)[:10+i*7%90])
	}
	return b
}

// encodedSegmentBytes builds a segment of version 3 whose records are plain, compressed, with
// meta, or both.
func encodedSegmentBytes(n int) []byte {
	b := appendSegmentHeaderVersion(nil, 1, segmentVersionEncoded)
	for i := range n {
		var meta []byte
		if i%2 == 1 {
			meta = []byte{1, 1, 13, 'x', '-', 's', 'c', 'o', 'p', 'e', '-', 'o', 'r', 'g', 'i', 'd', byte(i)}[:16+i%2]
		}
		enc := uint8(i % 3) // 0: plain
		b = appendRecordFrame(b, uint8(i%3), uint32(i), meta, enc, uint32(1000+i), nil, payload(i)[:10+i*7%90])
	}
	return b
}

// FuzzSegmentReader feeds arbitrary bytes to the segment scanner that start-up and readers
// use: it must terminate without panicking, every record it yields must re-frame to the exact
// bytes it was read from, and valid, skipped and tail bytes must add up to the segment.
func FuzzSegmentReader(f *testing.F) {
	f.Add(segmentBytes(5))
	torn := segmentBytes(4)
	f.Add(torn[:len(torn)-7])
	flipped := segmentBytes(6)
	flipped[headerSize+30] ^= 1
	f.Add(flipped)
	f.Add(appendSegmentHeader(nil, 1))
	f.Add(metaSegmentBytes(5))
	f.Add(encodedSegmentBytes(6))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < headerSize {
			return
		}
		r := bytes.NewReader(data)
		var valid int64
		res := scanSegment(r, int64(len(data)), func(off int64, fr frame, p []byte) {
			tl, ok := fr.trailer(p)
			if !ok {
				t.Fatalf("record at %d yielded with a bad meta or encoding", off)
			}
			framed := appendRecordFrame(nil, fr.signal, fr.items, tl.meta, tl.encoding, tl.plain, nil, p[:len(p)-tl.size])
			if !bytes.Equal(framed, data[off:off+int64(len(framed))]) {
				t.Fatalf("record at %d re-frames differently", off)
			}
			valid += int64(len(framed))
		})
		if res.end > int64(len(data)) || headerSize+valid+res.corruptBytes != res.end {
			t.Fatalf("end %d, valid %d + corrupt %d + header != end", res.end, valid, res.corruptBytes)
		}
	})
}

func TestScanRealSegment(t *testing.T) {
	for _, data := range [][]byte{segmentBytes(5), metaSegmentBytes(5), encodedSegmentBytes(5)} {
		res := scanSegment(bytes.NewReader(data), int64(len(data)), nil)
		if res.records != 5 || res.end != int64(len(data)) || res.corruptRecords != 0 {
			t.Fatalf("scan %+v of %d bytes", res, len(data))
		}
	}
}
