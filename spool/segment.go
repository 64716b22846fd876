package spool

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/otlpgate/otlpgate/pool"
)

// Segment files are named by their sequence number, zero-padded so that names sort in order.
const (
	segmentSuffix = ".seg"
	asideSuffix   = ".unreadable" // appended to a segment renamed aside at start-up
	seqDigits     = 20
)

func segmentName(seq uint64) string {
	return fmt.Sprintf("%0*d%s", seqDigits, seq, segmentSuffix)
}

// parseSegmentName returns the sequence number of a segment or set-aside segment file name.
func parseSegmentName(name string) (seq uint64, aside, ok bool) {
	if strings.HasSuffix(name, asideSuffix) {
		name = strings.TrimSuffix(name, asideSuffix)
		aside = true
	}
	digits, found := strings.CutSuffix(name, segmentSuffix)
	if !found || len(digits) != seqDigits {
		return 0, false, false
	}
	seq, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false, false
	}
	return seq, aside, true
}

// growBuf extends *buf by n bytes, moving it to a larger pooled buffer when its capacity is
// short. The new bytes are not cleared.
func growBuf(buf *[]byte, n int) {
	b := *buf
	if cap(b)-len(b) >= n {
		*buf = b[:len(b)+n]
		return
	}
	nb := pool.GetBytes(len(b) + n)
	*nb = append(*nb, b...)
	// Swap the arrays so that the caller keeps its pointer and nb carries the old array back
	// to the pool; taking the address of a local here would allocate on every call.
	*buf, *nb = (*nb)[:len(b)+n], b[:0]
	pool.PutBytes(nb)
}

// resyncWindow is how many bytes nextFrame examines per read while it hunts for a frame.
const resyncWindow = 64 << 10

// nextFrame returns the offset of the first valid record at or after from and before end, or
// end if there is none. It reads in pooled windows and verifies a candidate's CRC only when its
// header is plausible, so a long run of garbage costs one pass over it.
func nextFrame(f io.ReaderAt, from, end int64) int64 {
	win := pool.GetBytes(resyncWindow)
	defer pool.PutBytes(win)
	scratch := pool.GetBytes(pool.MinSize)
	defer func() { pool.PutBytes(scratch) }()
	for base := from; base+frameSize <= end; {
		n := min(int64(resyncWindow), end-base)
		w := (*win)[:n]
		if _, err := f.ReadAt(w, base); err != nil && err != io.EOF {
			return end
		}
		last := n - frameSize // last candidate whose header lies inside the window
		for i := int64(0); i <= last; i++ {
			off := base + i
			if _, _, ok := parseFrameHeader(w[i:i+frameSize], end-off-frameSize); !ok {
				continue
			}
			*scratch = (*scratch)[:0]
			if _, err := readFrame(f, off, end, scratch); err == nil {
				return off
			}
		}
		base += last + 1
	}
	return end
}

// scanResult sums up a scan of one segment.
type scanResult struct {
	records        int64
	end            int64 // end of the last valid record (headerSize if none)
	corruptRecords int64 // runs of bad bytes followed by a valid record
	corruptBytes   int64
}

// scanSegment walks the records of a segment of the given size from its header on. A run of bad
// bytes followed by a valid record is counted as corrupt and skipped; bad bytes running to the
// end of the segment are a torn tail, left out of end and not counted, for the caller to
// truncate or to count. visit, if not nil, sees each valid record; p is valid during the call.
func scanSegment(f io.ReaderAt, size int64, visit func(off int64, fr frame, p []byte)) scanResult {
	res := scanResult{end: headerSize}
	buf := pool.GetBytes(pool.MinSize)
	defer func() { pool.PutBytes(buf) }()
	off := int64(headerSize)
	for off < size {
		*buf = (*buf)[:0]
		fr, err := readFrame(f, off, size, buf)
		if err == nil {
			if visit != nil {
				visit(off, fr, *buf)
			}
			res.records++
			off += frameSize + int64(fr.length)
			res.end = off
			continue
		}
		next := nextFrame(f, off+1, size)
		if next >= size {
			break
		}
		res.corruptRecords++
		res.corruptBytes += next - off
		off = next
	}
	return res
}
