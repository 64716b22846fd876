package process

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/pool"
)

// The route splitter: what the router decides entry by entry (Route), applied to a whole
// request at admission (Split: its entries grouped into one piece per set of destinations,
// which the pipeline enqueues) and to a spooled record at each feeder (Filter: the entries of
// one destination). Entries are copied whole, never decoded below the Resource.

// Split groups the resource entries of req (of signal sig, in layout, holding items items) by
// the destinations among cand that take each (Route) into p, which the pipeline made for the
// request (pipeline.Pieces says what it holds). It walks the top level twice: once to route
// each entry (the piece of each is kept in a pooled scratch buffer, a byte an entry), and,
// when the entries do not all go one way, once more to copy them into their pieces, in a
// buffer p charges to the request's budget (Pieces.Grow). Counting items walks each entry
// down to its items: the largest piece is not walked, it holds what the others do not. An
// error (a malformed top level or entry, more than pipeline.MaxPieces routes, no budget)
// refuses the whole request. It implements pipeline.Router; it allocates nothing once the
// pools are warm. Safe for concurrent use; req is only read during the call.
func (r *Router) Split(p *pipeline.Pieces, sig fastpath.Signal, req []byte, items int, layout fastpath.Layout, cand uint64) error {
	if layout >= fastpath.NumLayouts {
		return fastpath.ErrLayout
	}
	const unrouted = 0xff
	scratch := pool.GetBytes(len(req)/2 + 1) // an entry takes two bytes at least
	defer pool.PutBytes(scratch)
	marks := (*scratch)[:0]
	defer func() { *scratch = marks[:0] }()
	var sizes [pipeline.MaxPieces]int
	it := fastpath.NewTopLevel(req)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		switch {
		case layout == fastpath.LayoutV1 && f.Num == 1, layout == fastpath.LayoutOTEP && f.Num == 2:
			if f.Type != protowire.BytesType {
				return fastpath.ErrWireType
			}
			entry := req[f.Value:f.End]
			route, err := r.Route(sig, entry, cand)
			if err != nil {
				return err
			}
			if route == 0 {
				n, err := r.Items(sig, entry)
				if err != nil {
					return err
				}
				p.Unrouted++
				p.Lost += n
				marks = append(marks, unrouted)
				continue
			}
			j := 0
			for j < p.N && p.P[j].Route != route {
				j++
			}
			if j == p.N {
				if p.N == pipeline.MaxPieces {
					return pipeline.ErrRoutes
				}
				p.P[j] = pipeline.Piece{Route: route}
				p.N++
			}
			sizes[j] += 1 + f.End - f.After // the v1 tag, the length as it came, the entry
			marks = append(marks, byte(j))
		case layout == fastpath.LayoutOTEP && f.Num == 1:
			if f.Type != protowire.VarintType {
				return fastpath.ErrWireType
			}
		default:
			p.Stripped.Fields++
			p.Stripped.Bytes += f.End - f.Tag
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	if p.N <= 1 && p.Unrouted == 0 {
		p.One, p.Stripped = true, fastpath.Stripped{} // AppendEntries strips and counts as it copies
		return nil
	}
	if p.N == 0 {
		return nil // nothing is taken
	}
	total, big := 0, 0
	for j := range p.N {
		p.P[j].Start, p.P[j].End = total, total
		total += sizes[j]
		if sizes[j] > sizes[big] {
			big = j
		}
	}
	out, err := p.Grow(total)
	if err != nil {
		return err
	}
	it, k := fastpath.NewTopLevel(req), 0
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		if !(layout == fastpath.LayoutV1 && f.Num == 1 || layout == fastpath.LayoutOTEP && f.Num == 2) {
			continue
		}
		j := marks[k]
		k++
		if j == unrouted {
			continue
		}
		pc := &p.P[j]
		out[pc.End] = fastpath.TagV1Entry
		pc.End += 1 + copy(out[pc.End+1:], req[f.After:f.End])
		if int(j) == big {
			continue
		}
		n, err := r.Items(sig, req[f.Value:f.End])
		if err != nil {
			return err
		}
		pc.Items += n
		items -= n
	}
	p.P[big].Items = max(items-p.Lost, 0)
	return nil
}

// Filter keeps, in place, the entries of rec (v1 resource entries of signal sig, as the
// spool's admission recorded them, holding items items) that destination dest takes among
// cand (the destinations that take the record's tenant), and returns them with the items they
// hold: items when it keeps every entry. The filter of destination 0 counts the entries no
// destination takes (a restart with other routes than the ones the record was admitted with)
// in otlpgate_route_unrouted_*. rec is overwritten. It implements pipeline.Router; it
// allocates nothing. Safe for concurrent use.
func (r *Router) Filter(sig fastpath.Signal, rec []byte, items, dest int, cand uint64) ([]byte, int, error) {
	if sig >= fastpath.NumSignals {
		return nil, 0, fastpath.ErrSignal
	}
	w, kept, all := 0, 0, true
	unrouted, lost := 0, 0
	it := fastpath.NewTopLevel(rec)
	for f, ok := it.Next(); ok; f, ok = it.Next() {
		if f.Num != 1 || f.Type != protowire.BytesType {
			return nil, 0, fastpath.ErrWireType // admission wrote only entries
		}
		entry := rec[f.Value:f.End]
		route, err := r.Route(sig, entry, cand)
		if err != nil {
			return nil, 0, err
		}
		if route&(1<<dest) == 0 {
			all = false
			if route == 0 && dest == 0 {
				n, _ := r.Items(sig, entry)
				unrouted++
				lost += n
			}
			continue
		}
		n, err := r.Items(sig, entry)
		if err != nil {
			return nil, 0, err
		}
		kept += n
		// The walker has read past this field: moving it down overwrites nothing unread.
		w += copy(rec[w:], rec[f.Tag:f.End])
	}
	if err := it.Err(); err != nil {
		return nil, 0, err
	}
	pipeline.CountUnrouted(sig, unrouted, lost)
	if all {
		return rec, items, nil
	}
	return rec[:w], kept, nil
}
