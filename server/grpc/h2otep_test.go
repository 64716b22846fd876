package grpcserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/internal/admission"
	"github.com/otlpgate/otlpgate/internal/testkit"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

const streamTracesPath = "/otlpgate.otep.v1.StreamExporter/ExportTraces"

// An OTEP stream is answered the same on both transports: the same answers, in the same order,
// the same status at its end (code, message and details), and the same bytes at the
// destination. grpc-go is the oracle, as in TestTransportsAnswerAlike. Each case sends its
// messages, closes its side, and reads until the stream ends. One case differs by design, and
// says why.
func TestOTEPStreamAnswersAlike(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("s3cret\n"), 0o600)
	bearer := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer s3cret")
	body := traceBody(t, 5, 4)
	large := traceBody(t, 9, 20000) // megabytes: many DATA frames, several windows
	garbage := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 77)
	garbage = append(garbage, 0x12, 0x7f, 0xde, 0xad) // an entry that claims 127 bytes, has 2
	type result struct {
		answers []byte // the answers as marshalled, each length-prefixed
		st      *status.Status
		bytes   []byte // what reached the destination
	}
	cases := []struct {
		name  string
		ctx   context.Context
		path  string
		msgs  [][]byte
		opts  []grpc.CallOption
		setup func(pc *pipeline.Config, sc *Config) *testkit.Recorder
		// own, when set, is what the own transport answers where it differs from grpc-go's
		// by design (the case says why); nothing is then compared.
		own []byte
		// unordered: answers leave in the order batches complete (-ack=upstream), compared as
		// a set.
		unordered bool
	}{
		{name: "sequence", msgs: [][]byte{otepReq(t, 1, body), garbage, {0xff, 0xff, 0xff}, otepReq(t, 79, nil), otepReq(t, 80, body)}},
		{name: "large", msgs: [][]byte{otepReq(t, 1, large), otepReq(t, 2, body), otepReq(t, 3, large)}},
		{name: "gzip", msgs: [][]byte{otepReq(t, 1, body), otepReq(t, 2, large)}, opts: []grpc.CallOption{grpc.UseCompressor(codec.Gzip)}},
		{name: "zstd", msgs: [][]byte{otepReq(t, 1, large)}, opts: []grpc.CallOption{grpc.UseCompressor(codec.Zstd)}},
		{name: "too-large", msgs: [][]byte{otepReq(t, 1, nil), otepReq(t, 2, large), otepReq(t, 3, nil)}, setup: func(pc *pipeline.Config, sc *Config) *testkit.Recorder {
			sc.MaxRecvMsgSize = 1 << 10
			return nil
		}},
		{name: "too-large-inflated", msgs: [][]byte{otepReq(t, 1, body), otepReq(t, 2, bytes.Repeat(body, 200))}, opts: []grpc.CallOption{grpc.UseCompressor(codec.Gzip)},
			setup: func(pc *pipeline.Config, sc *Config) *testkit.Recorder {
				sc.MaxRecvMsgSize = 64 << 10
				return nil
			}},
		{name: "no-token", ctx: context.Background(), msgs: [][]byte{otepReq(t, 1, body)}},
		{name: "unknown-method", path: "/otlpgate.otep.v1.StreamExporter/ExportProfiles", msgs: [][]byte{otepReq(t, 1, body)}},
		{name: "tenant", ctx: metadata.AppendToOutgoingContext(bearer, "x-scope-orgid", "acme"), msgs: [][]byte{otepReq(t, 1, body), otepReq(t, 2, body)},
			setup: func(pc *pipeline.Config, sc *Config) *testkit.Recorder {
				withTenants(nil)(t, pc, sc)
				return nil
			}},
		{name: "max-requests", msgs: [][]byte{otepReq(t, 1, body), otepReq(t, 2, body), otepReq(t, 3, body)}, setup: func(pc *pipeline.Config, sc *Config) *testkit.Recorder {
			sc.StreamMaxRequests = 2
			return nil
		}},
		{name: "queue-full", msgs: [][]byte{otepReq(t, 1, large), otepReq(t, 2, body)}, setup: func(pc *pipeline.Config, sc *Config) *testkit.Recorder {
			pc.QueueMaxBytes, pc.BatchMaxBytes = 64<<10, 64<<10
			return nil
		}},
		// The intake limiter is full. grpc-go's transport reads a stream's messages without a
		// reservation (an idle stream would hold one while it waits), and admits them; the own
		// transport reserves each message's length as a unary call's, and answers the messages
		// it has no room for FailedRetryable with the limiter's wait (30 ms), as grpc-go's path
		// answers a request admission refuses for the limiter (Busy).
		{name: "busy", msgs: [][]byte{otepReq(t, 1, body), otepReq(t, 2, body)}, setup: func(pc *pipeline.Config, sc *Config) *testkit.Recorder {
			sc.Limiter = admission.NewLimiter(admission.LimiterConfig{MaxBytes: 4 << 20, MaxDecodes: 2, Wait: 30 * time.Millisecond})
			sc.MaxRecvMsgSize = 4 << 20
			if !sc.Limiter.AcquireBytes(admission.IntakeGRPC, 4<<20, nil) {
				panic("cannot fill the limiter")
			}
			return nil
		}, own: func() []byte {
			var b []byte
			for id := uint64(1); id <= 2; id++ {
				m, _ := (&otepv1.ExportResponse{Id: id, ResultCode: otepv1.ResultCode_FailedRetryable, RetryDelayMs: 30}).MarshalVT()
				b = protowire.AppendBytes(b, m)
			}
			return b
		}()},
		{name: "ack-upstream", msgs: [][]byte{otepReq(t, 1, body), otepReq(t, 2, nil), otepReq(t, 3, body)}, setup: func(pc *pipeline.Config, sc *Config) *testkit.Recorder {
			pc.Ack, pc.Eager = pipeline.AckUpstream, true
			return nil
		}, unordered: true},
		{name: "ack-upstream-failed", msgs: [][]byte{otepReq(t, 1, body)}, setup: func(pc *pipeline.Config, sc *Config) *testkit.Recorder {
			pc.Ack, pc.Eager = pipeline.AckUpstream, true
			rec := testkit.NewRecorder("recorder")
			rec.SetFail(true)
			return rec
		}},
		{name: "limiter", msgs: [][]byte{otepReq(t, 1, body)}, setup: func(pc *pipeline.Config, sc *Config) *testkit.Recorder {
			sc.Limiter = admission.NewLimiter(admission.DefaultLimiterConfig())
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]result
			for i, tr := range transports {
				sc := configFor(tr)
				sc.AuthTokenFile = tok
				pc := testPipelineConfig()
				var rec *testkit.Recorder
				if tc.setup != nil {
					rec = tc.setup(&pc, &sc)
				}
				e := start(t, pc, sc, rec)
				ctx := tc.ctx
				if ctx == nil {
					ctx = bearer
				}
				path := tc.path
				if path == "" {
					path = streamTracesPath
				}
				ctx, cancel := context.WithTimeout(ctx, time.Minute)
				s, err := e.raw.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, path, tc.opts...)
				if err != nil {
					cancel()
					t.Fatal(err)
				}
				go func() {
					for _, m := range tc.msgs {
						var r codec.Raw
						r.SetBytes(m)
						if s.SendMsg(&r) != nil {
							return // the server ended the stream
						}
					}
					s.CloseSend()
				}()
				for {
					var resp otepv1.ExportResponse
					if err := s.RecvMsg(&resp); err != nil {
						if err != io.EOF {
							got[i].st = status.Convert(err)
						}
						break // io.EOF: a clean end, OK (a nil status)
					}
					b, _ := resp.MarshalVT()
					got[i].answers = protowire.AppendBytes(got[i].answers, b)
				}
				cancel()
				e.p.Flush()
				for _, g := range e.rec.Received() {
					got[i].bytes = append(append(got[i].bytes, g.Tenant+":"...), g.Body...)
				}
			}
			if tc.own != nil {
				if !bytes.Equal(got[1].answers, tc.own) || got[1].st != nil {
					t.Fatalf("otlpgate answered %x, end %v; want %x, OK", got[1].answers, got[1].st, tc.own)
				}
				t.Logf("grpc-go answered %x, otlpgate %x", got[0].answers, got[1].answers)
				return
			}
			if tc.unordered {
				got[0].answers, got[1].answers = sortedAnswers(got[0].answers), sortedAnswers(got[1].answers)
			}
			if !bytes.Equal(got[0].answers, got[1].answers) {
				t.Fatalf("answers: grpc-go %x, otlpgate %x (%v)", got[0].answers, got[1].answers, got[1].st)
			}
			if !proto.Equal(got[0].st.Proto(), got[1].st.Proto()) {
				t.Fatalf("end: grpc-go %v %q %v, otlpgate %v %q %v", got[0].st.Code(), got[0].st.Message(), got[0].st.Details(),
					got[1].st.Code(), got[1].st.Message(), got[1].st.Details())
			}
			if !bytes.Equal(got[0].bytes, got[1].bytes) {
				t.Fatalf("destination: grpc-go %d bytes, otlpgate %d bytes", len(got[0].bytes), len(got[1].bytes))
			}
			t.Logf("answers %x, end %v %q, %d bytes delivered", got[1].answers, got[1].st.Code(), got[1].st.Message(), len(got[1].bytes))
		})
	}
}

