package process

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

var editedResources = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "otlpgate_process_edited_resources_total",
	Help: "Resources whose attributes -resource.set, -resource.delete or -resource.from-peer rewrote (a resource entry without a Resource gets one, counted too).",
}, []string{"signal"})

var editedC = func() (c [fastpath.NumSignals]prometheus.Counter) {
	for s := range c {
		c[s] = editedResources.WithLabelValues(fastpath.Signal(s).String())
	}
	return c
}()

func commitEdited(sig fastpath.Signal, t *Tally) {
	if t[tEdited] > 0 {
		editedC[sig].Add(float64(t[tEdited]))
	}
}

// maxResources bounds the Resource fields of one entry (protobuf merges repeats; encoders
// write one): their new lengths are planned in a fixed array.
const maxResources = 4

var errManyResources = errors.New("process: a resource entry carries more than 4 Resource fields")

// resourcePlan is what the first pass learned about an entry's Resource fields.
type resourcePlan struct {
	size   [maxResources]int // new payload length of each Resource field, in order
	n      int               // Resource fields seen
	insert bool              // the entry has no Resource: one holding the set attributes goes first
	edit   bool              // the Resource fields are rewritten
	delta  int               // how much the entry's payload grows by (may be negative)
	// peer is set when the first Resource gets the attribute of -resource.from-peer (and
	// every Resource loses the attributes of that key it had). The address's text is not
	// kept here but passed beside the plan: it lives on AppendEntry's stack, and a slice
	// stored through the plan's pointer would move it to the heap.
	peer bool
}

// encodeSet encodes attrs as Resource field-1 KeyValues with string values.
func encodeSet(attrs []Attr) []byte {
	var b []byte
	for _, a := range attrs {
		value := 1 + protowire.SizeVarint(uint64(len(a.Value))) + len(a.Value) // AnyValue.string_value
		kv := fieldSize(len(a.Key)) + fieldSize(value)
		b = appendHeader(b, 1, kv)
		b = appendHeader(b, 1, len(a.Key))
		b = append(b, a.Key...)
		b = appendHeader(b, 2, value)
		b = appendHeader(b, 1, len(a.Value))
		b = append(b, a.Value...)
	}
	return b
}

// keyValue returns the key and the AnyValue payload of the KeyValue kv (the last of each,
// as a decoder keeps them).
func keyValue(kv []byte) (key, value []byte, err error) {
	// Nearly every KeyValue is a key and a value with one-byte lengths, in field order
	// (protobuf-go, the SDKs) or in reverse (the Collector's pdata): read those two shapes
	// without walking.
	if len(kv) > 3 && kv[1] < 0x80 {
		if a := 2 + int(kv[1]); a+2 <= len(kv) && kv[a+1] < 0x80 && a+2+int(kv[a+1]) == len(kv) {
			switch {
			case kv[0] == 0x0a && kv[a] == 0x12:
				return kv[2:a], kv[a+2:], nil
			case kv[0] == 0x12 && kv[a] == 0x0a:
				return kv[a+2:], kv[2:a], nil
			}
		}
	}
	for off := 0; off < len(kv); {
		f, err := next(kv, off)
		if err != nil {
			return nil, nil, err
		}
		off = f.end
		if f.num != 1 && f.num != 2 {
			continue
		}
		if f.typ != protowire.BytesType {
			return nil, nil, errMalformed
		}
		if f.num == 1 {
			key = kv[f.val:f.end]
		} else {
			value = kv[f.val:f.end]
		}
	}
	return key, value, nil
}

// edited reports whether -resource.set or -resource.delete names key.
func (c *Chain) edited(key []byte) bool {
	for _, k := range c.editKeys {
		if string(key) == k {
			return true
		}
	}
	return false
}

