package kafka

import "encoding/binary"

// maxMetadataTopics caps the topics one Metadata request may ask about; each costs a decoded
// struct and a response entry, many times its wire size.
const maxMetadataTopics = 10000

// checkBody walks a request body before kmsg decodes it, rejecting what kmsg would spend
// unbounded time or memory on: a tagged-field count is a uvarint that kmsg loops over without
// comparing it to the bytes left (a 40-byte request could spin for seconds), and a Metadata
// topic array may be far larger in memory than on the wire. It does not check everything kmsg
// checks; it only bounds the work. key and version must be served.
func checkBody(key, version int16, body []byte) bool {
	w := walker{b: body}
	switch key {
	case keyApiVersions:
		if version >= 3 {
			w.compactString()
			w.compactString()
			w.tags()
		}
	case keyMetadata:
		w.metadata(version)
	case keyGetTelemetrySubscriptions:
		w.skip(16)
		w.tags()
	case keyPushTelemetry:
		w.skip(16 + 4 + 1 + 1)
		w.compactString() // compact bytes share the layout
		w.tags()
	}
	return !w.bad
}

// walker reads just enough of a body to find its tagged fields; it goes bad instead of reading
// past the end.
type walker struct {
	b   []byte
	bad bool
}

func (w *walker) skip(n uint64) {
	if w.bad || n > uint64(len(w.b)) {
		w.bad = true
		return
	}
	w.b = w.b[n:]
}

func (w *walker) uvarint() uint64 {
	if w.bad {
		return 0
	}
	v, n := binary.Uvarint(w.b)
	if n <= 0 {
		w.bad = true
		return 0
	}
	w.b = w.b[n:]
	return v
}

// compactString skips a compact (nullable) string or byte array: uvarint length+1, 0 for null.
func (w *walker) compactString() {
	if n := w.uvarint(); n > 0 {
		w.skip(n - 1)
	}
}

// tags skips a tagged-field section; every field takes at least two bytes (tag and size).
func (w *walker) tags() {
	count := w.uvarint()
	if count > uint64(len(w.b))/2 {
		w.bad = true
		return
	}
	for range count {
		w.uvarint()
		w.skip(w.uvarint())
	}
}

func (w *walker) metadata(version int16) {
	if version < 9 {
		if len(w.b) < 4 {
			w.bad = true
			return
		}
		// A null (-1) or empty array asks for no topic by name; the rest is fixed-size.
		if n := int32(binary.BigEndian.Uint32(w.b)); n > maxMetadataTopics {
			w.bad = true
		}
		return
	}
	n := w.uvarint() // compact nullable array: 0 null, else length+1
	if n > maxMetadataTopics+1 {
		w.bad = true
		return
	}
	for i := uint64(1); i < n && !w.bad; i++ {
		if version >= 10 {
			w.skip(16)
		}
		w.compactString()
		w.tags()
	}
	w.skip(1) // allow_auto_topic_creation
	if version <= 10 {
		w.skip(1) // include_cluster_authorized_operations
	}
	w.skip(1) // include_topic_authorized_operations
	w.tags()
}
