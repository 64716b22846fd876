package client

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"

	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// startDestLogged is startDest with the destination's log lines kept for the test.
func startDestLogged(t *testing.T, cfg Config) (*Dest, *testkit.LockedBuffer) {
	t.Helper()
	var logs testkit.LockedBuffer
	d, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	d.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		d.Shutdown(ctx)
	})
	return d, &logs
}

// spansIn counts the spans of v1 trace bodies.
func spansIn(t *testing.T, bodies ...[]byte) int {
	t.Helper()
	n := 0
	for _, b := range bodies {
		for _, rs := range testkit.Traces(t, b).ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				n += len(ss.Spans)
			}
		}
	}
	return n
}

// checkNoDrops fails the test for every request d dropped, by reason.
func checkNoDrops(t *testing.T, d *Dest) {
	t.Helper()
	for reason := range d.m.dropped {
		if v, items := value(d.m.dropped[reason]), value(d.m.droppedItems[reason]); v != 0 || items != 0 {
			t.Errorf("dropped %d requests (%d items) with reason %s, want none", v, items, DropReason(reason))
		}
	}
}

// An upstream (grpc-go) that takes every request and answers with more than max-recv-msg-size
// (4MiB by default, grpc-go's own receive limit): 400 spans in four calls reach it, each once,
// and all of them count as delivered, none as dropped; the four answers are counted as
// unreadable, logged, and shown as the last error. With max-recv-msg-size above the answers,
// they are read as any answer.
func TestUnaryAnswerOverMaxRecvMsgSize(t *testing.T) {
	const batches, spans = 4, 100
	for _, c := range []struct {
		name, protocol string
		maxRecv        int
		unreadable     int
	}{
		{"v1", ProtocolV1, 0, batches},
		{"otep", ProtocolOTEP, 0, batches},
		{"v1 within max-recv-msg-size=8MiB", ProtocolV1, 8 << 20, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newUpstream(t)
			u.answerPad = 5 << 20
			cfg := unaryConfig(t, u.addr, c.protocol, 1)
			if c.maxRecv != 0 {
				cfg.MaxRecvMsgSize = c.maxRecv
			}
			d, logs := startDestLogged(t, cfg)
			f := newFeeder(t, d)
			f.send(0, batches, spans, 10)
			if ok := f.waitAll(); !allTrue(ok) {
				t.Fatalf("delivered %v, want all", ok)
			}
			got := u.received()
			var bodies [][]byte
			for _, g := range got {
				bodies = append(bodies, g.body)
			}
			if c := count(u.tags()); len(got) != batches || !mapsEqual(c, map[string]int{"b0": 1, "b1": 1, "b2": 1, "b3": 1}) {
				t.Errorf("calls per batch %v, want b0..b3 once each", c)
			}
			if n := spansIn(t, bodies...); n != batches*spans {
				t.Errorf("the upstream received %d spans, want %d", n, batches*spans)
			}
			checkNoDrops(t, d)
			if a := value(d.m.ackedItem); a != batches*spans {
				t.Errorf("acknowledged %d items, want %d", a, batches*spans)
			}
			if n := value(d.m.unreadableAnswers); n != c.unreadable {
				t.Errorf("unreadable answers %d, want %d", n, c.unreadable)
			}
			line := "upstream answer over max-recv-msg-size not read: the request counts as delivered"
			msg, _ := d.LastError()
			if c.unreadable == 0 {
				if strings.Contains(logs.String(), line) || msg != "" {
					t.Errorf("an answer within the bound was reported: last error %q, log:\n%s", msg, logs)
				}
				return
			}
			// One line a second at most: four answers in quick succession make one or more.
			if n := strings.Count(logs.String(), line); n < 1 || n > batches {
				t.Errorf("%d log lines of an unreadable answer, want 1 to %d:\n%s", n, batches, logs)
			}
			if !strings.Contains(logs.String(), "max_recv_msg_size=4194304") || !strings.Contains(msg, "max-recv-msg-size (4194304 bytes)") {
				t.Errorf("last error %q, log:\n%s\nwant both to name max-recv-msg-size 4194304", msg, logs)
			}
		})
	}
}

// An upstream that refuses a request over its own receive limit answers RESOURCE_EXHAUSTED with
// the very words grpc-go uses for an answer over ours (both limits 4MiB here). The upstream did
// not take it: that is a rejection, dropped and counted as one, not an unreadable answer.
func TestUnaryUpstreamRefusesRequestOverItsLimit(t *testing.T) {
	u := newUpstream(t, grpc.MaxRecvMsgSize(4<<20))
	d := startDest(t, unaryConfig(t, u.addr, ProtocolV1, 1))
	f := newFeeder(t, d)
	f.send(0, 1, 1, 5<<20)
	if ok := f.waitAll(); ok[0] {
		t.Fatal("a request over the upstream's limit was delivered")
	}
	if n := len(u.received()); n != 0 {
		t.Errorf("the upstream took %d requests, want 0", n)
	}
	if r, n := value(d.m.dropped[DropRejected]), value(d.m.unreadableAnswers); r != 1 || n != 0 {
		t.Errorf("rejected %d, unreadable answers %d; want 1, 0", r, n)
	}
	if msg, _ := d.LastError(); !strings.Contains(msg, "ResourceExhausted: grpc: received message larger than max") {
		t.Errorf("last error %q, want the upstream's refusal", msg)
	}
}

// An OTLP/HTTP answer body is read up to max-recv-msg-size, not a fixed 64KiB: a partial
// success that quotes at length is counted. A 2xx body over the bound is not read: the batch
// counts as delivered, the answer as unreadable; a 400 with such a body is still a rejection.
func TestHTTPAnswerOverMaxRecvMsgSize(t *testing.T) {
	answer := func(rejected int64, msg int) []byte {
		b, err := (&coltracev1.ExportTraceServiceResponse{PartialSuccess: &coltracev1.ExportTracePartialSuccess{
			RejectedSpans: rejected, ErrorMessage: strings.Repeat("x", msg),
		}}).MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	over, within := answer(5, 300<<10), answer(2, 100<<10) // around max-recv-msg-size=256KiB
	u := newHTTPUpstream(t, nil)
	u.answer = func(h hit, ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/x-protobuf")
		switch h.tag {
		case "b0":
			ctx.SetBody(over)
		case "b1":
			ctx.SetStatusCode(http.StatusBadRequest)
			ctx.SetBody(over)
		case "b2":
			ctx.SetBody(within) // over 64KiB, within the bound: read
		}
	}
	d, logs := startDestLogged(t, httpConfig(t, u, "concurrency=1,max-recv-msg-size=256KiB"))
	f := newFeeder(t, d)
	f.send(0, 3, 10, 10)
	if ok := f.waitAll(); !ok[0] || ok[1] || !ok[2] {
		t.Fatalf("delivered %v, want [true false true]", ok)
	}
	if n := len(u.received()); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}
	if got := value(d.m.partialRejected); got != 2 {
		t.Errorf("partially rejected %d, want the 2 of the body within the bound", got)
	}
	if r, n, a := value(d.m.dropped[DropRejected]), value(d.m.unreadableAnswers), value(d.m.ackedItem); r != 1 || n != 1 || a != 20 {
		t.Errorf("rejected %d, unreadable answers %d, acknowledged items %d; want 1, 1, 20", r, n, a)
	}
	if !strings.Contains(logs.String(), "upstream answer over max-recv-msg-size not read") {
		t.Errorf("no log line of the unreadable answer:\n%s", logs)
	}
}
