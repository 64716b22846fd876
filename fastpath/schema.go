package fastpath

// The OTLP wire schema the scanner checks at DepthFull, transcribed from the .proto files under
// proto/opentelemetry/proto/ (common, resource, trace, metrics, logs). Only what the wire shows
// matters: the wire type each known field must use, which fields hold messages, which fields
// carry the items a request is counted in, and which bytes fields are trace or span ids, whose
// length the Collector checks. A field number missing from a table (reserved or added by a
// newer schema) is unknown and skipped, as every protobuf decoder does.
//
// When a .proto file changes, this table changes with it: schema_test.go compares it with the
// descriptors compiled from the .proto files, and the differential tests scan requests that set
// every field of every message.

// wireKind is what a known field must look like on the wire.
type wireKind uint8

const (
	kUnknown       wireKind = iota // not in the schema: skipped if well-formed
	kVarint                        // int32, int64, uint32, uint64, sint32, bool, enum: wire type 0
	kFixed32                       // fixed32: wire type 5
	kFixed64                       // fixed64, sfixed64, double: wire type 1
	kBytes                         // bytes: wire type 2, any content
	kString                        // string (also repeated): wire type 2, valid UTF-8 at DepthFull
	kMessage                       // a nested message: wire type 2, walked at DepthFull
	kPackedFixed64                 // repeated fixed64/double: wire type 1, or 2 holding whole 8-byte elements
	kPackedVarint                  // repeated uint64: wire type 0, or 2 holding whole varints
	kTraceID                       // a trace id: wire type 2, empty or 16 bytes at DepthFull
	kSpanID                        // a span id: wire type 2, empty or 8 bytes at DepthFull
)

// The sizes of a trace id and a span id. The .proto files declare ids as bytes, and protobuf-go
// takes any length; the OpenTelemetry Collector's decoder (pdata) takes an id that is empty or
// of its size and refuses the whole request otherwise. DepthFull refuses such a request too,
// for an upstream Collector would refuse the whole batch that holds it.
const (
	traceIDSize = 16
	spanIDSize  = 8
)

// Field flags steer counting; the validity of a field depends on its kind alone.
const (
	// fPath marks the message fields that lead from a resource entry to its items: DepthResource
	// walks into them and skips every other message.
	fPath uint8 = 1 << iota
	// fItem marks a field each occurrence of which is one item (a span, a data point, a log
	// record).
	fItem
	// fOneof marks members of a oneof whose items count only for the member that wins:
	// protobuf keeps the last member seen and merges repeats of that same member, so the
	// decoded message holds the items of the final run of one member only.
	fOneof
	// fLegacy marks a field the .proto files reserve but the Collector's decoder still reads:
	// instrumentation_library_{spans,metrics,logs} = 1000 of a resource entry, the scope
	// entries of OTLP before 0.19, which pdata decodes as scope entries (and its OTLP receiver
	// uses when scope_* is empty). DepthFull checks it as pdata does, so that a malformed one
	// costs no batch; its items are not counted, as protobuf-go, which skips the field, does
	// not count them.
	fLegacy
)

type msgID uint8

// schemaField describes one known field of a message.
type schemaField struct {
	kind  wireKind
	flags uint8
	msg   msgID // the nested message, for kMessage
}

// The messages of the schema. The request messages themselves are handled by ScanRequest,
// which knows the two layouts; resource entries are where the tables start.
const (
	mAnyValue msgID = iota
	mArrayValue
	mKeyValueList
	mKeyValue
	mScope
	mEntityRef
	mResource

	mResourceSpans
	mScopeSpans
	mSpan
	mSpanEvent
	mSpanLink
	mStatus

	mResourceMetrics
	mScopeMetrics
	mMetric
	mGauge
	mSum
	mHistogram
	mExpHistogram
	mSummary
	mNumberDP
	mHistogramDP
	mExpHistogramDP
	mBuckets
	mSummaryDP
	mQuantile
	mExemplar

	mResourceLogs
	mScopeLogs
	mLogRecord

	numMsgs
)

func msgField(m msgID) schemaField    { return schemaField{kind: kMessage, msg: m} }
func pathField(m msgID) schemaField   { return schemaField{kind: kMessage, msg: m, flags: fPath} }
func itemField(m msgID) schemaField   { return schemaField{kind: kMessage, msg: m, flags: fItem} }
func legacyField(m msgID) schemaField { return schemaField{kind: kMessage, msg: m, flags: fLegacy} }
func oneofPathField(m msgID) schemaField {
	return schemaField{kind: kMessage, msg: m, flags: fPath | fOneof}
}

