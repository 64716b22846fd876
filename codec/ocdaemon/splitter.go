package ocdaemon

import (
	"bytes"

	"github.com/otlpgate/otlpgate/pool"
)

// Reason says why the Splitter discarded a message.
type Reason uint8

const (
	// ReasonTruncated: the client stopped writing a message part-way (its send deadline passed)
	// and the next message began inside the declared payload, or the stream ended inside a
	// message.
	ReasonTruncated Reason = iota
	// ReasonUndecodable: the owner rejected the frame because its payload did not decode.
	ReasonUndecodable
	// ReasonTooLarge: the header declared a payload longer than the limit.
	ReasonTooLarge
	// ReasonNoMemory: the message did not arrive in one read and the Budget refused the
	// memory to keep its start until the rest arrives; the rest is skipped as it arrives.
	ReasonNoMemory
	// NumReasons is the number of reasons, for arrays indexed by Reason.
	NumReasons
)

// String returns the reason as used in metric labels. Safe for concurrent use.
func (r Reason) String() string {
	switch r {
	case ReasonTruncated:
		return "truncated"
	case ReasonUndecodable:
		return "undecodable"
	case ReasonTooLarge:
		return "too_large"
	case ReasonNoMemory:
		return "intake_limit"
	}
	return "unknown"
}

// Frame is one message cut from the stream.
type Frame struct {
	Header
	// HeaderLen is the encoded length of the header.
	HeaderLen int
	// Payload holds Header.Len bytes. It points into the bytes given to Feed or into the
	// Splitter's carry buffer: valid until the next call to Next, Feed or Close; copy to retain.
	Payload []byte
}

// Budget grants the memory of carry buffers, which many connections may hold at once. Both
// methods are called by the Splitter's owner and must be safe for concurrent use across
// Splitters.
type Budget interface {
	// TryReserve reports whether n more bytes may be held; it must not block.
	TryReserve(n int) bool
	// Unreserve gives back n bytes reserved before.
	Unreserve(n int)
}

// Splitter cuts a byte stream into frames by the header's length field.
//
// Use: Feed the bytes of one read, then call Next until it returns false; handle each frame
// before the next call. After Next returns false the Splitter holds no reference to the fed
// bytes: what belongs to an incomplete frame was copied into its carry buffer.
//
// A frame that lies wholly inside the fed bytes is returned without copying. Recovery from
// truncated messages, which the client produces whenever its 5 ms send deadline cuts a write:
//   - TRACE_EXPORT payloads are JSON, which never contains a zero byte, while every header
//     starts with four: a zero byte inside such a payload marks the start of the next message.
//     The fragment is discarded as soon as the zero byte arrives, without waiting for the
//     declared length (which may never come).
//   - Binary payloads may contain zeros, so they are framed by length; when the owner cannot
//     decode one it calls Reject and the Splitter resumes at the next valid header after the
//     rejected header's first byte, which finds a message that began inside the bogus payload.
//   - Bytes that do not start a valid header are skipped.
//
// A Splitter is owned by one goroutine.
type Splitter struct {
	// Discard, when not nil, is called once for every discarded message.
	Discard func(Reason)
	// Skip, when not nil, is called with the number of bytes skipped while looking for a header.
	Skip func(n int)
	// Budget, when not nil, is asked before the carry buffer is taken or grown (for its whole
	// capacity) and told when it is given back. A refusal discards the incomplete message as
	// ReasonNoMemory; its remaining bytes are skipped as they arrive.
	Budget Budget

	max uint64

	in    []byte
	inPos int

	// carry holds the start of an incomplete frame (or unparsed bytes) across Feed calls;
	// (*carry)[cstart:] are the live bytes. nil when empty.
	carry  *[]byte
	cstart int
	// reserved is what the Budget granted for the carry: its capacity, or 0 without a Budget.
	reserved int
	// drop counts the bytes still to come of a message discarded for want of memory.
	drop int

	// State of the frame at the front of the window.
	hdr     Header
	hlen    int
	haveHdr bool
	// scanned counts the TRACE_EXPORT payload bytes already checked for a zero byte.
	scanned int

	// pending is the length of the frame last returned by Next, dropped on the next call.
	pending  int
	rejected bool

	// consumed counts the stream bytes dropped from the front of the window (frames handled,
	// messages discarded, bytes skipped): the stream offset of the window's first byte.
	consumed uint64
}

