package ocdaemon

import (
	"encoding/binary"
	"errors"
	"math"
)

var (
	errShort    = errors.New("ocdaemon: payload ends inside a field")
	errVarint   = errors.New("ocdaemon: malformed uvarint")
	errTrailing = errors.New("ocdaemon: trailing bytes after the payload")
	errCount    = errors.New("ocdaemon: item count exceeds the payload")
)

// reader decodes payload fields with a sticky error: after the first failure every method
// returns a zero value, and err is checked once at the end.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.off = len(r.b)
}

func (r *reader) byte() byte {
	if r.off >= len(r.b) {
		r.fail(errShort)
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	x, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		if n == 0 {
			r.fail(errShort)
		} else {
			r.fail(errVarint)
		}
		return 0
	}
	r.off += n
	return x
}

// count reads an item count and checks it against the bytes left: every item takes at least
// minItemLen bytes, so a larger count is corrupt and must not size an allocation.
func (r *reader) count(minItemLen int) int {
	n := r.uvarint()
	if r.err != nil {
		return 0
	}
	if n > uint64(len(r.b)-r.off)/uint64(minItemLen) {
		r.fail(errCount)
		return 0
	}
	return int(n)
}

func (r *reader) float64() float64 {
	if r.off+8 > len(r.b) {
		r.fail(errShort)
		return 0
	}
	v := math.Float64frombits(binary.BigEndian.Uint64(r.b[r.off:]))
	r.off += 8
	return v
}

// bytes reads a length-prefixed string; the result points into the payload.
func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail(errShort)
		return nil
	}
	s := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return s
}

// done returns the sticky error, or errTrailing when bytes are left over: a payload that does
// not end where its length says is as suspect as one that ends early.
func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	if r.off != len(r.b) {
		return errTrailing
	}
	return nil
}