// sortedAnswers is answers, length-prefixed answers, in byte order.
func sortedAnswers(answers []byte) []byte {
	var each [][]byte
	for len(answers) > 0 {
		a, n := protowire.ConsumeBytes(answers)
		if n < 0 {
			break
		}
		each = append(each, a)
		answers = answers[n:]
	}
	slices.SortFunc(each, bytes.Compare)
	var out []byte
	for _, a := range each {
		out = protowire.AppendBytes(out, a)
	}
	return out
}

// A stream message the intake limiter has no room for is read past on the own transport and
// answered FailedRetryable by its id, its first field as OTEP clients write it; one whose id
// comes later cannot be answered by id, and ends its stream with RESOURCE_EXHAUSTED and
// RetryInfo. The connection serves on either way, the refused messages reserve nothing, and a
// message that finds room again is admitted.
func TestH2StreamNoRoom(t *testing.T) {
	sc := configFor(TransportOwn)
	sc.Limiter = admission.NewLimiter(admission.LimiterConfig{MaxBytes: 4 << 20, MaxConnBytes: 4 << 20, MaxDecodes: 2, Wait: 30 * time.Millisecond})
	sc.MaxRecvMsgSize = 4 << 20
	if !sc.Limiter.AcquireBytes(admission.IntakeGRPC, 4<<20, nil) {
		t.Fatal("cannot fill the limiter")
	}
	e := start(t, testPipelineConfig(), sc, nil)
	c := dialH2(t, e.srv.Addr().String(), "", nil, 1<<20)
	body := traceBody(t, 3, 2)

	first := c.open(t, streamTracesPath)
	req := otepReq(t, 5, body)
	c.data(t, first, grpcMsg(len(req), req))
	testkit.WaitFor(t, "the answer", func() bool { return countMessages(c.received(first)) == 1 })
	a := c.received(first)
	var resp otepv1.ExportResponse
	if err := resp.UnmarshalVT(a[5:]); err != nil || resp.Id != 5 || resp.ResultCode != otepv1.ResultCode_FailedRetryable || resp.RetryDelayMs != 30 {
		t.Fatalf("answer %v, %v; want id 5 FailedRetryable after 30 ms", &resp, err)
	}

	late := c.open(t, streamTracesPath)
	idLast := protowire.AppendVarint(append(append([]byte(nil), body...), 0x08), 6) // the entries, then the id
	c.data(t, late, grpcMsg(len(idLast), idLast))
	if end := c.waitEnd(t); end.id != late || end.status != strconv.Itoa(int(codes.ResourceExhausted)) {
		t.Fatalf("stream end %+v, want trailers-only RESOURCE_EXHAUSTED", end)
	}
	if end := c.waitEnd(t); end.id != late || !end.reset || end.code != http2.ErrCodeNo {
		t.Fatalf("after the trailers %+v, want RST_STREAM NO_ERROR: the client did not end its side", end)
	}
	u := c.open(t, "/no.such.Service/Export")
	c.dataEnd(t, u, grpcMsg(2, []byte{0x08, 0x63}))
	if end := c.waitEnd(t); end.id != u || end.status != strconv.Itoa(int(codes.Unimplemented)) {
		t.Fatalf("a call after the refusals: %+v", end)
	}
	// Only the limiter's own filling is held: the refused messages reserved nothing, and with
	// room again the stream's next message is admitted.
	sc.Limiter.ReleaseBytes(admission.IntakeGRPC, 4<<20)
	req = otepReq(t, 7, body)
	c.data(t, first, grpcMsg(len(req), req))
	testkit.WaitFor(t, "the answer once there is room", func() bool { return countMessages(c.received(first)) == 2 })
	a = c.received(first)
	a = a[5+binary.BigEndian.Uint32(a[1:5]):]
	resp.Reset()
	if err := resp.UnmarshalVT(a[5:]); err != nil || resp.Id != 7 || resp.ResultCode != otepv1.ResultCode_Success {
		t.Fatalf("answer %v, %v; want id 7 Success", &resp, err)
	}
	if held := sc.Limiter.Bytes(); held != 0 {
		t.Fatalf("%d bytes still reserved", held)
	}
}
