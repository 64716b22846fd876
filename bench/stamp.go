package bench

import (
	"bytes"
	"encoding/binary"
	"strconv"
)

// The load generator measures end-to-end latency without decoding anything. Its batch templates
// come from otlpgen with a fixed start time; the first span's start_time_unix_nano (tag 0x39:
// field 7, fixed64) is found once per template and overwritten with the send time, tagged with a
// magic bit, just before each send. The sink finds the stamps by that bit pattern; a proxy that
// concatenates requests into one batch carries every stamp along.

// A stamp is 0xB3C7 in its top 16 bits (two bytes no ASCII string and no generated id or time
// contains) and the send time in microseconds, modulo 2^48 (8.9 years), below.
const (
	stampMagic = uint64(0xB3C7) << 48
	stampMask  = uint64(1)<<48 - 1
)

// stampTag is the tag byte of Span.start_time_unix_nano (field 7, wire type fixed64).
const stampTag = 0x39

// StampOffset finds the offset of the first span's start time value in a generated batch, -1
// when there is none.
func StampOffset(b []byte, start uint64) int {
	var want [9]byte
	want[0] = stampTag
	binary.LittleEndian.PutUint64(want[1:], start)
	i := bytes.Index(b, want[:])
	if i < 0 {
		return -1
	}
	return i + 1
}

// Stamp writes the send time (unix nanoseconds) at off.
func Stamp(b []byte, off int, nowNanos int64) {
	binary.LittleEndian.PutUint64(b[off:], uint64(nowNanos/1000)&stampMask|stampMagic)
}

// since is the time from a stamp to nowNanos.
func since(stamp uint64, nowNanos int64) int64 {
	return int64((uint64(nowNanos/1000)-stamp)&stampMask) * 1000
}

// stamps returns every stamp in b.
func stamps(b []byte) []uint64 {
	var out []uint64
	for i := 0; i+9 <= len(b); {
		j := bytes.IndexByte(b[i:], stampTag)
		if j < 0 || i+j+9 > len(b) {
			break
		}
		v := binary.LittleEndian.Uint64(b[i+j+1:])
		if v&^stampMask == stampMagic {
			out = append(out, v&stampMask)
			i += j + 9
			continue
		}
		i += j + 1
	}
	return out
}

// In OTLP/JSON the start time is a decimal string. Every stamp has exactly stampDigits decimal
// digits (the magic puts it between 1.29e19 and 1.30e19), so a JSON template is built with the
// first span's start time set to stampMagic, found once as that text, and overwritten in place
// with the same number of digits; the proxy turns it into the fixed64 the sink looks for.
const stampDigits = 20

// StampOffsetJSON finds the offset of the first span's start time digits in a JSON batch whose
// first span starts at stampMagic, -1 when there is none.
func StampOffsetJSON(b []byte) int {
	want := strconv.AppendUint([]byte(`"startTimeUnixNano":"`), stampMagic, 10)
	i := bytes.Index(b, want)
	if i < 0 {
		return -1
	}
	return i + len(want) - stampDigits
}

// StampJSON writes the send time (unix nanoseconds) at off as stampDigits decimal digits.
func StampJSON(b []byte, off int, nowNanos int64) {
	v := uint64(nowNanos/1000)&stampMask | stampMagic
	for i := off + stampDigits - 1; i >= off; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
}
