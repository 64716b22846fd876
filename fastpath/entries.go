package fastpath

import "google.golang.org/protobuf/encoding/protowire"

// Entries is what AppendValidEntries kept and dropped.
type Entries struct {
	// Good is the number of resource entries kept, holding Items items.
	Good, Items int
	// Bad is the number of resource entries dropped; Rejected is the items they held, counted
	// as far as a DepthResource scan can count them (entries broken above their items count 0).
	Bad      int
	Rejected int64
}

// AppendValidEntries appends to dst the resource entries of the v1 request req that pass a
// DepthFull scan each on its own, and returns dst with what it kept and dropped. Other top-level
// fields are carried over: admission strips and counts them (Pipeline.Admit), as it does for
// every request. It returns an error, and dst unchanged, when the top level itself does not hold
// together, for then the entry boundaries cannot be trusted.
//
// An intake calls it when a request failed its scan, to keep what a client sent correctly and
// answer with OTLP's partial success instead of refusing everything. It does not allocate
// beyond growing dst. Safe for concurrent use.
func AppendValidEntries(dst []byte, sig Signal, req []byte) ([]byte, Entries, error) {
	if sig >= NumSignals {
		return dst, Entries{}, ErrSignal
	}
	var e Entries
	start := len(dst)
	it := NewTopLevel(req)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		field := req[f.Tag:f.End]
		if f.Num != 1 {
			dst = append(dst, field...)
			continue
		}
		if f.Type != protowire.BytesType {
			// An entry that is not length-delimited breaks the top level, as ScanRequest says.
			return dst[:start], Entries{}, ErrWireType
		}
		if sc, err := ScanRequest(sig, field, LayoutV1, DepthFull); err == nil {
			dst = append(dst, field...)
			e.Good++
			e.Items += sc.Items
			continue
		}
		e.Bad++
		if sc, err := ScanRequest(sig, field, LayoutV1, DepthResource); err == nil {
			e.Rejected += int64(sc.Items)
		}
	}
	if err := it.Err(); err != nil {
		return dst[:start], Entries{}, err
	}
	return dst, e, nil
}