// NewSplitter returns a Splitter that rejects payloads longer than maxPayload bytes. Safe for
// concurrent use.
func NewSplitter(maxPayload int) *Splitter {
	s := &Splitter{}
	s.Init(maxPayload)
	return s
}

// Init prepares s for a new stream with the payload limit maxPayload, dropping any state. Like
// every Splitter method, it must be called by the Splitter's owner only.
func (s *Splitter) Init(maxPayload int) {
	s.releaseCarry()
	d, k, b := s.Discard, s.Skip, s.Budget
	*s = Splitter{Discard: d, Skip: k, Budget: b, max: uint64(maxPayload)}
}

// Feed hands the Splitter the next bytes of the stream. in must stay unmodified until Next
// returns false. Owner only.
func (s *Splitter) Feed(in []byte) {
	s.in = in
	s.inPos = 0
}

// Buffered returns the number of bytes held in the carry buffer. Owner only.
func (s *Splitter) Buffered() int {
	if s.carry == nil {
		return 0
	}
	return len(*s.carry) - s.cstart
}

// Pos returns, once Next has returned false, the stream offset of the first byte not yet
// consumed: with Buffered() > 0, the start of the incomplete message (or header) held in the
// carry buffer. An owner that sees the same Pos across reads knows the same message is still
// incomplete, which is how a read timeout tells a message trickling in from a stream of
// messages that merely straddle reads. Owner only.
func (s *Splitter) Pos() uint64 {
	return s.consumed
}

// Reject marks the frame last returned by Next as undecodable. The next call to Next discards
// it and resynchronises from the byte after its first. Owner only.
func (s *Splitter) Reject() {
	if s.pending > 0 {
		s.rejected = true
	}
}

// Close ends the stream: a partial message still buffered is discarded as truncated, and the
// carry buffer goes back to its pool. The Splitter may then be re-used after Init. Owner only.
func (s *Splitter) Close() {
	s.finishPending()
	if w := s.window(); len(w) > 0 {
		if s.haveHdr || (len(w) > somLen && bytes.Equal(w[:somLen], []byte{0, 0, 0, 0})) {
			s.discard(ReasonTruncated)
		} else {
			s.skip(len(w))
		}
	}
	s.releaseCarry()
	s.in, s.inPos, s.haveHdr, s.scanned, s.drop = nil, 0, false, 0, 0
}

// Next stores the next complete frame in f and reports whether there was one. It returns false
// when the fed bytes are exhausted; the rest of an incomplete frame is then awaited. Owner
// only.
func (s *Splitter) Next(f *Frame) bool {
	s.finishPending()
	for {
		w := s.window()
		if len(w) == 0 {
			return false
		}
		if s.drop > 0 {
			k := min(len(w), s.drop)
			s.drop -= k
			s.advance(k)
			continue
		}
		if !s.haveHdr {
			if p := candidate(w); p > 0 {
				s.skip(p)
				continue
			}
			n, st := parseHeader(w, s.max, &s.hdr)
			switch st {
			case headerShort:
				if !s.more(len(w), MaxHeaderLen) {
					return false
				}
				continue
			case headerInvalid:
				s.skip(1)
				continue
			case headerTooLarge:
				// The payload is not buffered: it is skipped as garbage by the resync scan.
				s.discard(ReasonTooLarge)
				s.skip(1)
				continue
			}
			s.hlen, s.haveHdr, s.scanned = n, true, 0
		}
		total := s.hlen + int(s.hdr.Len)
		if s.hdr.Type == TraceExport {
			from, to := s.hlen+s.scanned, min(len(w), total)
			if from < to {
				if k := bytes.IndexByte(w[from:to], 0); k >= 0 {
					s.discard(ReasonTruncated)
					s.advance(from + k)
					continue
				}
				s.scanned = to - s.hlen
			}
		}
		if len(w) >= total {
			f.Header = s.hdr
			f.HeaderLen = s.hlen
			f.Payload = w[s.hlen:total:total]
			s.pending = total
			return true
		}
		if !s.more(len(w), total) {
			return false
		}
	}
}

// finishPending drops the frame last returned by Next, or on Reject its first byte only.
func (s *Splitter) finishPending() {
	if s.pending == 0 {
		return
	}
	if s.rejected {
		s.discard(ReasonUndecodable)
		s.advance(1)
	} else {
		s.advance(s.pending)
	}
	s.pending, s.rejected = 0, false
}

