package fastpath

import (
	"encoding/binary"
	"math/bits"

	"google.golang.org/protobuf/encoding/protowire"
)

// The OTLP/JSON column of the schema: for every field schema.go knows, the names a JSON body
// may give it and the protobuf type its value turns into. schema.go says what a field looks
// like on the wire, which is all the scanner needs; the transcoder also needs what the wire
// cannot tell (int32 from uint64 from enum, sint32's zigzag, double from fixed64, ids written in
// hex from bytes written in base64, which fields have presence) and the names. schema_test.go
// checks this table against the compiled descriptors as it checks the wire table.

// jsonType is the protobuf type of a field, as far as the JSON mapping tells them apart.
type jsonType uint8

const (
	jMessage  jsonType = iota + 1 // JSON object
	jString                       // JSON string, UTF-8
	jBytes                        // JSON string, base64 (standard or URL alphabet, padding optional)
	jTraceID                      // trace id: JSON string of hex digits, any case; 0 or 16 bytes
	jSpanID                       // span id: as jTraceID, 0 or 8 bytes
	jBool                         // true or false
	jEnum                         // int32 on the wire; JSON integer or the value's name
	jInt32                        // JSON integer or decimal string
	jSint32                       // zigzag varint
	jUint32                       // varint
	jInt64                        // varint, negative values take ten bytes
	jUint64                       // varint
	jFixed32                      // 4 bytes
	jFixed64                      // 8 bytes
	jSfixed64                     // 8 bytes, signed
	jDouble                       // 8 bytes; JSON number or "NaN", "Infinity", "-Infinity"
)

// wireType is the wire type one value of type t takes, unpacked.
func (t jsonType) wireType() protowire.Type {
	switch t {
	case jMessage, jString, jBytes, jTraceID, jSpanID:
		return protowire.BytesType
	case jFixed32:
		return protowire.Fixed32Type
	case jFixed64, jSfixed64, jDouble:
		return protowire.Fixed64Type
	}
	return protowire.VarintType
}

// appendTag appends f's tag, for one value of f.
func (f *jsonField) appendTag(dst []byte) []byte {
	if f.tag < 0x80 {
		return append(dst, byte(f.tag))
	}
	return append(dst, byte(f.tag)|0x80, byte(f.tag>>7))
}

// Flags of a JSON field.
const (
	// jRepeated: the JSON value is an array. Scalars are written packed, as proto3 does.
	jRepeated uint8 = 1 << iota
	// jPresence: the field is written even when it holds its zero value (oneof members and
	// proto3 optional fields); every other scalar is left out at zero, as proto3 writers do.
	jPresence
)

// enumID names the enums whose value names the transcoder accepts.
type enumID uint8

const (
	eNone enumID = iota
	eSpanKind
	eStatusCode
	eSeverityNumber
	eTemporality
	numEnums
)

// jsonField is one field of a message in the JSON column. Its wire kind, nested message and
// item flag stay in schema[m][num].
type jsonField struct {
	num   uint8  // field number
	name  string // proto name (snake_case); the lowerCamelCase name is derived from it
	camel string // filled by init from name
	order uint8  // filled by init: where the field goes in the output (see jsonSchema)
	typ   jsonType
	flags uint8
	oneof uint8 // 1-based oneof group within the message, 0 if none
	enum  enumID
	// Filled by init from schema.go and typ, so that the transcoder reads one struct per field:
	msg  msgID  // the nested message of a jMessage field
	item bool   // each occurrence is one item (schema's fItem)
	tag  uint16 // the field's tag, with the wire type of one value (a packed run's differs)
}

func jf(num uint8, name string, typ jsonType) jsonField {
	return jsonField{num: num, name: name, typ: typ}
}
func jrep(num uint8, name string, typ jsonType) jsonField {
	return jsonField{num: num, name: name, typ: typ, flags: jRepeated}
}
func jone(num uint8, name string, typ jsonType) jsonField {
	return jsonField{num: num, name: name, typ: typ, flags: jPresence, oneof: 1}
}
func jopt(num uint8, name string, typ jsonType) jsonField {
	return jsonField{num: num, name: name, typ: typ, flags: jPresence}
}
func jenum(num uint8, name string, e enumID) jsonField {
	return jsonField{num: num, name: name, typ: jEnum, enum: e}
}

