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
// DepthFull scan each on its own, and returns dst with what it kept and dropped. Unknown
// top-level fields are left out: once entries of several requests are concatenated they would
// mean nothing. It returns an error, and dst unchanged, when the top level itself does not hold
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
	for rest := req; len(rest) > 0; {
		num, typ, n, err := consumeTag(rest)
		if err != nil {
			return dst[:start], Entries{}, err
		}
		var m int
		if num == 1 && typ == protowire.BytesType {
			_, m, err = consumeLen(rest[n:])
		} else if num == 1 {
			err = ErrWireType
		} else {
			m, err = skipValue(rest[n:], typ)
		}
		if err != nil {
			return dst[:start], Entries{}, err
		}
		field := rest[:n+m]
		rest = rest[n+m:]
		if num != 1 {
			continue
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
	return dst, e, nil
}
