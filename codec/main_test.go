package codec

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Registration must precede every server and client, as in cmd/.
	RegisterCompressors()
	goleak.VerifyTestMain(m)
}