// jsonSchema lists, per message, its fields in field-number order. The transcoder writes them
// in the order protobuf-go's deterministic marshaling and vtprotobuf's MarshalVT use, so that
// the bytes are canonical: fields outside a oneof by number, then the members of the oneof
// (OTLP messages have at most one real oneof; proto3 optional fields are ordinary fields here).
var jsonSchema = [numMsgs][]jsonField{
	mAnyValue: {
		jone(1, "string_value", jString),
		jone(2, "bool_value", jBool),
		jone(3, "int_value", jInt64),
		jone(4, "double_value", jDouble),
		jone(5, "array_value", jMessage),
		jone(6, "kvlist_value", jMessage),
		jone(7, "bytes_value", jBytes),
		jone(8, "string_value_strindex", jInt32),
	},
	mArrayValue:   {jrep(1, "values", jMessage)},
	mKeyValueList: {jrep(1, "values", jMessage)},
	mKeyValue: {
		jf(1, "key", jString),
		jf(2, "value", jMessage),
		jf(3, "key_strindex", jInt32),
	},
	mScope: {
		jf(1, "name", jString),
		jf(2, "version", jString),
		jrep(3, "attributes", jMessage),
		jf(4, "dropped_attributes_count", jUint32),
	},
	mEntityRef: {
		jf(1, "schema_url", jString),
		jf(2, "type", jString),
		jrep(3, "id_keys", jString),
		jrep(4, "description_keys", jString),
	},
	mResource: {
		jrep(1, "attributes", jMessage),
		jf(2, "dropped_attributes_count", jUint32),
		jrep(3, "entity_refs", jMessage),
	},

	mResourceSpans: {
		jf(1, "resource", jMessage),
		jrep(2, "scope_spans", jMessage),
		jf(3, "schema_url", jString),
	},
	mScopeSpans: {
		jf(1, "scope", jMessage),
		jrep(2, "spans", jMessage),
		jf(3, "schema_url", jString),
	},
	mSpan: {
		jf(1, "trace_id", jTraceID),
		jf(2, "span_id", jSpanID),
		jf(3, "trace_state", jString),
		jf(4, "parent_span_id", jSpanID),
		jf(5, "name", jString),
		jenum(6, "kind", eSpanKind),
		jf(7, "start_time_unix_nano", jFixed64),
		jf(8, "end_time_unix_nano", jFixed64),
		jrep(9, "attributes", jMessage),
		jf(10, "dropped_attributes_count", jUint32),
		jrep(11, "events", jMessage),
		jf(12, "dropped_events_count", jUint32),
		jrep(13, "links", jMessage),
		jf(14, "dropped_links_count", jUint32),
		jf(15, "status", jMessage),
		jf(16, "flags", jFixed32),
	},
	mSpanEvent: {
		jf(1, "time_unix_nano", jFixed64),
		jf(2, "name", jString),
		jrep(3, "attributes", jMessage),
		jf(4, "dropped_attributes_count", jUint32),
	},
	mSpanLink: {
		jf(1, "trace_id", jTraceID),
		jf(2, "span_id", jSpanID),
		jf(3, "trace_state", jString),
		jrep(4, "attributes", jMessage),
		jf(5, "dropped_attributes_count", jUint32),
		jf(6, "flags", jFixed32),
	},
	mStatus: {
		jf(2, "message", jString),
		jenum(3, "code", eStatusCode),
	},

	mResourceMetrics: {
		jf(1, "resource", jMessage),
		jrep(2, "scope_metrics", jMessage),
		jf(3, "schema_url", jString),
	},
	mScopeMetrics: {
		jf(1, "scope", jMessage),
		jrep(2, "metrics", jMessage),
		jf(3, "schema_url", jString),
	},
	mMetric: {
		jf(1, "name", jString),
		jf(2, "description", jString),
		jf(3, "unit", jString),
		jone(5, "gauge", jMessage),
		jone(7, "sum", jMessage),
		jone(9, "histogram", jMessage),
		jone(10, "exponential_histogram", jMessage),
		jone(11, "summary", jMessage),
		jrep(12, "metadata", jMessage),
	},
	mGauge: {jrep(1, "data_points", jMessage)},
	mSum: {
		jrep(1, "data_points", jMessage),
		jenum(2, "aggregation_temporality", eTemporality),
		jf(3, "is_monotonic", jBool),
	},
	mHistogram: {
		jrep(1, "data_points", jMessage),
		jenum(2, "aggregation_temporality", eTemporality),
	},
	mExpHistogram: {
		jrep(1, "data_points", jMessage),
		jenum(2, "aggregation_temporality", eTemporality),
	},
	mSummary: {jrep(1, "data_points", jMessage)},
	mNumberDP: {
		jf(2, "start_time_unix_nano", jFixed64),
		jf(3, "time_unix_nano", jFixed64),
		jone(4, "as_double", jDouble),
		jrep(5, "exemplars", jMessage),
		jone(6, "as_int", jSfixed64),
		jrep(7, "attributes", jMessage),
		jf(8, "flags", jUint32),
	},
	mHistogramDP: {
		jf(2, "start_time_unix_nano", jFixed64),
		jf(3, "time_unix_nano", jFixed64),
		jf(4, "count", jFixed64),
		jopt(5, "sum", jDouble),
		jrep(6, "bucket_counts", jFixed64),
		jrep(7, "explicit_bounds", jDouble),
		jrep(8, "exemplars", jMessage),
		jrep(9, "attributes", jMessage),
		jf(10, "flags", jUint32),
		jopt(11, "min", jDouble),
		jopt(12, "max", jDouble),
	},
	mExpHistogramDP: {
		jrep(1, "attributes", jMessage),
		jf(2, "start_time_unix_nano", jFixed64),
		jf(3, "time_unix_nano", jFixed64),
		jf(4, "count", jFixed64),
		jopt(5, "sum", jDouble),
		jf(6, "scale", jSint32),
		jf(7, "zero_count", jFixed64),
		jf(8, "positive", jMessage),
		jf(9, "negative", jMessage),
		jf(10, "flags", jUint32),
		jrep(11, "exemplars", jMessage),
		jopt(12, "min", jDouble),
		jopt(13, "max", jDouble),
		jf(14, "zero_threshold", jDouble),
	},
	mBuckets: {
		jf(1, "offset", jSint32),
		jrep(2, "bucket_counts", jUint64),
	},
	mSummaryDP: {
		jf(2, "start_time_unix_nano", jFixed64),
		jf(3, "time_unix_nano", jFixed64),
		jf(4, "count", jFixed64),
		jf(5, "sum", jDouble),
		jrep(6, "quantile_values", jMessage),
		jrep(7, "attributes", jMessage),
		jf(8, "flags", jUint32),
	},
	mQuantile: {
		jf(1, "quantile", jDouble),
		jf(2, "value", jDouble),
	},
	mExemplar: {
		jf(2, "time_unix_nano", jFixed64),
		jone(3, "as_double", jDouble),
		jf(4, "span_id", jSpanID),
		jf(5, "trace_id", jTraceID),
		jone(6, "as_int", jSfixed64),
		jrep(7, "filtered_attributes", jMessage),
	},

	mResourceLogs: {
		jf(1, "resource", jMessage),
		jrep(2, "scope_logs", jMessage),
		jf(3, "schema_url", jString),
	},
	mScopeLogs: {
		jf(1, "scope", jMessage),
		jrep(2, "log_records", jMessage),
		jf(3, "schema_url", jString),
	},
	mLogRecord: {
		jf(1, "time_unix_nano", jFixed64),
		jenum(2, "severity_number", eSeverityNumber),
		jf(3, "severity_text", jString),
		jf(5, "body", jMessage),
		jrep(6, "attributes", jMessage),
		jf(7, "dropped_attributes_count", jUint32),
		jf(8, "flags", jFixed32),
		jf(9, "trace_id", jTraceID),
		jf(10, "span_id", jSpanID),
		jf(11, "observed_time_unix_nano", jFixed64),
		jf(12, "event_name", jString),
	},
}

