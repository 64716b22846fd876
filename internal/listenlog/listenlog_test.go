package listenlog

import (
	"reflect"
	"testing"
)

// The start log of an otlpgate process, text and JSON, as it is written: the parser finds each
// listener's bound address and ignores the other lines (the UDS intake says "listening" with a
// socket, not an addr).
func TestAddrs(t *testing.T) {
	text := `time=2026-11-26T04:05:41.295Z level=INFO msg="otlpgate starting" gomaxprocs=2 go=go1.26.8
time=2026-11-26T04:05:41.296Z level=INFO msg="admin listening" addr=127.0.0.1:40001
time=2026-11-26T04:05:41.296Z level=INFO msg="pprof listening" addr=127.0.0.1:44133
time=2026-11-26T04:05:41.296Z level=INFO msg="grpc intake listening" addr=127.0.0.1:42643 tls=false mtls=false
time=2026-11-26T04:05:41.296Z level=INFO msg="http intake listening" addr=[::1]:38133 tls=false mtls=false cors=false
time=2026-11-26T04:05:41.296Z level=INFO msg="kafka telemetry listening" addr=127.0.0.1:38439 subscriptions=1
time=2026-11-26T04:05:41.297Z level=INFO msg=listening intake=uds socket=/tmp/s mode=-rw-rw----
time=2026-11-26T04:05:41.297Z level=ERROR msg="grpc intake listening" addr=notanaddress
`
	want := map[string]string{Admin: "127.0.0.1:40001", Pprof: "127.0.0.1:44133", GRPC: "127.0.0.1:42643",
		HTTP: "[::1]:38133", Kafka: "127.0.0.1:38439"}
	if got := Addrs(text); !reflect.DeepEqual(got, want) {
		t.Errorf("text: got %v, want %v", got, want)
	}
	js := `{"time":"2026-11-26T04:05:41.295Z","level":"INFO","msg":"otlpgate starting"}
{"time":"2026-11-26T04:05:41.296Z","level":"INFO","msg":"grpc intake listening","addr":"127.0.0.1:42643","tls":false}
{"time":"2026-11-26T04:05:41.296Z","level":"INFO","msg":"listening","intake":"uds","socket":"/tmp/s"}
{"time":"2026-11-26T04:05:41.296Z","level":"INFO","msg":"admin listening","addr":"127.0.0.1:40001"}`
	want = map[string]string{GRPC: "127.0.0.1:42643", Admin: "127.0.0.1:40001"}
	if got := Addrs(js); !reflect.DeepEqual(got, want) {
		t.Errorf("json: got %v, want %v", got, want)
	}
}

// Line writes what Addrs reads.
func TestLine(t *testing.T) {
	if got := Addrs(Line(Relay, "127.0.0.1:7") + Line(Forward, "[::1]:8")); !reflect.DeepEqual(got, map[string]string{Relay: "127.0.0.1:7", Forward: "[::1]:8"}) {
		t.Errorf("got %v", got)
	}
}
