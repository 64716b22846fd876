package ocdaemon

import (
	"encoding/binary"
	"errors"
	"math"
)

var (
	errMeasureType = errors.New("ocdaemon: unknown measure type")
	errAggregation = errors.New("ocdaemon: unknown aggregation")
)

// Decode methods fill their receiver, which belongs to the caller's goroutine; Append functions
// only touch their arguments and are safe for concurrent use.

// MeasureType is the value type of a measure, as a MEASURE_CREATE and every STATS_RECORD
// measurement carry it.
type MeasureType uint8

const (
	MeasureInt     MeasureType = 0x01
	MeasureFloat   MeasureType = 0x02
	MeasureUnknown MeasureType = 0xff
)

func (t MeasureType) valid() bool {
	return t == MeasureInt || t == MeasureFloat || t == MeasureUnknown
}

// Aggregation is a view's aggregation, sent as a uvarint.
type Aggregation uint8

const (
	AggregationNone         Aggregation = 0
	AggregationCount        Aggregation = 1
	AggregationSum          Aggregation = 2
	AggregationDistribution Aggregation = 3
	AggregationLastValue    Aggregation = 4
)

// Init is the payload of REQ_INIT (and of PROC_INIT, which current clients never send).
// Byte slices point into the payload.
type Init struct {
	ProtocolVersion byte
	PHPVersion      []byte
	ZendVersion     []byte
}

// Decode fills m from a REQ_INIT payload.
func (m *Init) Decode(p []byte) error {
	r := reader{b: p}
	m.ProtocolVersion = r.byte()
	m.PHPVersion = r.bytes()
	m.ZendVersion = r.bytes()
	return r.done()
}

// AppendInit appends a REQ_INIT payload.
func AppendInit(dst []byte, m *Init) []byte {
	dst = append(dst, m.ProtocolVersion)
	dst = appendBytes(dst, m.PHPVersion)
	return appendBytes(dst, m.ZendVersion)
}

// Measure is the payload of MEASURE_CREATE. Byte slices point into the payload.
type Measure struct {
	Type        MeasureType
	Name        []byte
	Description []byte
	Unit        []byte
}

// Decode fills m from a MEASURE_CREATE payload.
func (m *Measure) Decode(p []byte) error {
	r := reader{b: p}
	m.Type = MeasureType(r.byte())
	m.Name = r.bytes()
	m.Description = r.bytes()
	m.Unit = r.bytes()
	if err := r.done(); err != nil {
		return err
	}
	if !m.Type.valid() {
		return errMeasureType
	}
	return nil
}

// AppendMeasure appends a MEASURE_CREATE payload.
func AppendMeasure(dst []byte, m *Measure) []byte {
	dst = append(dst, byte(m.Type))
	dst = appendBytes(dst, m.Name)
	dst = appendBytes(dst, m.Description)
	return appendBytes(dst, m.Unit)
}

// View is one view of a VIEW_REGISTER payload. Byte slices point into the payload.
type View struct {
	Name        []byte
	Description []byte
	TagKeys     [][]byte
	Measure     []byte
	Aggregation Aggregation
	// Bounds are the distribution's bucket boundaries (only with AggregationDistribution).
	Bounds []float64
}

// Views is the payload of VIEW_REGISTER. Decode reuses the capacity of earlier decodes.
type Views struct {
	Views []View
}

// Decode fills m from a VIEW_REGISTER payload.
func (m *Views) Decode(p []byte) error {
	r := reader{b: p}
	n := r.count(5) // name, description, key count, measure, aggregation: a byte each at least
	m.Views = m.Views[:0]
	for i := 0; i < n && r.err == nil; i++ {
		var v *View
		if len(m.Views) < cap(m.Views) {
			m.Views = m.Views[:len(m.Views)+1]
			v = &m.Views[len(m.Views)-1]
			v.TagKeys, v.Bounds = v.TagKeys[:0], v.Bounds[:0]
		} else {
			m.Views = append(m.Views, View{})
			v = &m.Views[len(m.Views)-1]
		}
		v.Name = r.bytes()
		v.Description = r.bytes()
		keys := r.count(1)
		for k := 0; k < keys; k++ {
			v.TagKeys = append(v.TagKeys, r.bytes())
		}
		v.Measure = r.bytes()
		agg := r.uvarint()
		if r.err == nil && agg > uint64(AggregationLastValue) {
			// Without knowing the aggregation the decoder cannot know whether bounds follow.
			r.fail(errAggregation)
		}
		v.Aggregation = Aggregation(agg)
		if v.Aggregation == AggregationDistribution {
			nb := r.count(8)
			for k := 0; k < nb; k++ {
				v.Bounds = append(v.Bounds, r.float64())
			}
		}
	}
	return r.done()
}