// requestField names the one field of each v1 Export request: its resource entries.
var requestField = [NumSignals]jsonField{
	Traces:  jrep(1, "resource_spans", jMessage),
	Metrics: jrep(1, "resource_metrics", jMessage),
	Logs:    jrep(1, "resource_logs", jMessage),
}

// enumNames lists each enum's value names, indexed by value (the OTLP enums are dense from 0).
var enumNames = [numEnums][]string{
	eSpanKind: {
		"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT",
		"SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER",
	},
	eStatusCode: {"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"},
	eSeverityNumber: {
		"SEVERITY_NUMBER_UNSPECIFIED",
		"SEVERITY_NUMBER_TRACE", "SEVERITY_NUMBER_TRACE2", "SEVERITY_NUMBER_TRACE3", "SEVERITY_NUMBER_TRACE4",
		"SEVERITY_NUMBER_DEBUG", "SEVERITY_NUMBER_DEBUG2", "SEVERITY_NUMBER_DEBUG3", "SEVERITY_NUMBER_DEBUG4",
		"SEVERITY_NUMBER_INFO", "SEVERITY_NUMBER_INFO2", "SEVERITY_NUMBER_INFO3", "SEVERITY_NUMBER_INFO4",
		"SEVERITY_NUMBER_WARN", "SEVERITY_NUMBER_WARN2", "SEVERITY_NUMBER_WARN3", "SEVERITY_NUMBER_WARN4",
		"SEVERITY_NUMBER_ERROR", "SEVERITY_NUMBER_ERROR2", "SEVERITY_NUMBER_ERROR3", "SEVERITY_NUMBER_ERROR4",
		"SEVERITY_NUMBER_FATAL", "SEVERITY_NUMBER_FATAL2", "SEVERITY_NUMBER_FATAL3", "SEVERITY_NUMBER_FATAL4",
	},
	eTemporality: {
		"AGGREGATION_TEMPORALITY_UNSPECIFIED", "AGGREGATION_TEMPORALITY_DELTA",
		"AGGREGATION_TEMPORALITY_CUMULATIVE",
	},
}

