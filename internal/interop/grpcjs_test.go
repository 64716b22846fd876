package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// nodeDir holds the grpc-js peer and its pinned modules (npm ci, make interop-deps).
const nodeDir = "testdata/node"

var grpcJS = peer{
	name: "grpc-js",
	available: func(t testing.TB) {
		if _, err := exec.LookPath("node"); err != nil {
			need(t, "node is not installed (apt-get install nodejs npm)")
		}
		if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "@grpc", "grpc-js", "package.json")); err != nil {
			need(t, "the grpc-js peer's modules are not installed (make interop-deps: npm ci in internal/interop/testdata/node)")
		}
	},
	command: func(t testing.TB, opts map[string]any) (string, []string) {
		return "node", []string{filepath.Join(nodeDir, "peer.js"), jsonArg(t, opts)}
	},
	// grpc-js compresses with gzip and deflate; it has no zstd.
	compressions: []string{"gzip"},
}

// grpc-js clients (@grpc/grpc-js with messages encoded by protobufjs) export traces, metrics
// and logs to otlpgate's intake on both transports, plain and TLS, identity and gzip, one
// message of about 2 MiB: the Collector's decoder upstream gets exactly their spans, metrics
// and records, each once.
func TestGRPCJSClient(t *testing.T) { testPeerClients(t, grpcJS) }

// grpc-js clients make calls of every signal for about a second to an intake, on each
// transport, that sends GOAWAY to connections older than 150ms: every call succeeds, the
// client dials again after each GOAWAY, and exactly what it sent arrives, each item once.
func TestGRPCJSClientGoAway(t *testing.T) { testPeerClientsGoAway(t, grpcJS) }

// grpc-js clients sending a request over -grpc.max-recv-msg-size, plain and gzip (too large
// once inflated), get RESOURCE_EXHAUSTED in grpc-go's words from both transports, and the
// next call on the channel succeeds.
func TestGRPCJSClientTooLarge(t *testing.T) { testPeerClientsTooLarge(t, grpcJS) }

// grpc-js clients make 202 calls at once, two of them 2 MiB, against an intake that lets 4
// streams of a connection open at once, on both transports: every call succeeds and exactly
// what was sent arrives, each item once.
func TestGRPCJSClientParallel(t *testing.T) { testPeerClientsParallel(t, grpcJS) }

// A grpc-js server is the upstream of a destination on both transports, plain and
// uncompressed, and TLS with gzip: it decodes exactly the spans, metrics and records sent to
// otlpgate, each once, the large batch of about 2 MiB included, and every request in the
// destination's grpc-encoding.
func TestGRPCJSServer(t *testing.T) { testPeerServers(t, grpcJS) }

// A grpc-js upstream whose HTTP/2 session lowers SETTINGS_INITIAL_WINDOW_SIZE to 4 KiB as the
// first call of a connection arrives, the 2 MiB batch being that call: the stream's window
// goes below zero under the bytes already sent, and otlpgate's destination, on each
// transport, must wait for the peer's WINDOW_UPDATEs and send the rest in 4 KiB steps. The
// peer decodes exactly what was sent, each item once.
func TestGRPCJSServerShrinksWindow(t *testing.T) {
	grpcJS.available(t)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			srv, g := startPeerUpstream(t, grpcJS, map[string]any{"mode": "server", "shrink": 4096},
				"name=peer,protocol=v1,retry-initial=20ms,transport="+tr)
			calls := []call{{Signal: "traces", First: 100, Count: 200, Pad: 10 << 10}}
			sendToGate(t, g.GRPC, calls)
			calls2 := plan("shrink-"+tr, 1, false)
			sendToGate(t, g.GRPC, calls2)
			var w want
			w.add(calls)
			w.add(calls2)
			checkPeer(t, srv, w, "identity")
		})
	}
}

