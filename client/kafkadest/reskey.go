package kafkadest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/fastpath"
)

// The fields a resource key reads: ResourceSpans/Metrics/Logs.resource, Resource.attributes,
// KeyValue.key and value, the AnyValue cases, ArrayValue.values and KeyValueList.values.
const (
	fEntryResource = 1
	fResAttrs      = 1
	fKVKey         = 1
	fKVValue       = 2
	fAnyStr        = 1
	fAnyBool       = 2
	fAnyInt        = 3
	fAnyDouble     = 4
	fAnyArray      = 5
	fAnyKVList     = 6
	fAnyBytes      = 7
	fListValues    = 1
)

// The bytes that mark each part of the attributes in what is hashed: the Collector's
// pdatautil.MapHash spells a map with these, so that no two different maps spell alike.
const (
	markSecondHalf  = 0xf3
	markKey         = 0xf4
	markEmpty       = 0xf5
	markBytes       = 0xf6
	markStr         = 0xf7
	markTrue        = 0xf8
	markFalse       = 0xf9
	markInt         = 0xfa
	markDouble      = 0xfb
	markMapStart    = 0xfc
	markMapEnd      = 0xfd
	markSliceStart  = 0xfe
	markSliceEnd    = 0xff
	resourceKeySize = 16
)

var errAttrWire = errors.New("kafkadest: an attribute of the resource has the wrong wire type")

// resourceKeyer computes the key the Collector's Kafka exporter gives the records of one
// resource with partition_{metrics,logs}_by_resource_attributes: pdatautil.MapHash of the
// resource's attributes, 16 bytes, read here from the protobuf without decoding it.
//
// MapHash spells the attributes out in a canonical order and hashes that with 64-bit
// xxHash twice: the spelling, then the spelling and one more byte, the two sums little-endian
// one after the other. The spelling of a map is each of its entries in the order of their
// keys (byte-wise), the key after markKey, then its value: a string, bytes, an int (8 bytes
// little-endian) or a double (its IEEE bits, likewise) after their mark, a bool as one mark,
// a value with none of the cases set as markEmpty, a list as its values between the slice
// marks, a map as its spelling between the map marks. A resource without attributes has the
// key of 16 zero bytes. When a key is repeated, the Collector's map answers every look-up of
// it with its first value, so each of its entries is spelt with the first one's value.
//
// A resourceKeyer is reused across batches and allocates nothing once its slices fit. Not
// safe for concurrent use.
type resourceKeyer struct {
	spelling []byte
	kvs      []attrKV // the entries of the maps being spelt, innermost last
}

// attrKV is one entry of a map: its key and its AnyValue's bytes (absent: nil, hasValue
// false). Both point into the request.
type attrKV struct {
	key, value []byte
	hasValue   bool
	pos        int32 // its place in the map, which breaks ties between repeated keys
}

// key is the resource key of entry, a resource entry of a request (a ResourceSpans,
// ResourceMetrics or ResourceLogs).
func (k *resourceKeyer) key(entry []byte) ([resourceKeySize]byte, error) {
	var sum [resourceKeySize]byte
	k.spelling, k.kvs = k.spelling[:0], k.kvs[:0]
	// A resource repeated in the entry merges into one whose attributes are all of theirs,
	// as a protobuf decoder merges a message field that comes twice.
	it := fastpath.NewTopLevel(entry)
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num != fEntryResource {
			continue
		}
		if f.Type != protowire.BytesType {
			return sum, errAttrWire
		}
		if err := k.collect(entry[f.Value:f.End], fResAttrs); err != nil {
			return sum, err
		}
	}
	if err := it.Err(); err != nil {
		return sum, err
	}
	if len(k.kvs) == 0 {
		return sum, nil
	}
	if err := k.spellMap(0); err != nil {
		return sum, err
	}
	binary.LittleEndian.PutUint64(sum[:8], xxhash.Sum64(k.spelling))
	k.spelling = append(k.spelling, markSecondHalf)
	binary.LittleEndian.PutUint64(sum[8:], xxhash.Sum64(k.spelling))
	return sum, nil
}

