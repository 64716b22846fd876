package httpserver

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// FuzzHandler feeds arbitrary bodies under each content type and encoding through the handler:
// it must never panic, answer only with the codes docs/intakes/otlp-http.md lists, and put into the pipeline
// only what a full scan accepts.
func FuzzHandler(f *testing.F) {
	req := traces(f, 1, 3)
	f.Add(uint8(0), uint8(0), req)
	f.Add(uint8(0), uint8(1), gzipped(f, req))
	f.Add(uint8(0), uint8(2), zstded(f, req))
	f.Add(uint8(0), uint8(0), append(append([]byte{}, badSpanEntry...), req...))
	f.Add(uint8(1), uint8(0), []byte(sampleJSON))
	f.Add(uint8(1), uint8(1), gzipped(f, []byte(sampleJSON)))
	f.Add(uint8(1), uint8(0), []byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"kvlistValue":{"values":[]}}}]}]}]}`))
	f.Add(uint8(2), uint8(3), []byte{0xff})
	cts := []string{ctProto, ctJSON, "text/plain"}
	codings := []string{"", "gzip", "zstd", "br"}
	h := newHandlerHarness(f)
	f.Fuzz(func(t *testing.T, ct, coding uint8, body []byte) {
		ctx := h.ctx(codings[int(coding)%len(codings)], body)
		ctx.Request.Header.SetContentType(cts[int(ct)%len(cts)])
		h.srv.handle(ctx)
		switch code := ctx.Response.StatusCode(); code {
		case fasthttp.StatusOK, fasthttp.StatusBadRequest, fasthttp.StatusUnsupportedMediaType, fasthttp.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for a body alone", code)
		}
	})
}