// A grpc-js upstream that sends GOAWAY on each connection as its second call arrives, naming
// that call's stream as the last it processes, while otlpgate's destination (four calls in
// flight, on each transport) has more calls open or opening on it: the calls above the last
// stream id (ignored, or reset with REFUSED_STREAM when they crossed the GOAWAY) were not
// processed and must go again on a new connection, the others be answered on the old one. The peer decodes exactly what was sent, each item once: nothing lost,
// nothing twice.
func TestGRPCJSServerGoAway(t *testing.T) {
	grpcJS.available(t)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			srv, g := startPeerUpstream(t, grpcJS, map[string]any{"mode": "server", "goaway": 2},
				"name=peer,protocol=v1,retry-initial=20ms,concurrency=4,transport="+tr)
			var w want
			for i := range 10 {
				calls := plan(fmt.Sprintf("goaway-%s-%d", tr, i), uint64(1+i*1000), false)
				sendToGate(t, g.GRPC, calls)
				w.add(calls)
				time.Sleep(20 * time.Millisecond) // past -batch.max-age: more calls, more connections
			}
			checkPeer(t, srv, w, "identity")
			goaways, refused := 0, 0
			for _, l := range srv.lines() {
				if l.GoAway != 0 {
					goaways++
				}
				if l.Refused != 0 {
					refused++
				}
			}
			t.Logf("%s: %d GOAWAYs, %d streams refused after them, %v calls sent again as unprocessed", tr, goaways, refused,
				g.metric(t, "otlpgate_client_unprocessed_requests_total"))
			if goaways < 2 {
				t.Errorf("the peer sent %d GOAWAYs; the test needs calls on at least two connections", goaways)
			}
		})
	}
}

// A grpc-js server of otlpgate's OTEP services (unary, and streams of requests answered by id)
// is the upstream of a destination with protocol=otep in each mode, on both transports: it
// decodes exactly what was sent, each item once, the 2 MiB batch included, every request
// through the OTEP method of the mode.
func TestGRPCJSServerOTEP(t *testing.T) {
	grpcJS.available(t)
	for _, tr := range transports {
		for _, mode := range []string{"unary", "stream"} {
			t.Run(tr+"/"+mode, func(t *testing.T) {
				t.Parallel()
				srv, g := startPeerUpstream(t, grpcJS, map[string]any{"mode": "server"},
					"name=peer,protocol=otep,mode="+mode+",retry-initial=20ms,transport="+tr)
				calls := plan(fmt.Sprintf("otep-%s-%s", tr, mode), 1, true)
				sendToGate(t, g.GRPC, calls)
				var w want
				w.add(calls)
				checkPeer(t, srv, w, "identity")
				for _, l := range srv.lines() {
					if l.IDs != nil && l.OTEP != mode {
						t.Errorf("a %s request came through %q, want OTEP %s", l.Signal, l.OTEP, mode)
					}
				}
			})
		}
	}
}

// OTEP streams to a grpc-js server that sends GOAWAY as each connection's second stream
// arrives, refusing the streams above it: the destination, on each transport, opens the
// signals' six streams across new connections, and the peer decodes exactly what was sent
// over 10 rounds, each item once.
func TestGRPCJSServerOTEPStreamGoAway(t *testing.T) {
	grpcJS.available(t)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			srv, g := startPeerUpstream(t, grpcJS, map[string]any{"mode": "server", "goaway": 2},
				"name=peer,protocol=otep,mode=stream,retry-initial=20ms,transport="+tr)
			var w want
			for i := range 10 {
				calls := plan(fmt.Sprintf("otep-goaway-%s-%d", tr, i), uint64(1+i*1000), false)
				sendToGate(t, g.GRPC, calls)
				w.add(calls)
				time.Sleep(20 * time.Millisecond)
			}
			checkPeer(t, srv, w, "identity")
			goaways, refused := 0, 0
			for _, l := range srv.lines() {
				if l.GoAway != 0 {
					goaways++
				}
				if l.Refused != 0 {
					refused++
				}
			}
			t.Logf("%s: %d GOAWAYs, %d streams refused after them, %v requests re-sent", tr, goaways, refused,
				g.metric(t, "otlpgate_client_resent_requests_total"))
			if goaways < 2 {
				t.Errorf("the peer sent %d GOAWAYs; the test needs streams on at least two connections", goaways)
			}
		})
	}
}

// grpc-js clients of otlpgate's OTEP services, unary calls and streams of requests answered by
// id (several in flight on a stream), send every signal and a 2 MiB request to the intake on
// both transports: each request is answered Success with its id, and the strict upstream gets
// exactly what was sent.
func TestGRPCJSClientOTEP(t *testing.T) { testPeerClientsOTEP(t, grpcJS) }
