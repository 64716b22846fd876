package admin

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
)

func nilLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// recorder is an HTTP response recorder for the handlers' tests, not a destination.
type recorder struct {
	*httptest.ResponseRecorder
	body *bytes.Buffer
}

func newRecorder() recorder {
	r := httptest.NewRecorder()
	return recorder{r, r.Body}
}

func mustRequest(path string) *http.Request { return httptest.NewRequest(http.MethodGet, path, nil) }
