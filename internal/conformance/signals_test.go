package conformance

import (
	"fmt"
	"math/rand/v2"

	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	logsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/logs/v1"
	metricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/metrics/v1"
	tracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
	rcollogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	rcolmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	rcoltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	rlogs "go.opentelemetry.io/proto/otlp/logs/v1"
	rmetrics "go.opentelemetry.io/proto/otlp/metrics/v1"
	rtrace "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// signal binds one telemetry signal's reference types to ours for the generic checks.
type signal struct {
	name   string
	stream uint64 // separates the random streams of the signals

	// newRequest generates a reference export request.
	newRequest func(g *gen) proto.Message
	// check runs roundTrip on a reference export request and returns its deterministic bytes.
	check func(ref proto.Message, r *rand.Rand) ([]byte, error)
	// response generates a reference export response and runs roundTrip on it.
	response func(g *gen) error
	// data runs roundTrip on the signal's XxxData message decoded from a request encoding,
	// which must be the same bytes: both hold the resource entries at field 1.
	data func(v1 []byte, r *rand.Rand) error
	// concat checks that two encoded requests concatenate into one.
	concat func(a, b []byte) error
	// reuse decodes into a single long-lived request reset with ResetVT, as the vtprotobuf
	// pool does, and checks that nothing of the previous contents leaks into the encoding.
	reuse func(v1 []byte) error
	// otep checks the OTEP request built from the entries of v1 and the given id.
	otep func(id uint64, v1 []byte) error
	// equalVT decodes two request encodings with ours and compares them with EqualVT.
	equalVT func(a, b []byte) (bool, error)
	// decodeVT decodes a request with UnmarshalVT and returns its MarshalVT and protobuf-go
	// encodings.
	decodeVT func(b []byte) (vt, viaProto []byte, err error)
}

func (s signal) request(g *gen) ([]byte, error) { return s.check(s.newRequest(g), g.r) }

func signals() []signal {
	return []signal{
		{
			name:       "traces",
			stream:     1,
			newRequest: func(g *gen) proto.Message { return g.traceRequest() },
			check: func(ref proto.Message, r *rand.Rand) ([]byte, error) {
				_, b, err := roundTrip[coltracev1.ExportTraceServiceRequest](ref, r)
				return b, err
			},
			response: func(g *gen) error {
				resp := &rcoltrace.ExportTraceServiceResponse{}
				if !g.chance(0.3) {
					resp.PartialSuccess = &rcoltrace.ExportTracePartialSuccess{RejectedSpans: g.i64(), ErrorMessage: g.str(20)}
				}
				_, _, err := roundTrip[coltracev1.ExportTraceServiceResponse](resp, g.r)
				return err
			},
			data: func(v1 []byte, r *rand.Rand) error {
				return sameAsData[tracev1.TracesData](&rtrace.TracesData{}, v1, r)
			},
			concat: func(a, b []byte) error {
				return concatenated[coltracev1.ExportTraceServiceRequest](&rcoltrace.ExportTraceServiceRequest{}, a, b)
			},
			reuse:    reuser[coltracev1.ExportTraceServiceRequest](),
			equalVT:  vtEqual[coltracev1.ExportTraceServiceRequest],
			decodeVT: decodeVT[coltracev1.ExportTraceServiceRequest],
			otep: func(id uint64, v1 []byte) error {
				return otepRoundTrip(id, v1,
					func(id uint64, es []*tracev1.ResourceSpans) *otepv1.TraceExportRequest {
						return &otepv1.TraceExportRequest{Id: id, ResourceSpans: es}
					},
					func(m *otepv1.TraceExportRequest) (uint64, []*tracev1.ResourceSpans) { return m.Id, m.ResourceSpans })
			},
		},
		{
			name:       "metrics",
			stream:     2,
			newRequest: func(g *gen) proto.Message { return g.metricsRequest() },
			check: func(ref proto.Message, r *rand.Rand) ([]byte, error) {
				_, b, err := roundTrip[colmetricsv1.ExportMetricsServiceRequest](ref, r)
				return b, err
			},
			response: func(g *gen) error {
				resp := &rcolmetrics.ExportMetricsServiceResponse{}
				if !g.chance(0.3) {
					resp.PartialSuccess = &rcolmetrics.ExportMetricsPartialSuccess{RejectedDataPoints: g.i64(), ErrorMessage: g.str(20)}
				}
				_, _, err := roundTrip[colmetricsv1.ExportMetricsServiceResponse](resp, g.r)
				return err
			},
			data: func(v1 []byte, r *rand.Rand) error {
				return sameAsData[metricsv1.MetricsData](&rmetrics.MetricsData{}, v1, r)
			},
			concat: func(a, b []byte) error {
				return concatenated[colmetricsv1.ExportMetricsServiceRequest](&rcolmetrics.ExportMetricsServiceRequest{}, a, b)
			},
			reuse:    reuser[colmetricsv1.ExportMetricsServiceRequest](),
			equalVT:  vtEqual[colmetricsv1.ExportMetricsServiceRequest],
			decodeVT: decodeVT[colmetricsv1.ExportMetricsServiceRequest],
			otep: func(id uint64, v1 []byte) error {
				return otepRoundTrip(id, v1,
					func(id uint64, es []*metricsv1.ResourceMetrics) *otepv1.MetricExportRequest {
						return &otepv1.MetricExportRequest{Id: id, ResourceMetrics: es}
					},
					func(m *otepv1.MetricExportRequest) (uint64, []*metricsv1.ResourceMetrics) {
						return m.Id, m.ResourceMetrics
					})
			},
		},
		{
			name:       "logs",
			stream:     3,
			newRequest: func(g *gen) proto.Message { return g.logsRequest() },
			check: func(ref proto.Message, r *rand.Rand) ([]byte, error) {
				_, b, err := roundTrip[collogsv1.ExportLogsServiceRequest](ref, r)
				return b, err
			},
			response: func(g *gen) error {
				resp := &rcollogs.ExportLogsServiceResponse{}
				if !g.chance(0.3) {
					resp.PartialSuccess = &rcollogs.ExportLogsPartialSuccess{RejectedLogRecords: g.i64(), ErrorMessage: g.str(20)}
				}
				_, _, err := roundTrip[collogsv1.ExportLogsServiceResponse](resp, g.r)
				return err
			},
			data: func(v1 []byte, r *rand.Rand) error {
				return sameAsData[logsv1.LogsData](&rlogs.LogsData{}, v1, r)
			},
			concat: func(a, b []byte) error {
				return concatenated[collogsv1.ExportLogsServiceRequest](&rcollogs.ExportLogsServiceRequest{}, a, b)
			},
			reuse:    reuser[collogsv1.ExportLogsServiceRequest](),
			equalVT:  vtEqual[collogsv1.ExportLogsServiceRequest],
			decodeVT: decodeVT[collogsv1.ExportLogsServiceRequest],
			otep: func(id uint64, v1 []byte) error {
				return otepRoundTrip(id, v1,
					func(id uint64, es []*logsv1.ResourceLogs) *otepv1.LogExportRequest {
						return &otepv1.LogExportRequest{Id: id, ResourceLogs: es}
					},
					func(m *otepv1.LogExportRequest) (uint64, []*logsv1.ResourceLogs) { return m.Id, m.ResourceLogs })
			},
		},
	}
}

// sameAsData decodes a request encoding as the signal's XxxData message with the reference
// (ref is an empty one), runs roundTrip on it, and checks that the bytes did not change.
func sameAsData[T any, P vtMessage[T]](ref proto.Message, v1 []byte, r *rand.Rand) error {
	if err := proto.Unmarshal(v1, ref); err != nil {
		return fmt.Errorf("reference decode of request bytes as %s: %w", ref.ProtoReflect().Descriptor().FullName(), err)
	}
	_, b, err := roundTrip[T, P](ref, r)
	if err != nil {
		return fmt.Errorf("%s: %w", ref.ProtoReflect().Descriptor().FullName(), err)
	}
	var ours P = new(T)
	return sameBytes("data message vs request", ours.ProtoReflect().Descriptor(), b, v1)
}

// resettable is a pooled request type.
type resettable[T any] interface {
	vtMessage[T]
	ResetVT()
}

func reuser[T any, P resettable[T]]() func([]byte) error {
	var m P = new(T)
	md := m.ProtoReflect().Descriptor()
	return func(v1 []byte) error {
		m.ResetVT()
		if err := m.UnmarshalVT(v1); err != nil {
			return fmt.Errorf("UnmarshalVT into a reused message: %w", err)
		}
		got, err := m.MarshalVT()
		if err != nil {
			return fmt.Errorf("MarshalVT of a reused message: %w", err)
		}
		return sameBytes("MarshalVT of a reset and reused message", md, got, v1)
	}
}

func vtEqual[T any, P vtMessage[T]](a, b []byte) (bool, error) {
	var x, y P = new(T), new(T)
	if err := x.UnmarshalVT(a); err != nil {
		return false, fmt.Errorf("UnmarshalVT: %w", err)
	}
	if err := y.UnmarshalVT(b); err != nil {
		return false, fmt.Errorf("UnmarshalVT: %w", err)
	}
	return x.EqualVT(y), nil
}
