package bench

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/otlpgate/otlpgate/codec"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
)

// Every byte goes through the relay to the target and back, in order, spliced or through a
// buffer smaller than the data; a client that half-closes its side gets the target's end, and
// Close ends a relayed connection still open.
func TestRelayCarriesBytes(t *testing.T) {
	for _, buf := range []int{0, 4096} {
		t.Run(map[int]string{0: "splice", 4096: "copy"}[buf], func(t *testing.T) { testRelayCarriesBytes(t, buf) })
	}
	if _, err := StartRelay("127.0.0.1:0", "127.0.0.1:1", -1); err == nil {
		t.Fatal("a negative buffer size was taken")
	}
}

func testRelayCarriesBytes(t *testing.T, buf int) {
	srv := echo(t)
	r, err := StartRelay("127.0.0.1:0", srv.Addr().String(), buf)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sent := make([]byte, 3<<20)
	for i := range sent {
		sent[i] = byte(rand.Uint32())
	}
	go func() {
		c.Write(sent)
		c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c) // ends when the echo, having read the end, closes
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent) {
		t.Fatalf("%d bytes came back of %d sent, or changed in transit", len(got), len(sent))
	}

	// A connection left open is closed by Close (goleak, in TestMain, checks that its
	// goroutines end).
	open, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(open, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if n, err := open.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes from a connection the relay closed", n)
	}
}

// The anchor's load goes through the relay to the sink in every intake and compression, and
// the sink reads every request it sent: the relay passes gRPC and OTLP/HTTP through untouched,
// compressed or not.
func TestAnchorLoadThroughRelay(t *testing.T) {
	codec.RegisterCompressors()
	sink, err := StartSink("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	hsink, err := sink.StartHTTP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hsink.Close()
	shape := otlpgen.Semconv
	shape.Spans = 20
	for _, comp := range []string{"none", "gzip", "zstd"} {
		bodies, size, err := buildBodies(context.Background(), shape, 3, comp, sink.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if comp != "none" && bodies.wire >= size {
			t.Errorf("%s: %d bytes on the wire of %d", comp, bodies.wire, size)
		}
		for _, intake := range []string{"grpc", "http"} {
			target := sink.Addr()
			if intake == "http" {
				target = hsink.Addr()
			}
			buf := 0 // the copy relay on the HTTP intake, the splice relay on gRPC
			if intake == "http" {
				buf = 256 << 10
			}
			r, err := StartRelay("127.0.0.1:0", target, buf)
			if err != nil {
				t.Fatal(err)
			}
			sink.Reset()
			res, err := runOpenLoad(context.Background(), r.Addr(), intake, bodies, 7, 1000, 4, 0)
			r.Close()
			if err != nil || res.FirstErr != nil {
				t.Fatalf("%s %s: %v %v", intake, comp, err, res.FirstErr)
			}
			batches, spans, bad := sink.Counts()
			if res.Sent != 7 || res.Acked != 7 || batches != 7 || spans != 7*20 || bad != 0 {
				t.Fatalf("%s %s: sent %d, acknowledged %d; the sink read %d requests, %d spans, %d unreadable; want 7, 7, 7, 140, 0",
					intake, comp, res.Sent, res.Acked, batches, spans, bad)
			}
		}
	}
}
