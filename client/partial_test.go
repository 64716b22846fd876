package client

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

// An upstream's response may carry unknown fields of any wire type, groups among them; the
// rejected count beside them is still read, as a decoder reads it. A response that cannot be
// decoded at all counts nothing.
func TestRejectedItemsBesideUnknownFields(t *testing.T) {
	partial := func(extra []byte) []byte {
		var ps []byte
		ps = protowire.AppendTag(ps, 1, protowire.VarintType)
		ps = protowire.AppendVarint(ps, 7)
		ps = append(ps, extra...)
		ps = protowire.AppendTag(ps, 2, protowire.BytesType)
		ps = protowire.AppendString(ps, "seven spans refused")
		var resp []byte
		resp = protowire.AppendTag(resp, 1, protowire.BytesType)
		return protowire.AppendBytes(resp, ps)
	}
	var group []byte
	group = protowire.AppendTag(group, 777, protowire.StartGroupType)
	group = protowire.AppendTag(group, 6, protowire.VarintType)
	group = protowire.AppendVarint(group, 48)
	group = protowire.AppendTag(group, 777, protowire.EndGroupType)
	var fixed []byte
	fixed = protowire.AppendTag(fixed, 9, protowire.Fixed64Type)
	fixed = protowire.AppendFixed64(fixed, 1)
	for _, c := range []struct {
		name string
		resp []byte
		want int64
	}{
		{"plain", partial(nil), 7},
		{"an unknown fixed64 field", partial(fixed), 7},
		{"an unknown group", partial(group), 7},
		{"an unknown group at the top level", append(partial(nil), group...), 7},
		{"truncated", partial(nil)[:5], 0},
		{"empty", nil, 0},
	} {
		if got := readPartialSuccess(c.resp); got.rejected != c.want || (c.want != 0 && string(got.message) != "seven spans refused") {
			t.Errorf("%s: rejected %d (%q), want %d", c.name, got.rejected, got.message, c.want)
		}
	}
}

// partialCase is an upstream's partial success and what otlpgate must count of it, for ten
// batches of 100 spans.
type partialCase struct {
	name       string
	rejected   int64 // per request, as the upstream reports it
	counted    int   // partially rejected items, over the ten requests
	impossible int   // impossible partial successes
}

var partialCases = []partialCase{
	{"30 of 100", 30, 300, 0},
	{"a warning, none rejected", 0, 0, 0},
	{"a million of 100", 1_000_000, 1000, 10},
	{"2^63-1 of 100", 1<<63 - 1, 1000, 10},
	{"-1 of 100", -1, 0, 10},
}

// partialMessageSent is the error_message the upstreams send: longer than what is kept of it.
var partialMessageSent = "spans without a name: " + strings.Repeat("x", 100<<10)

// checkPartial checks what d counted, logged and noted of the partial successes of c, with ten
// batches of 100 spans delivered.
func checkPartial(t *testing.T, d *Dest, logs *testkit.LockedBuffer, c partialCase) {
	t.Helper()
	checkNoDrops(t, d)
	if a := value(d.m.ackedItem); a != 1000 {
		t.Errorf("acknowledged %d items, want 1000", a)
	}
	if got, imp := value(d.m.partialRejected), value(d.m.impossiblePartial); got != c.counted || imp != c.impossible {
		t.Errorf("partially rejected %d, impossible answers %d; want %d, %d", got, imp, c.counted, c.impossible)
	}
	line := "upstream rejected part of a batch"
	if c.impossible > 0 {
		line = "upstream reported a partial success outside the request's items: counted within them"
	}
	out := logs.String()
	// One line a second at most: ten answers in quick succession make one or more.
	if n := strings.Count(out, line); n < 1 || n > 10 || !strings.Contains(out, "spans without a name: xxx") {
		t.Errorf("%d lines %q quoting the upstream's message, want 1 to 10:\n%.2000s", n, line, out)
	}
	if strings.Contains(out, strings.Repeat("x", maxPartialMessage)) {
		t.Errorf("the log quotes the upstream's message past %d bytes", maxPartialMessage)
	}
	msg, _ := d.LastError()
	if !strings.HasPrefix(msg, "partial success: ") || !strings.Contains(msg, "spans without a name: xxx") || len(msg) > maxErrorMessage+3 {
		t.Errorf("last error %q, want the partial success with the upstream's message, cut", msg)
	}
}

// A v1 gRPC upstream's partial success counts its rejected spans at most the request's, never
// below none: a million or 2^63-1 rejected of 100 counts 100 per request, and the answer as
// impossible; its message, cut, is logged and becomes the destination's last error.
func TestV1PartialSuccessCounts(t *testing.T) {
	for _, c := range partialCases {
		t.Run(c.name, func(t *testing.T) {
			u := newUpstream(t)
			u.v1Rejected, u.v1Message = c.rejected, partialMessageSent
			d, logs := startDestLogged(t, unaryConfig(t, u.addr, ProtocolV1, 2))
			f := newFeeder(t, d)
			f.send(0, 10, 100, 10)
			if ok := f.waitAll(); !allTrue(ok) {
				t.Fatalf("delivered %v, want all", ok)
			}
			if n := len(u.received()); n != 10 {
				t.Errorf("%d calls, want 10", n)
			}
			checkPartial(t, d, logs, c)
		})
	}
}

// The same for an OTLP/HTTP upstream, whose answer (with the upstream's message) is over 64KiB:
// read whole, its count is not lost.
func TestHTTPPartialSuccessCounts(t *testing.T) {
	for _, c := range partialCases {
		t.Run(c.name, func(t *testing.T) {
			body, err := (&coltracev1.ExportTraceServiceResponse{PartialSuccess: &coltracev1.ExportTracePartialSuccess{
				RejectedSpans: c.rejected, ErrorMessage: partialMessageSent,
			}}).MarshalVT()
			if err != nil {
				t.Fatal(err)
			}
			if len(body) <= 64<<10 {
				t.Fatalf("answer of %d bytes, want over 64KiB", len(body))
			}
			u := newHTTPUpstream(t, nil)
			u.answer = func(h hit, ctx *fasthttp.RequestCtx) {
				ctx.SetContentType("application/x-protobuf")
				ctx.SetBody(body)
			}
			d, logs := startDestLogged(t, httpConfig(t, u, "concurrency=2"))
			f := newFeeder(t, d)
			f.send(0, 10, 100, 10)
			if ok := f.waitAll(); !allTrue(ok) {
				t.Fatalf("delivered %v, want all", ok)
			}
			if n := len(u.received()); n != 10 {
				t.Errorf("%d attempts, want 10", n)
			}
			checkPartial(t, d, logs, c)
		})
	}
}
