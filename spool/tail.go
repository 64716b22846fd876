package spool

import (
	"encoding/binary"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The tail is an in-memory copy of the newest records of the active segment, framed exactly as
// on disk. Append builds each frame in it (the frame has to be built somewhere before it is
// written), and a reader that has caught up copies the record from it instead of reading the
// file back: no pread, no second checksum over bytes this process framed itself. A reader
// behind the tail reads the file as before. The tail is bounded by Config.TailBytes and reused
// from the start when a record does not fit, so it adds that much memory and no more.

var (
	tailReads = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "otlpgate_spool_reads_total",
		Help: "Records destinations read from the spool, by source (memory: from the tail of recent appends, -spool.tail-bytes; disk: read back from the segment file).",
	}, []string{"source"})
	readsMemory = tailReads.WithLabelValues("memory")
	readsDisk   = tailReads.WithLabelValues("disk")
)

// tail holds the bytes [off, off+len(buf)) of segment seq. Guarded by Spool.mu.
type tail struct {
	buf []byte
	seq uint64
	off int64
}

// frameBufLocked returns the buffer the frame of an n-byte record at (seq, off) is to be
// appended to, and whether it is the tail. The tail is used when it can hold the frame; it
// restarts empty when the frame does not follow its last one or would not fit.
func (s *Spool) frameBufLocked(seq uint64, off, n int64) ([]byte, bool) {
	t := &s.mu.tail
	if !s.tailTakesLocked(n) && s.mu.unflushed > 0 {
		panic("BUG: spool: the tail is reused before it was written")
	}
	if n > int64(cap(t.buf)) {
		// Too large to keep: the tail starts again after it.
		t.buf, t.seq, t.off = t.buf[:0], seq, off+n
		return (*s.wbuf)[:0], false
	}
	if t.seq != seq || t.off+int64(len(t.buf)) != off || int64(len(t.buf))+n > int64(cap(t.buf)) {
		t.buf, t.seq, t.off = t.buf[:0], seq, off
	}
	return t.buf, true
}

// readTail copies the record at p, which must be below limit, from the tail into *buf when the
// tail holds it, as readFrame would from the file.
func (s *Spool) readTail(p, limit Pos, buf *[]byte) (frame, bool) {
	if p >= limit {
		return frame{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &s.mu.tail
	if p.Segment() != t.seq || p.Offset() < t.off || p.Offset()+frameSize > t.off+int64(len(t.buf)) {
		return frame{}, false
	}
	h := t.buf[p.Offset()-t.off:]
	fr := frame{
		length: binary.LittleEndian.Uint32(h[4:]),
		items:  binary.LittleEndian.Uint32(h[8:]),
		signal: h[12],
		flags:  h[13],
	}
	if int64(frameSize)+int64(fr.length) > int64(len(h)) {
		panic("BUG: spool: a record in the tail runs past its end")
	}
	start := len(*buf)
	growBuf(buf, int(fr.length))
	copy((*buf)[start:], h[frameSize:frameSize+int(fr.length)])
	return fr, true
}

// tailTakesLocked reports whether a frame of n bytes at the end of the active segment would
// join the tail rather than restart it.
func (s *Spool) tailTakesLocked(n int64) bool {
	t := &s.mu.tail
	return s.mu.active != nil && t.seq == s.mu.active.seq && t.off+int64(len(t.buf)) == s.mu.off &&
		int64(len(t.buf))+n <= int64(cap(t.buf))
}

// flushLocked writes the frames the tail holds that are not yet written, all in one write.
// When the write fails, those appends have failed: the segment is cut back to where they
// began (sealed if even that fails) and their waiters are answered with the error.
func (s *Spool) flushLocked() error {
	u := s.mu.unflushed
	if u == 0 {
		return nil
	}
	s.mu.unflushed = 0
	ref, t := s.mu.active, &s.mu.tail
	from := s.mu.off - u
	if ref == nil || t.seq != ref.seq || from < t.off || s.mu.off != t.off+int64(len(t.buf)) {
		panic("BUG: spool: unwritten bytes outside the tail")
	}
	_, err := ref.f.WriteAt(t.buf[from-t.off:], from)
	if err == nil {
		return nil
	}
	t.buf = t.buf[:from-t.off]
	if terr := ref.f.Truncate(from); terr != nil {
		s.mu.broken = true
	}
	s.mu.off = from
	s.mu.bytes -= u
	curBytes.Store(s.mu.bytes)
	s.mu.segs[len(s.mu.segs)-1].size = from
	s.mu.written = makePos(ref.seq, from)
	cut := s.mu.written
	keep := s.mu.waiters[:0]
	for _, w := range s.mu.waiters {
		if w.pos >= cut {
			appendErrIO.Inc()
			w.ch <- err
			continue
		}
		keep = append(keep, w)
	}
	clear(s.mu.waiters[len(keep):])
	s.mu.waiters = keep
	return err
}