var (
	sVarint    = schemaField{kind: kVarint}
	sFixed32   = schemaField{kind: kFixed32}
	sFixed64   = schemaField{kind: kFixed64}
	sBytes     = schemaField{kind: kBytes}
	sString    = schemaField{kind: kString}
	sPacked64  = schemaField{kind: kPackedFixed64}
	sPackedVar = schemaField{kind: kPackedVarint}
	sTraceID   = schemaField{kind: kTraceID}
	sSpanID    = schemaField{kind: kSpanID}
)

// schema holds, per message, its known fields indexed by field number. Indexes by number keep
// the lookup to one bounds check; the largest OTLP field number is 16, the largest number known
// at all 1000 (fLegacy).
var schema = [numMsgs][]schemaField{
	// common.proto
	mAnyValue: {
		1: sString,                 // string_value
		2: sVarint,                 // bool_value
		3: sVarint,                 // int_value
		4: sFixed64,                // double_value
		5: msgField(mArrayValue),   // array_value
		6: msgField(mKeyValueList), // kvlist_value
		7: sBytes,                  // bytes_value
		8: sVarint,                 // string_value_strindex
	},
	mArrayValue:   {1: msgField(mAnyValue)}, // values
	mKeyValueList: {1: msgField(mKeyValue)}, // values
	mKeyValue: {
		1: sString,             // key
		2: msgField(mAnyValue), // value
		3: sVarint,             // key_strindex
	},
	mScope: {
		1: sString,             // name
		2: sString,             // version
		3: msgField(mKeyValue), // attributes
		4: sVarint,             // dropped_attributes_count
	},
	mEntityRef: {
		1: sString, // schema_url
		2: sString, // type
		3: sString, // id_keys
		4: sString, // description_keys
	},
	// resource.proto
	mResource: {
		1: msgField(mKeyValue),  // attributes
		2: sVarint,              // dropped_attributes_count
		3: msgField(mEntityRef), // entity_refs
	},

	// trace.proto
	mResourceSpans: {
		1:    msgField(mResource),      // resource
		2:    pathField(mScopeSpans),   // scope_spans
		3:    sString,                  // schema_url
		1000: legacyField(mScopeSpans), // instrumentation_library_spans (reserved)
	},
	mScopeSpans: {
		1: msgField(mScope), // scope
		2: itemField(mSpan), // spans
		3: sString,          // schema_url
	},
	mSpan: {
		1:  sTraceID,             // trace_id
		2:  sSpanID,              // span_id
		3:  sString,              // trace_state
		4:  sSpanID,              // parent_span_id
		5:  sString,              // name
		6:  sVarint,              // kind
		7:  sFixed64,             // start_time_unix_nano
		8:  sFixed64,             // end_time_unix_nano
		9:  msgField(mKeyValue),  // attributes
		10: sVarint,              // dropped_attributes_count
		11: msgField(mSpanEvent), // events
		12: sVarint,              // dropped_events_count
		13: msgField(mSpanLink),  // links
		14: sVarint,              // dropped_links_count
		15: msgField(mStatus),    // status
		16: sFixed32,             // flags
	},
	mSpanEvent: {
		1: sFixed64,            // time_unix_nano
		2: sString,             // name
		3: msgField(mKeyValue), // attributes
		4: sVarint,             // dropped_attributes_count
	},
	mSpanLink: {
		1: sTraceID,            // trace_id
		2: sSpanID,             // span_id
		3: sString,             // trace_state
		4: msgField(mKeyValue), // attributes
		5: sVarint,             // dropped_attributes_count
		6: sFixed32,            // flags
	},
	mStatus: {
		2: sString, // message (1 is reserved)
		3: sVarint, // code
	},

	// metrics.proto
	mResourceMetrics: {
		1:    msgField(mResource),        // resource
		2:    pathField(mScopeMetrics),   // scope_metrics
		3:    sString,                    // schema_url
		1000: legacyField(mScopeMetrics), // instrumentation_library_metrics (reserved)
	},
	mScopeMetrics: {
		1: msgField(mScope),   // scope
		2: pathField(mMetric), // metrics
		3: sString,            // schema_url
	},
	mMetric: {
		1:  sString,                       // name
		2:  sString,                       // description
		3:  sString,                       // unit
		5:  oneofPathField(mGauge),        // gauge (4, 6, 8 are reserved)
		7:  oneofPathField(mSum),          // sum
		9:  oneofPathField(mHistogram),    // histogram
		10: oneofPathField(mExpHistogram), // exponential_histogram
		11: oneofPathField(mSummary),      // summary
		12: msgField(mKeyValue),           // metadata
	},
	mGauge: {1: itemField(mNumberDP)}, // data_points
	mSum: {
		1: itemField(mNumberDP), // data_points
		2: sVarint,              // aggregation_temporality
		3: sVarint,              // is_monotonic
	},
	mHistogram: {
		1: itemField(mHistogramDP), // data_points
		2: sVarint,                 // aggregation_temporality
	},
	mExpHistogram: {
		1: itemField(mExpHistogramDP), // data_points
		2: sVarint,                    // aggregation_temporality
	},
	mSummary: {1: itemField(mSummaryDP)}, // data_points
	mNumberDP: {
		2: sFixed64,            // start_time_unix_nano (1 is reserved)
		3: sFixed64,            // time_unix_nano
		4: sFixed64,            // as_double
		5: msgField(mExemplar), // exemplars
		6: sFixed64,            // as_int
		7: msgField(mKeyValue), // attributes
		8: sVarint,             // flags
	},
	mHistogramDP: {
		2:  sFixed64,            // start_time_unix_nano (1 is reserved)
		3:  sFixed64,            // time_unix_nano
		4:  sFixed64,            // count
		5:  sFixed64,            // sum
		6:  sPacked64,           // bucket_counts
		7:  sPacked64,           // explicit_bounds
		8:  msgField(mExemplar), // exemplars
		9:  msgField(mKeyValue), // attributes
		10: sVarint,             // flags
		11: sFixed64,            // min
		12: sFixed64,            // max
	},
	mExpHistogramDP: {
		1:  msgField(mKeyValue), // attributes
		2:  sFixed64,            // start_time_unix_nano
		3:  sFixed64,            // time_unix_nano
		4:  sFixed64,            // count
		5:  sFixed64,            // sum
		6:  sVarint,             // scale
		7:  sFixed64,            // zero_count
		8:  msgField(mBuckets),  // positive
		9:  msgField(mBuckets),  // negative
		10: sVarint,             // flags
		11: msgField(mExemplar), // exemplars
		12: sFixed64,            // min
		13: sFixed64,            // max
		14: sFixed64,            // zero_threshold
	},
	mBuckets: {
		1: sVarint,    // offset
		2: sPackedVar, // bucket_counts
	},
	mSummaryDP: {
		2: sFixed64,            // start_time_unix_nano (1 is reserved)
		3: sFixed64,            // time_unix_nano
		4: sFixed64,            // count
		5: sFixed64,            // sum
		6: msgField(mQuantile), // quantile_values
		7: msgField(mKeyValue), // attributes
		8: sVarint,             // flags
	},
	mQuantile: {
		1: sFixed64, // quantile
		2: sFixed64, // value
	},
	mExemplar: {
		2: sFixed64,            // time_unix_nano (1 is reserved)
		3: sFixed64,            // as_double
		4: sSpanID,             // span_id
		5: sTraceID,            // trace_id
		6: sFixed64,            // as_int
		7: msgField(mKeyValue), // filtered_attributes
	},

	// logs.proto
	mResourceLogs: {
		1:    msgField(mResource),     // resource
		2:    pathField(mScopeLogs),   // scope_logs
		3:    sString,                 // schema_url
		1000: legacyField(mScopeLogs), // instrumentation_library_logs (reserved)
	},
	mScopeLogs: {
		1: msgField(mScope),      // scope
		2: itemField(mLogRecord), // log_records
		3: sString,               // schema_url
	},
	mLogRecord: {
		1:  sFixed64,            // time_unix_nano
		2:  sVarint,             // severity_number
		3:  sString,             // severity_text (4 is reserved)
		5:  msgField(mAnyValue), // body
		6:  msgField(mKeyValue), // attributes
		7:  sVarint,             // dropped_attributes_count
		8:  sFixed32,            // flags
		9:  sTraceID,            // trace_id
		10: sSpanID,             // span_id
		11: sFixed64,            // observed_time_unix_nano
		12: sString,             // event_name
	},
}

// resourceMsg is the resource entry message of each signal.
var resourceMsg = [NumSignals]msgID{
	Traces:  mResourceSpans,
	Metrics: mResourceMetrics,
	Logs:    mResourceLogs,
}
