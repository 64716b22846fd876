package strictsink

import (
	"context"
	"net"
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
)

// ServeCollectorHTTP serves h on 127.0.0.1 behind the server the Collector's confighttp builds
// (its decompression of gzip, zstd and the other Content-Encodings, with its defaults) until the
// test ends, and returns the address.
func ServeCollectorHTTP(t testing.TB, h http.Handler) string {
	t.Helper()
	cfg := confighttp.NewDefaultServerConfig()
	settings := component.TelemetrySettings{Logger: zap.NewNop(), TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()}
	srv, err := cfg.ToServer(context.Background(), nil, settings, h)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}