func init() {
	for m := range jsonSchema {
		for i := range jsonSchema[m] {
			f := &jsonSchema[m][i]
			f.camel = lowerCamel(f.name)
			f.order = f.num
			if f.oneof != 0 {
				f.order |= 0x80
			}
			sf := schema[m][f.num]
			f.msg, f.item = sf.msg, sf.flags&fItem != 0
			f.tag = uint16(protowire.EncodeTag(protowire.Number(f.num), f.typ.wireType()))
		}
	}
	for s := range requestField {
		requestField[s].camel = lowerCamel(requestField[s].name)
	}
	for m := range jsonSchema {
		jsonKeys[m].build(jsonSchema[m])
	}
}

// lowerCamel is protobuf's JSON name of a field: underscores dropped, the letter after each one
// upper-cased. It runs once per field at start-up.
func lowerCamel(name string) string {
	b := make([]byte, 0, len(name))
	up := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_':
			up = true
		case up && c >= 'a' && c <= 'z':
			b = append(b, c-'a'+'A')
			up = false
		default:
			b = append(b, c)
			up = false
		}
	}
	return string(b)
}

// maxKeyLen is the longest name of a field, in either spelling ("dropped_attributes_count").
// Every name fits in three 8-byte words.
const maxKeyLen = 24

// jsonKeyTable finds the field a key names in one message with one hash and one comparison of
// three words: a perfect hash of the key's words and length, its multiplier chosen at start-up
// so that no two names of the message share a slot.
type jsonKeyTable struct {
	mul   uint64
	slot  [128]uint8 // index+1 in names of the name that hashes here; 0: none
	names []jsonKeyName
}

// jsonKeyName is one spelling of a field's name, zero-padded to three words.
type jsonKeyName struct {
	w     [3]uint64
	n     int
	field *jsonField
}

// maxNames bounds the names of one message's fields (both spellings), so that a name's index
// fits the key table's slots and the transcoder's hints.
const maxNames = 64