// collect appends the entries (KeyValue fields numbered field) of msg to kvs.
func (k *resourceKeyer) collect(msg []byte, field protowire.Number) error {
	it := fastpath.NewTopLevel(msg)
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num != field {
			continue
		}
		if f.Type != protowire.BytesType {
			return errAttrWire
		}
		kv := attrKV{pos: int32(len(k.kvs))}
		body := msg[f.Value:f.End]
		in := fastpath.NewTopLevel(body)
		for {
			g, ok := in.Next()
			if !ok {
				break
			}
			switch {
			case g.Num == fKVKey && g.Type == protowire.BytesType:
				kv.key = body[g.Value:g.End]
			case g.Num == fKVValue && g.Type == protowire.BytesType:
				kv.value, kv.hasValue = body[g.Value:g.End], true
			case g.Num == fKVKey || g.Num == fKVValue:
				return errAttrWire
			}
		}
		if err := in.Err(); err != nil {
			return err
		}
		k.kvs = append(k.kvs, kv)
	}
	return it.Err()
}

// spellMap spells the map whose entries are kvs[from:], and drops them from kvs.
func (k *resourceKeyer) spellMap(from int) error {
	to := len(k.kvs)
	slices.SortFunc(k.kvs[from:to], func(a, b attrKV) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		return int(a.pos - b.pos)
	})
	for i := from; i < to; i++ {
		first := i
		for first > from && bytes.Equal(k.kvs[first-1].key, k.kvs[i].key) {
			first--
		}
		k.spelling = append(k.spelling, markKey)
		k.spelling = append(k.spelling, k.kvs[i].key...)
		var value []byte
		if k.kvs[first].hasValue {
			value = k.kvs[first].value
		}
		if err := k.spellValue(value); err != nil {
			return err
		}
	}
	k.kvs = k.kvs[:from]
	return nil
}

// spellValue spells an AnyValue. Of its cases the last one in the bytes counts, as for any
// protobuf decoder.
func (k *resourceKeyer) spellValue(v []byte) error {
	var last fastpath.Field
	found := false
	it := fastpath.NewTopLevel(v)
	for {
		f, ok := it.Next()
		if !ok {
			break
		}
		if f.Num >= fAnyStr && f.Num <= fAnyBytes {
			last, found = f, true
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	if !found {
		k.spelling = append(k.spelling, markEmpty)
		return nil
	}
	body := v[last.Value:last.End]
	switch last.Num {
	case fAnyStr, fAnyBytes, fAnyArray, fAnyKVList:
		if last.Type != protowire.BytesType {
			return errAttrWire
		}
	case fAnyBool, fAnyInt:
		if last.Type != protowire.VarintType {
			return errAttrWire
		}
	case fAnyDouble:
		if last.Type != protowire.Fixed64Type {
			return errAttrWire
		}
	}
	switch last.Num {
	case fAnyStr:
		k.spelling = append(append(k.spelling, markStr), body...)
	case fAnyBytes:
		k.spelling = append(append(k.spelling, markBytes), body...)
	case fAnyBool:
		n, _ := protowire.ConsumeVarint(body)
		if n != 0 {
			k.spelling = append(k.spelling, markTrue)
		} else {
			k.spelling = append(k.spelling, markFalse)
		}
	case fAnyInt:
		n, _ := protowire.ConsumeVarint(body)
		k.spelling = binary.LittleEndian.AppendUint64(append(k.spelling, markInt), n)
	case fAnyDouble:
		n, _ := protowire.ConsumeFixed64(body)
		k.spelling = binary.LittleEndian.AppendUint64(append(k.spelling, markDouble), n)
	case fAnyArray:
		k.spelling = append(k.spelling, markSliceStart)
		it := fastpath.NewTopLevel(body)
		for {
			f, ok := it.Next()
			if !ok {
				break
			}
			if f.Num != fListValues {
				continue
			}
			if f.Type != protowire.BytesType {
				return errAttrWire
			}
			if err := k.spellValue(body[f.Value:f.End]); err != nil {
				return err
			}
		}
		if err := it.Err(); err != nil {
			return err
		}
		k.spelling = append(k.spelling, markSliceEnd)
	case fAnyKVList:
		k.spelling = append(k.spelling, markMapStart)
		from := len(k.kvs)
		if err := k.collect(body, fListValues); err != nil {
			return err
		}
		if err := k.spellMap(from); err != nil {
			return err
		}
		k.spelling = append(k.spelling, markMapEnd)
	}
	return nil
}