// AppendViews appends a VIEW_REGISTER payload.
func AppendViews(dst []byte, views []View) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(views)))
	for i := range views {
		v := &views[i]
		dst = appendBytes(dst, v.Name)
		dst = appendBytes(dst, v.Description)
		dst = binary.AppendUvarint(dst, uint64(len(v.TagKeys)))
		for _, k := range v.TagKeys {
			dst = appendBytes(dst, k)
		}
		dst = appendBytes(dst, v.Measure)
		dst = binary.AppendUvarint(dst, uint64(v.Aggregation))
		if v.Aggregation == AggregationDistribution {
			dst = binary.AppendUvarint(dst, uint64(len(v.Bounds)))
			for _, b := range v.Bounds {
				dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(b))
			}
		}
	}
	return dst
}

// Names is the payload of VIEW_UNREGISTER: the names of the views to drop.
type Names struct {
	Names [][]byte
}

// Decode fills m from a VIEW_UNREGISTER payload.
func (m *Names) Decode(p []byte) error {
	r := reader{b: p}
	n := r.count(1)
	m.Names = m.Names[:0]
	for i := 0; i < n; i++ {
		m.Names = append(m.Names, r.bytes())
	}
	return r.done()
}

// AppendNames appends a VIEW_UNREGISTER payload.
func AppendNames(dst []byte, names [][]byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, n := range names {
		dst = appendBytes(dst, n)
	}
	return dst
}

// DecodeReportingPeriod decodes a VIEW_REPORTING_PERIOD payload: the period in seconds.
func DecodeReportingPeriod(p []byte) (float64, error) {
	r := reader{b: p}
	v := r.float64()
	return v, r.done()
}

// AppendReportingPeriod appends a VIEW_REPORTING_PERIOD payload.
func AppendReportingPeriod(dst []byte, seconds float64) []byte {
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(seconds))
}

// Measurement is one value of a STATS_RECORD. Name points into the payload.
type Measurement struct {
	Name []byte
	Type MeasureType
	// Int holds the value of a MeasureInt measurement, Float that of a MeasureFloat one; a
	// MeasureUnknown measurement carries no value.
	Int   uint64
	Float float64
}

// Tag is a key/value pair of a STATS_RECORD's tags or attachments; both point into the payload.
type Tag struct {
	Key   []byte
	Value []byte
}

// Record is the payload of STATS_RECORD. Decode reuses the capacity of earlier decodes, so a
// Record kept by one connection decodes without allocating once its slices have grown.
type Record struct {
	Measurements []Measurement
	Tags         []Tag
	Attachments  []Tag
}

// Decode fills m from a STATS_RECORD payload. Byte slices point into p.
func (m *Record) Decode(p []byte) error {
	r := reader{b: p}
	n := r.count(2) // name length and type byte at least
	m.Measurements = m.Measurements[:0]
	for i := 0; i < n && r.err == nil; i++ {
		var ms Measurement
		ms.Name = r.bytes()
		ms.Type = MeasureType(r.byte())
		switch ms.Type {
		case MeasureInt:
			ms.Int = r.uvarint()
		case MeasureFloat:
			ms.Float = r.float64()
		case MeasureUnknown:
		default:
			r.fail(errMeasureType)
		}
		m.Measurements = append(m.Measurements, ms)
	}
	m.Tags = decodeTags(&r, m.Tags[:0])
	m.Attachments = decodeTags(&r, m.Attachments[:0])
	return r.done()
}

func decodeTags(r *reader, dst []Tag) []Tag {
	n := r.count(2)
	for i := 0; i < n && r.err == nil; i++ {
		k := r.bytes()
		v := r.bytes()
		dst = append(dst, Tag{Key: k, Value: v})
	}
	return dst
}

// AppendRecord appends a STATS_RECORD payload as the client encodes it (int values as uvarints).
func AppendRecord(dst []byte, m *Record) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(m.Measurements)))
	for i := range m.Measurements {
		ms := &m.Measurements[i]
		dst = appendBytes(dst, ms.Name)
		dst = append(dst, byte(ms.Type))
		switch ms.Type {
		case MeasureInt:
			dst = binary.AppendUvarint(dst, ms.Int)
		case MeasureFloat:
			dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(ms.Float))
		}
	}
	dst = appendTags(dst, m.Tags)
	return appendTags(dst, m.Attachments)
}

func appendTags(dst []byte, tags []Tag) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(tags)))
	for _, t := range tags {
		dst = appendBytes(dst, t.Key)
		dst = appendBytes(dst, t.Value)
	}
	return dst
}

func appendBytes(dst, s []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}
