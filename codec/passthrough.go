package codec

// A pass-through batch (fastpath/passthrough.go) is already compressed: the concatenated gzip
// members, or zstd frames behind an empty skippable frame, of requests that arrived so. The
// gzip and zstd writers send such a message as it is, and compress anything else. They can
// tell the two apart by the first byte alone: gRPC hands them only encoded protobuf messages,
// and no protobuf message begins with 0x1f (gzip's first byte: field 3, wire type 7) or 0x57
// (a zstd skippable frame's: field 10, wire type 7), wire type 7 not existing. A zstd frame's
// own magic, 0x28, is a valid field 5 varint: that is why a zstd batch begins with a skippable
// frame.

// Magic first bytes of a message the writers pass through.
const (
	gzipFirst = 0x1f
	zstdFirst = 0x57
)

// passMode is what a writer does with one message, decided on its first byte.
type passMode uint8

const (
	modeUndecided passMode = iota
	modeEncode             // a protobuf message: compress it
	modeRaw                // already compressed: copy it
)

// decide sets the mode from the message's first bytes p, unless it is set.
func (m *passMode) decide(p []byte, magic byte) {
	if *m == modeUndecided && len(p) > 0 {
		*m = modeEncode
		if p[0] == magic {
			*m = modeRaw
		}
	}
}