// planResource walks the Resource fields of the entry e: it plans their rewrite and reports
// whether a -drop rule matches them. peer is the text of the client's address, nil when the
// request has none or no -resource.from-peer is given.
func (c *Chain) planResource(pl *resourcePlan, e, peer []byte) (drop bool, err error) {
	var seen uint64 // drop rules whose key was found: the first attribute of a key decides
	// What the Resource fields measure as they are, and the bytes of -resource.from-peer's
	// attributes in each: whether those go is known only once every field was read.
	var length, field, peerKV [maxResources]int
	found := false // a -resource.from-peer attribute with a value PeerInsert keeps
	for off := 0; off < len(e); {
		f, err := next(e, off)
		if err != nil {
			return false, err
		}
		off = f.end
		if f.num != 1 {
			continue
		}
		if f.typ != protowire.BytesType {
			return false, errMalformed
		}
		if pl.n == maxResources {
			return false, errManyResources
		}
		res := e[f.val:f.end]
		size := len(res)
		for ro := 0; ro < len(res); {
			g, err := next(res, ro)
			if err != nil {
				return false, err
			}
			ro = g.end
			if g.num != 1 {
				continue
			}
			if g.typ != protowire.BytesType {
				return false, errMalformed
			}
			key, value, err := keyValue(res[g.val:g.end])
			if err != nil {
				return false, err
			}
			if c.edited(key) {
				size -= g.size()
				continue
			}
			if peer != nil && string(key) == c.peerKey {
				peerKV[pl.n] += g.size()
				if !c.peerUpsert && !found {
					empty, err := emptyString(value)
					if err != nil {
						return false, err
					}
					found = !empty
				}
				continue // Validate refuses a -drop rule on this key
			}
			for i := range c.drop {
				m := &c.drop[i]
				if seen&(1<<i) != 0 || string(key) != m.Key {
					continue
				}
				seen |= 1 << i
				if v, ok, err := stringValue(value); err != nil {
					return false, err
				} else if ok && m.matches(v) {
					return true, nil
				}
			}
		}
		pl.size[pl.n], length[pl.n], field[pl.n] = size, len(res), f.size()
		pl.n++
	}
	added := len(c.set)
	if peer != nil && (c.peerUpsert || !found) {
		pl.peer = true
		added += peerKVSize(c.peerKey, peer)
	}
	for k := range pl.n {
		size := pl.size[k]
		if pl.peer {
			size -= peerKV[k]
		}
		if k == 0 {
			size += added
		}
		if size != length[k] || (k == 0 && added > 0) {
			pl.edit = true
		}
		pl.size[k] = size
		pl.delta += fieldSize(size) - field[k]
	}
	if pl.n == 0 && added > 0 {
		pl.insert, pl.edit = true, true
		pl.delta += fieldSize(added)
	}
	return false, nil
}

// stringValue returns the string of an AnyValue whose last oneof member is string_value.
func stringValue(v []byte) ([]byte, bool, error) {
	var s []byte
	ok := false
	for off := 0; off < len(v); {
		f, err := next(v, off)
		if err != nil {
			return nil, false, err
		}
		off = f.end
		if f.num < 1 || f.num > 7 {
			continue
		}
		ok = f.num == 1 && f.typ == protowire.BytesType
		if ok {
			s = v[f.val:f.end]
		}
	}
	return s, ok, nil
}

// appendResource writes the k-th Resource field res of an entry as planned: the attributes
// no edit names, then (the first one) the set attributes and the client's address, whose text
// is peer.
func (c *Chain) appendResource(dst, res []byte, pl *resourcePlan, k int, peer []byte) []byte {
	dst = appendHeader(dst, 1, pl.size[k])
	run := 0
	for ro := 0; ro < len(res); {
		g, _ := next(res, ro) // planResource read these bytes already
		ro = g.end
		if g.num != 1 {
			continue
		}
		if key, _, _ := keyValue(res[g.val:g.end]); c.edited(key) || pl.peer && string(key) == c.peerKey {
			dst = append(dst, res[run:g.tag]...)
			run = g.end
		}
	}
	dst = append(dst, res[run:]...)
	if k == 0 {
		dst = append(dst, c.set...)
		if pl.peer {
			dst = appendPeerKV(dst, c.peerKey, peer)
		}
	}
	return dst
}
