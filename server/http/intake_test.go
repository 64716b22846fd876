package httpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/internal/admission"
)

// A request the intake limiter refuses within -intake.wait is answered 429 with Retry-After
// (the wait, rounded up to a whole second) and a RESOURCE_EXHAUSTED status, counted in both
// the limiter's and the intake's refusal metrics; nothing reaches the destination, and the
// same request succeeds once the limiter has room. The limiter holds nothing afterwards.
func TestIntakeBusyAnswer(t *testing.T) {
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 1 << 20, Wait: 30 * time.Millisecond})
	sc := DefaultConfig()
	sc.MaxRequestBytes = 512 << 10
	sc.Limiter = lim
	e := start(t, testPipelineConfig(), sc, nil)
	body := traces(t, 1, 3)
	// Leave less room than the smallest body buffer (1KiB) takes.
	const held = 1<<20 - 512
	if !lim.AcquireBytes(admission.IntakeHTTP, held, nil) {
		t.Fatal("cannot fill the limiter")
	}
	refused := intakeRefused(t, "http", "bytes")
	busy := testutil.ToFloat64(ctr.rejected[rejectBusy])
	for _, f := range []struct {
		ct   string
		body []byte
	}{{ctProto, body}, {ctJSON, []byte(`{"resourceSpans":[]}`)}} {
		r := e.do(t, http.MethodPost, "/v1/traces", map[string]string{"Content-Type": f.ct}, f.body)
		if f.ct == ctJSON {
			// Answered in the request's encoding.
			var st struct {
				Code    codes.Code
				Message string
			}
			if err := json.Unmarshal(r.body, &st); err != nil || r.status != 429 || st.Code != codes.ResourceExhausted || st.Message != msgBusy {
				t.Fatalf("JSON: %d %s (%v), want 429 with RESOURCE_EXHAUSTED %q", r.status, r.body, err, msgBusy)
			}
		} else {
			wantStatus(t, r, 429, codes.ResourceExhausted, msgBusy)
		}
		if got := r.header.Get("Retry-After"); got != "1" {
			t.Fatalf("Retry-After %q, want \"1\"", got)
		}
	}
	if got := intakeRefused(t, "http", "bytes") - refused; got != 2 {
		t.Fatalf("otlpgate_intake_refused_total{intake=http,resource=bytes} grew by %v, want 2", got)
	}
	if got := testutil.ToFloat64(ctr.rejected[rejectBusy]) - busy; got != 2 {
		t.Fatalf("otlpgate_http_rejected_requests_total{reason=intake_busy} grew by %v, want 2", got)
	}
	e.p.Flush()
	if _, items := e.rec.Payload(); items != 0 {
		t.Fatalf("%d items reached the destination while busy", items)
	}
	lim.ReleaseBytes(admission.IntakeHTTP, held)
	if r := e.post(t, "/v1/traces", body); r.status != 200 {
		t.Fatalf("with room: %d %q", r.status, r.body)
	}
	e.p.Flush()
	if got, items := e.rec.Payload(); items != 3 || !bytes.Equal(got, body) {
		t.Fatalf("destination got %d items (%d bytes), want the 3 spans of the request", items, len(got))
	}
	if lim.Bytes() != 0 {
		t.Fatalf("limiter holds %d bytes after the requests", lim.Bytes())
	}
	if lim.HighWaterBytes() != held {
		t.Fatalf("high water %d, want %d (what the test held; the refused requests took nothing)", lim.HighWaterBytes(), held)
	}
}

