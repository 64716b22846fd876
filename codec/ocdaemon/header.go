package ocdaemon

import (
	"encoding/binary"
	"math"
)

// Type is the message type byte of a frame.
type Type uint8

// Message types the PHP client sends.
const (
	ProcInit            Type = 0x01
	ProcShutdown        Type = 0x02
	ReqInit             Type = 0x03
	ReqShutdown         Type = 0x04
	TraceExport         Type = 0x14
	MeasureCreate       Type = 0x28
	ViewReportingPeriod Type = 0x29
	ViewRegister        Type = 0x2a
	ViewUnregister      Type = 0x2b
	StatsRecord         Type = 0x2c
)

// Valid reports whether t is a message type of the protocol. A header with any other type byte
// is not a header: the Splitter treats it as garbage and resynchronises. Safe for concurrent
// use, as are all functions of this file.
func (t Type) Valid() bool {
	switch t {
	case ProcInit, ProcShutdown, ReqInit, ReqShutdown, TraceExport,
		MeasureCreate, ViewReportingPeriod, ViewRegister, ViewUnregister, StatsRecord:
		return true
	}
	return false
}

// String returns the protocol's name of the type, as used in metric labels.
func (t Type) String() string {
	switch t {
	case ProcInit:
		return "proc_init"
	case ProcShutdown:
		return "proc_shutdown"
	case ReqInit:
		return "req_init"
	case ReqShutdown:
		return "req_shutdown"
	case TraceExport:
		return "trace_export"
	case MeasureCreate:
		return "measure_create"
	case ViewReportingPeriod:
		return "view_reporting_period"
	case ViewRegister:
		return "view_register"
	case ViewUnregister:
		return "view_unregister"
	case StatsRecord:
		return "stats_record"
	}
	return "unknown"
}

const (
	// somLen is the length of the start-of-message marker, four zero bytes.
	somLen = 4
	// MaxHeaderLen is the longest possible header: marker, type, three 10-byte uvarints, the
	// 8-byte time and a 10-byte length.
	MaxHeaderLen = somLen + 1 + 3*binary.MaxVarintLen64 + 8 + binary.MaxVarintLen64
	// maxTime bounds a plausible header time (Unix seconds, year 5138). Real clients send the
	// current time; the bound keeps resynchronisation from accepting random bytes as a header.
	maxTime = 1e11
	// maxPID bounds a plausible process id; pid 0 never sends.
	maxPID = 1<<32 - 1
)

// Header is the decoded fixed part of a frame.
type Header struct {
	Type Type
	// Seq is the client's message counter; it restarts at 1 with every PHP request on a
	// persistent connection.
	Seq uint64
	// PID and TID identify the PHP process and (under ZTS) thread.
	PID uint64
	TID uint64
	// Time is the client's clock when it sent the message, in Unix seconds.
	Time float64
	// Float32 is set when Time arrived as a float32 padded with zero bytes (32-bit PHP builds).
	Float32 bool
	// Len is the payload length declared by the header.
	Len uint64
}

// UnixNano returns Time in nanoseconds since the Unix epoch, rounded to the microsecond: the
// client reads its clock with microtime(), and a float64 near 1.8e9 s carries ~240 ns of noise
// below that. The parser has already rejected negative, NaN and implausibly large times.
func (h *Header) UnixNano() int64 {
	sec := math.Floor(h.Time)
	return int64(sec)*1e9 + int64(math.Round((h.Time-sec)*1e6))*1e3
}

// headerStatus is the outcome of parsing a header candidate.
type headerStatus uint8

const (
	headerOK headerStatus = iota
	// headerShort: the bytes so far are a valid prefix; more are needed to decide.
	headerShort
	// headerInvalid: the bytes are not a header.
	headerInvalid
	// headerTooLarge: a well-formed header whose length exceeds the limit.
	headerTooLarge
)

// parseHeader decodes the header at the start of b. It returns the header, its encoded length and
// a status. It never reads past len(b) and never allocates.
func parseHeader(b []byte, maxLen uint64, h *Header) (int, headerStatus) {
	n := len(b)
	for i := 0; i < somLen; i++ {
		if i >= n {
			return 0, headerShort
		}
		if b[i] != 0 {
			return 0, headerInvalid
		}
	}
	if n <= somLen {
		return 0, headerShort
	}
	h.Type = Type(b[somLen])
	if !h.Type.Valid() {
		return 0, headerInvalid
	}
	off := somLen + 1
	var st headerStatus
	if h.Seq, off, st = headerUvarint(b, off); st != headerOK {
		return 0, st
	}
	if h.PID, off, st = headerUvarint(b, off); st != headerOK {
		return 0, st
	}
	if h.Seq == 0 || h.PID == 0 || h.PID > maxPID {
		return 0, headerInvalid
	}
	if h.TID, off, st = headerUvarint(b, off); st != headerOK {
		return 0, st
	}
	if n < off+8 {
		return 0, headerShort
	}
	t := b[off : off+8]
	if t[0] == 0 && t[1] == 0 && t[6] == 0 && t[7] == 0 {
		// A float64 whose top 16 bits are zero is below 1e-300: no clock sends that, so this is
		// the 32-bit client's padded float32.
		h.Time = float64(math.Float32frombits(binary.BigEndian.Uint32(t[2:6])))
		h.Float32 = true
	} else {
		h.Time = math.Float64frombits(binary.BigEndian.Uint64(t))
		h.Float32 = false
	}
	if !(h.Time >= 0 && h.Time < maxTime) {
		return 0, headerInvalid
	}
	off += 8
	if h.Len, off, st = headerUvarint(b, off); st != headerOK {
		return 0, st
	}
	if h.Len > maxLen {
		return off, headerTooLarge
	}
	return off, headerOK
}

// headerUvarint decodes a uvarint at b[off:] without binary.Uvarint's ambiguity between "short"
// and "overflow".
func headerUvarint(b []byte, off int) (uint64, int, headerStatus) {
	var x uint64
	var s uint
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if off+i >= len(b) {
			return 0, off, headerShort
		}
		c := b[off+i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, off, headerInvalid
			}
			return x | uint64(c)<<s, off + i + 1, headerOK
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, off, headerInvalid
}

// AppendHeader appends the encoding of h to dst as the PHP client writes it: with h.Float32 the
// time is a float32 padded by two zero bytes on each side. h.Len must be the payload length.
func AppendHeader(dst []byte, h *Header) []byte {
	dst = append(dst, 0, 0, 0, 0, byte(h.Type))
	dst = binary.AppendUvarint(dst, h.Seq)
	dst = binary.AppendUvarint(dst, h.PID)
	dst = binary.AppendUvarint(dst, h.TID)
	if h.Float32 {
		dst = append(dst, 0, 0)
		dst = binary.BigEndian.AppendUint32(dst, math.Float32bits(float32(h.Time)))
		dst = append(dst, 0, 0)
	} else {
		dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(h.Time))
	}
	return binary.AppendUvarint(dst, h.Len)
}

// AppendFrame appends a whole frame: the header of h with Len set to len(payload), then payload.
func AppendFrame(dst []byte, h Header, payload []byte) []byte {
	h.Len = uint64(len(payload))
	dst = AppendHeader(dst, &h)
	return append(dst, payload...)
}
