package spool

import "fmt"

// Pos is the position of a record: its segment's sequence number in the high 32 bits, its
// offset in the segment in the low 32 (segments are capped at 1 GiB). Positions grow with
// every append, so they order records across segments.
type Pos uint64

func makePos(seq uint64, off int64) Pos { return Pos(seq<<32 | uint64(off)) }

// Segment is the sequence number of the record's segment.
func (p Pos) Segment() uint64 { return uint64(p) >> 32 }

// Offset is the record's offset in its segment.
func (p Pos) Offset() int64 { return int64(uint32(p)) }

// String formats p as segment:offset.
func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Segment(), p.Offset()) }