// jsonKeys holds a key table per message, filled by init.
var jsonKeys [numMsgs]jsonKeyTable

// keyMask[n] keeps the first n bytes of three words, zeroing the rest.
var keyMask = func() (m [maxKeyLen + 1][3]uint64) {
	for n := range m {
		for k := range 3 {
			switch left := n - 8*k; {
			case left >= 8:
				m[n][k] = ^uint64(0)
			case left > 0:
				m[n][k] = 1<<(8*left) - 1
			}
		}
	}
	return m
}()

// keyWords reads the n-byte key at b[s:] as three words, zeroed past the key. b must hold 24
// bytes from s on.
func keyWords(b []byte, s, n int) (w [3]uint64) {
	m := &keyMask[n]
	w[0] = binary.LittleEndian.Uint64(b[s:]) & m[0]
	w[1] = binary.LittleEndian.Uint64(b[s+8:]) & m[1]
	w[2] = binary.LittleEndian.Uint64(b[s+16:]) & m[2]
	return w
}

// slotOf hashes a key's words and length to a slot of a table of multiplier mul.
func slotOf(w *[3]uint64, n int, mul uint64) uint64 {
	x := w[0] ^ bits.RotateLeft64(w[1], 21) ^ bits.RotateLeft64(w[2], 42) ^ uint64(n)
	return (x * mul) >> 57
}

// find returns which name (its index in kt.names plus one) is the n-byte key read as w (by
// keyWords), or 0 when it names no field.
func (kt *jsonKeyTable) find(w *[3]uint64, n int) uint8 {
	s := kt.slot[slotOf(w, n, kt.mul)]
	if s == 0 {
		return 0
	}
	k := &kt.names[s-1]
	if k.n != n || (w[0]^k.w[0])|(w[1]^k.w[1])|(w[2]^k.w[2]) != 0 {
		return 0
	}
	return s
}

// lookup is find for a key that may lie anywhere: it is copied to be read in words.
func (kt *jsonKeyTable) lookup(key []byte) uint8 {
	if len(key) == 0 || len(key) > maxKeyLen {
		return 0
	}
	var buf [maxKeyLen]byte
	copy(buf[:], key)
	w := keyWords(buf[:], 0, len(key))
	return kt.find(&w, len(key))
}

// field returns the field of name k (as find returns it), or nil for 0.
func (kt *jsonKeyTable) field(k uint8) *jsonField {
	if k == 0 {
		return nil
	}
	return kt.names[k-1].field
}

// build fills the table for fields, trying multipliers until one puts every name in a slot of
// its own. With at most 32 names in 128 slots, about one multiplier in 40 does.
func (kt *jsonKeyTable) build(fields []jsonField) {
	var names []jsonKeyName
	for i := range fields {
		f := &fields[i]
		for k, name := range []string{f.camel, f.name} {
			if k == 1 && name == f.camel {
				continue // one word: both spellings are the same name
			}
			if len(name) > maxKeyLen || name == "" {
				panic("BUG: fastpath JSON field name empty or longer than maxKeyLen")
			}
			var buf [maxKeyLen]byte
			copy(buf[:], name)
			names = append(names, jsonKeyName{w: keyWords(buf[:], 0, len(name)), n: len(name), field: f})
		}
	}
	if len(names) >= maxNames {
		panic("BUG: fastpath JSON message has too many names for its key table")
	}
	mul := uint64(0x9e3779b97f4a7c15)
	for range 1 << 16 {
		*kt = jsonKeyTable{mul: mul, names: names}
		if kt.place() {
			return
		}
		mul = mul*0x5851f42d4c957f2d + 0x14057b7ef767814f | 1
	}
	panic("BUG: fastpath JSON key table finds no perfect hash")
}

// place puts the names in the slots kt.mul hashes them to, and reports false when two meet.
func (kt *jsonKeyTable) place() bool {
	for i := range kt.names {
		k := &kt.names[i]
		h := slotOf(&k.w, k.n, kt.mul)
		if kt.slot[h] != 0 {
			return false
		}
		kt.slot[h] = uint8(i + 1)
	}
	return true
}
