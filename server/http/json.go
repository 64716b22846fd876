package httpserver

import (
	"errors"

	"github.com/otlpgate/otlpgate/fastpath"
)

// jsonSupported is false until the OTLP/JSON transcoder is wired: application/json is then
// answered 415.
const jsonSupported = false

var errNoJSON = errors.New("httpserver: OTLP/JSON is not supported")

func (s *Server) admitJSON(_ *scratch, _ fastpath.Signal, _ []byte) (*fastpath.Batch, int, error) {
	return nil, refusedInvalid, errNoJSON
}