// A refused request's connection stays usable: a small unread body is dropped and the next
// request on the same connection is read from its start; a refused chunked body, whose size
// is not known, closes the connection instead of being read.
func TestIntakeBusyKeepsConnection(t *testing.T) {
	lim := admission.NewLimiter(admission.LimiterConfig{MaxBytes: 1 << 20, Wait: 30 * time.Millisecond})
	sc := DefaultConfig()
	sc.MaxRequestBytes = 512 << 10
	sc.Limiter = lim
	e := start(t, testPipelineConfig(), sc, nil)
	body := traces(t, 2, 5)
	c := dial(t, e)
	br := bufio.NewReader(c)
	post := func(b []byte) {
		fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n", len(b))
		c.Write(b)
	}
	const held = 1<<20 - 512
	if !lim.AcquireBytes(admission.IntakeHTTP, held, nil) {
		t.Fatal("cannot fill the limiter")
	}
	post(body)
	if r := readResponse(t, br); r.status != 429 || r.header.Get("Retry-After") != "1" || r.header.Get("Connection") == "close" {
		t.Fatalf("busy: %d, Retry-After %q, Connection %q", r.status, r.header.Get("Retry-After"), r.header.Get("Connection"))
	}
	lim.ReleaseBytes(admission.IntakeHTTP, held)
	post(body)
	if r := readResponse(t, br); r.status != 200 {
		t.Fatalf("next request on the connection: %d %q", r.status, r.body)
	}
	lim.AcquireBytes(admission.IntakeHTTP, held, nil)
	chunked := fmt.Sprintf("POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	io.WriteString(c, chunked)
	if r := readResponse(t, br); r.status != 429 || r.header.Get("Retry-After") != "1" {
		t.Fatalf("chunked while the limiter is full: %d, Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
	// The unread chunked body is not read to find the next request: the connection closes.
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after a refused chunked body the connection reads %v, want EOF", err)
	}
	lim.ReleaseBytes(admission.IntakeHTTP, held)
	c2 := dial(t, e)
	br2 := bufio.NewReader(c2)
	io.WriteString(c2, chunked)
	if r := readResponse(t, br2); r.status != 200 {
		t.Fatalf("chunked with room: %d %q", r.status, r.body)
	}
	e.p.Flush()
	if got, items := e.rec.Payload(); items != 10 || !bytes.Equal(got, append(append([]byte(nil), body...), body...)) {
		t.Fatalf("destination got %d items (%d bytes), want the two requests' 10 spans", items, len(got))
	}
	if lim.Bytes() != 0 {
		t.Fatalf("limiter holds %d bytes after the requests", lim.Bytes())
	}
}

// An OTLP/HTTP protobuf request with unknown top-level fields is admitted with them stripped,
// as on the gRPC intake (both go through pipeline.Pipeline.Admit): the batch holds the resource
// entries only and the stripped fields are counted. (A JSON body's unknown keys are ignored by
// the transcoder and never become protobuf fields, so nothing is left to strip or count.)
func TestIntakeStripsUnknownTopLevelFields(t *testing.T) {
	e := start(t, testPipelineConfig(), DefaultConfig(), nil)
	entries := traces(t, 3, 2)
	odd := []byte{0x12, 0x00, 0x28, 0x07} // field 2 (empty bytes) and field 5 (varint 7)
	before := stripped(t, fastpath.Traces)
	if r := e.post(t, "/v1/traces", append(append([]byte(nil), odd...), entries...)); r.status != 200 || len(r.body) != 0 {
		t.Fatalf("odd fields before the entries: %d %q", r.status, r.body)
	}
	if r := e.post(t, "/v1/traces", append(append([]byte(nil), entries...), odd...)); r.status != 200 || len(r.body) != 0 {
		t.Fatalf("odd fields after the entries: %d %q", r.status, r.body)
	}
	if got := stripped(t, fastpath.Traces) - before; got != 4 {
		t.Fatalf("otlpgate_fastpath_stripped_fields_total{signal=traces} grew by %v, want 4", got)
	}
	e.p.Flush()
	if got, items := e.rec.Payload(); items != 4 || !bytes.Equal(got, append(append([]byte(nil), entries...), entries...)) {
		t.Fatalf("destination got %d items (%d bytes), want exactly the entries of both requests (4 spans, %d bytes)", items, len(got), 2*len(entries))
	}
}

// stripped reads otlpgate_fastpath_stripped_fields_total for sig.
func stripped(t *testing.T, sig fastpath.Signal) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "otlpgate_fastpath_stripped_fields_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "signal" && l.GetValue() == sig.String() {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