// window returns the unconsumed bytes at the front of the stream: the carry while it holds
// anything, else the rest of the fed bytes.
func (s *Splitter) window() []byte {
	if s.carry != nil {
		return (*s.carry)[s.cstart:]
	}
	return s.in[s.inPos:]
}

// advance drops n bytes from the front of the window.
func (s *Splitter) advance(n int) {
	s.haveHdr, s.scanned = false, 0
	s.consumed += uint64(n)
	if s.carry == nil {
		s.inPos += n
		return
	}
	s.cstart += n
	if s.cstart >= len(*s.carry) {
		s.releaseCarry()
	}
}

// more grows the window, which holds have bytes, towards want bytes. It reports whether the
// window changed; false means the fed bytes are exhausted (and copied into the carry). When
// the Budget refuses the carry, the incomplete message is discarded and the window moves on.
func (s *Splitter) more(have, want int) bool {
	rest := s.in[s.inPos:]
	if s.carry == nil {
		// The window is the rest of the fed bytes and too short: keep it for the next Feed.
		if len(rest) > 0 {
			b := pool.GetBytes(len(rest))
			if !s.reserve(cap(*b)) {
				pool.PutBytes(b)
				s.noMemory(have)
				return true
			}
			s.carry, s.reserved = b, s.reservedFor(b)
			*s.carry = append((*s.carry)[:0], rest...)
			s.cstart = 0
			s.inPos = len(s.in)
		}
		return false
	}
	n := min(want-have, len(rest))
	if n <= 0 {
		return false
	}
	b := *s.carry
	if cap(b)-len(b) < n {
		live := len(b) - s.cstart
		if cap(b)-live >= n {
			b = b[:copy(b, b[s.cstart:])]
		} else {
			// Grow geometrically, but never past the message: a client that announces a large
			// message and trickles it holds memory in proportion to what it sent.
			nb := pool.GetBytes(max(live+n, min(2*cap(b), want)))
			if !s.reserve(cap(*nb) - cap(b)) {
				pool.PutBytes(nb)
				s.noMemory(have)
				return true
			}
			*nb = append((*nb)[:0], b[s.cstart:]...)
			pool.PutBytes(s.carry)
			s.carry, s.reserved = nb, s.reservedFor(nb)
			b = *nb
		}
		s.cstart = 0
	}
	*s.carry = append(b, rest[:n]...)
	s.inPos += n
	return true
}

// reserve asks the Budget for n more bytes.
func (s *Splitter) reserve(n int) bool {
	return s.Budget == nil || n <= 0 || s.Budget.TryReserve(n)
}

// reservedFor is what the Budget holds for carry buffer b.
func (s *Splitter) reservedFor(b *[]byte) int {
	if s.Budget == nil {
		return 0
	}
	return cap(*b)
}

// noMemory discards the incomplete message at the front of the window, which holds have
// bytes, when the Budget refused to carry it: the bytes at hand are dropped, and with a known
// header the rest of the message is skipped as it arrives. A partial header is skipped like
// garbage, and the resync finds the next message.
func (s *Splitter) noMemory(have int) {
	if !s.haveHdr {
		s.skip(have)
		return
	}
	s.discard(ReasonNoMemory)
	s.drop = s.hlen + int(s.hdr.Len) - have
	s.advance(have)
}

func (s *Splitter) skip(n int) {
	if s.Skip != nil {
		s.Skip(n)
	}
	s.advance(n)
}

func (s *Splitter) discard(r Reason) {
	if s.Discard != nil {
		s.Discard(r)
	}
}

func (s *Splitter) releaseCarry() {
	if s.carry != nil {
		pool.PutBytes(s.carry)
		if s.reserved > 0 {
			s.Budget.Unreserve(s.reserved)
		}
		s.carry, s.cstart, s.reserved = nil, 0, 0
	}
}

// candidate returns the offset of the first position in w that may start a header: four zero
// bytes, or a run of zeros reaching the end of w. It returns len(w) when there is none.
func candidate(w []byte) int {
	for i := 0; i < len(w); {
		k := bytes.IndexByte(w[i:], 0)
		if k < 0 {
			return len(w)
		}
		p := i + k
		j := p + 1
		for j < len(w) && j < p+somLen && w[j] == 0 {
			j++
		}
		if j == p+somLen || j == len(w) {
			return p
		}
		i = j
	}
	return len(w)
}
