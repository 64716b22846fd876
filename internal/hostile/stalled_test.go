package hostile

import (
	be "encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"
)

// Finding 5, against the binary: clients that announce large requests and then stall. Before,
// the one intake limiter reserved what each declared and held it until a read timeout, so 4
// HTTP connections with a large Content-Length, or 64 Kafka connections sending 12 bytes, locked
// every other client out. Now bytes are charged as they arrive and Kafka has a budget of its
// own: the well-behaved client (HTTP and gRPC) is served throughout, within -intake.wait.
func TestStalledRequestsDoNotLockOutOthers(t *testing.T) {
	const wait = time.Second
	// A small budget, so that the declared sizes alone would have filled it many times over.
	g := startGate(t, "-intake.max-bytes", "8MiB", "-intake.max-conn-bytes", "4MiB", "-grpc.max-recv-msg-size", "1MiB", "-http.max-request-bytes", "4MiB",
		"-intake.unauthenticated.max-bytes", "8MiB", "-kafka.max-request-bytes", "4MiB", "-kafka.telemetry-max-bytes", "1MiB",
		"-intake.wait", wait.String(), "-http.read-timeout", "60s")
	w := watch(t, g, 100*time.Millisecond, 5*time.Second)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// 16 HTTP bodies announcing 4 MiB each (8 times the budget), 1 KiB sent, then silence.
	for i := range 16 {
		c, err := net.Dial("tcp", g.HTTP)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n", 4<<20)
		c.Write(make([]byte, 1024))
		_ = i
	}
	// 64 Kafka connections announcing 4 MiB requests and sending 12 bytes of them.
	for range 64 {
		c, err := net.Dial("tcp", g.Kafka)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var b [16]byte
		be.BigEndian.PutUint32(b[:4], 4<<20-64)
		c.Write(b[:16])
	}
	// The well-behaved client must keep being served while the stalled requests sit there.
	w.waitServed(t, 30, 60*time.Second)
	w.end(t, wait)
	g.alive(t)
	if rss := g.PeakRSS(t); rss > 128<<20 {
		t.Errorf("peak RSS %d MiB with stalled requests, bound 128 MiB", rss>>20)
	}
}
