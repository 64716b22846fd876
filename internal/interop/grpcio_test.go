package interop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/otlpgate/otlpgate/internal/faultproxy"
	"github.com/otlpgate/otlpgate/internal/testkit"
	collogsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/logs/v1"
	colmetricsv1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/metrics/v1"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// debianPython is Debian's interpreter, where python3-grpcio and python3-protobuf install: a
// python3 earlier on PATH (pyenv, a virtualenv) may lack them.
const debianPython = "/usr/bin/python3"

var (
	descOnce sync.Once
	descPath string
	descErr  error
)

// descriptorSet writes, once per run, the FileDescriptorSet of the three OTLP collector
// services and otlpgate's OTEP services, and everything they import, dependencies first, as otlpgate's generated code holds
// it: the Python peer builds its message classes from it.
func descriptorSet(t testing.TB) string {
	t.Helper()
	descOnce.Do(func() {
		var set descriptorpb.FileDescriptorSet
		seen := map[string]bool{}
		var add func(fd protoreflect.FileDescriptor)
		add = func(fd protoreflect.FileDescriptor) {
			if seen[fd.Path()] {
				return
			}
			seen[fd.Path()] = true
			for i := range fd.Imports().Len() {
				add(fd.Imports().Get(i).FileDescriptor)
			}
			set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
		}
		add(coltracev1.File_opentelemetry_proto_collector_trace_v1_trace_service_proto)
		add(colmetricsv1.File_opentelemetry_proto_collector_metrics_v1_metrics_service_proto)
		add(collogsv1.File_opentelemetry_proto_collector_logs_v1_logs_service_proto)
		add(otepv1.File_otep_v1_otep_proto)
		b, err := proto.Marshal(&set)
		if err != nil {
			descErr = err
			return
		}
		descPath = filepath.Join(filepath.Dir(otlpgateBin), "otlp.binpb")
		descErr = os.WriteFile(descPath, b, 0o644)
	})
	if descErr != nil {
		t.Fatal(descErr)
	}
	return descPath
}

var grpcio = peer{
	name: "grpcio",
	available: func(t testing.TB) {
		if err := exec.Command(debianPython, "-c", "import grpc, google.protobuf").Run(); err != nil {
			need(t, debianPython+" cannot import grpc and google.protobuf (apt-get install python3-grpcio python3-protobuf)")
		}
	},
	command: func(t testing.TB, opts map[string]any) (string, []string) {
		opts["descriptors"] = descriptorSet(t)
		return debianPython, []string{filepath.Join("testdata", "python", "peer.py"), jsonArg(t, opts)}
	},
	// grpcio compresses with gzip and deflate; the C-core has no zstd.
	compressions: []string{"gzip"},
}

// Python grpcio clients (the C-core, messages built by python3-protobuf from otlpgate's
// descriptors) export every signal to otlpgate's intake on both transports, plain and TLS,
// identity and gzip, one message of about 2 MiB: the Collector's decoder upstream gets exactly
// their spans, metrics and records, each once.
func TestGRPCIOClient(t *testing.T) { testPeerClients(t, grpcio) }

// Python grpcio clients make calls of every signal for about a second to an intake, on each
// transport, that sends GOAWAY to connections older than 150ms: every call succeeds, the
// C-core dials again after each GOAWAY, and exactly what it sent arrives, each item once.
func TestGRPCIOClientGoAway(t *testing.T) { testPeerClientsGoAway(t, grpcio) }

// grpcio clients sending a request over -grpc.max-recv-msg-size, plain and gzip (too large
// once inflated), get RESOURCE_EXHAUSTED in grpc-go's words from both transports, and the
// next call on the channel succeeds.
func TestGRPCIOClientTooLarge(t *testing.T) { testPeerClientsTooLarge(t, grpcio) }

// grpcio clients make 202 calls at once, two of them 2 MiB, against an intake that lets 4
// streams of a connection open at once, on both transports: every call succeeds and exactly
// what was sent arrives, each item once.
func TestGRPCIOClientParallel(t *testing.T) { testPeerClientsParallel(t, grpcio) }

// A Python grpcio server is the upstream of a destination on both transports, plain and
// uncompressed, and TLS with gzip: it decodes exactly what was sent to otlpgate, each item
// once, the batch of about 2 MiB included.
func TestGRPCIOServer(t *testing.T) { testPeerServers(t, grpcio) }

// A Python grpcio upstream whose C-core sends GOAWAY to every connection older than 150ms
// (grpc.max_connection_age_ms) while otlpgate's destination, on each transport, delivers 15
// rounds of every signal 20ms apart: the destination dials again after each GOAWAY (a proxy
// in between counts its connections) and the peer decodes exactly what was sent, each item
// once.
func TestGRPCIOServerGoAway(t *testing.T) {
	grpcio.available(t)
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			name, argv := grpcio.command(t, map[string]any{"mode": "server", "max_age_ms": 150})
			srv := startPeerServer(t, name, argv...)
			px, err := faultproxy.New(srv.Addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { px.Close() })
			g := startGate(t, "-dest", "name=peer,protocol=v1,retry-initial=20ms,concurrency=4,transport="+tr+",endpoint="+px.Addr())
			var w want
			for i := range 15 {
				calls := plan(fmt.Sprintf("age-%s-%d", tr, i), uint64(1+i*100), false)
				sendToGate(t, g.GRPC, calls)
				w.add(calls)
				time.Sleep(20 * time.Millisecond)
			}
			checkPeer(t, srv, w, "")
			t.Logf("grpcio upstream, destination on %s: %d connections, %v calls sent again as unprocessed", tr, px.Accepted(),
				g.metric(t, "otlpgate_client_unprocessed_requests_total"))
			if px.Accepted() < 2 {
				t.Errorf("the destination used %d connections; with GOAWAY every 150ms it should have dialled again", px.Accepted())
			}
		})
	}
}

// grpcio clients of otlpgate's OTEP services, unary calls and streams whose requests are all
// written before their answers are read, send every signal and a 2 MiB request to the intake
// on both transports: each request is answered Success with its id, and the strict upstream
// gets exactly what was sent.
func TestGRPCIOClientOTEP(t *testing.T) { testPeerClientsOTEP(t, grpcio) }

// A Python grpcio server of otlpgate's OTEP services (grpcio's generic handlers, messages
// from otlpgate's descriptors) is the upstream of a destination with protocol=otep, unary and
// in stream mode, plain and TLS, on both transports. Its streams hold each request up to
// 300ms for the next and answer such pairs in reverse order. The peer decodes exactly what
// was sent, each item once, the 2 MiB batch included, every request through the OTEP method
// of the mode and with the ids the destination gave, 1 to n, each once; otlpgate counts
// every request and item acknowledged, none retried, dropped or answered with an unknown id,
// and in stream mode some of those answers came out of order.
func TestGRPCIOServerOTEP(t *testing.T) {
	grpcio.available(t)
	for _, tr := range transports {
		for _, mode := range []string{"unary", "stream"} {
			for _, tls := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/tls=%v", tr, mode, tls), func(t *testing.T) {
					t.Parallel()
					opts := map[string]any{"mode": "server", "reorder_ms": 300}
					// One stream a signal, so that consecutive batches meet on it.
					dest := "name=peer,protocol=otep,mode=" + mode + ",streams=1,retry-initial=20ms,transport=" + tr
					if tls {
						cert, key := testkit.SelfSigned(t, t.TempDir())
						opts["cert"], opts["key"] = cert, key
						dest += ",tls-ca=" + cert
					}
					srv, g := startPeerUpstream(t, grpcio, opts, dest)
					calls := plan(fmt.Sprintf("otep-%s-%s-%v", tr, mode, tls), 1, true)
					sendToGate(t, g.GRPC, calls)
					var w want
					w.add(calls)
					// Rounds of spans, each sealed into a batch of its own (-batch.max-age
					// 10ms), so that the stream carries requests one after another.
					for i := range 8 {
						c := []call{{Signal: "traces", First: uint64(1000 + 10*i), Count: 2}}
						sendToGate(t, g.GRPC, c)
						w.add(c)
						time.Sleep(15 * time.Millisecond)
					}
					checkPeer(t, srv, w, "identity")
					var ids []uint64
					items, reordered := 0, 0
					for _, l := range srv.lines() {
						if l.IDs == nil {
							continue
						}
						if l.OTEP != mode {
							t.Errorf("a %s request came through %q, want OTEP %s", l.Signal, l.OTEP, mode)
						}
						ids = append(ids, l.Request)
						items += len(l.IDs)
						if l.Reordered {
							reordered++
						}
					}
					slices.Sort(ids)
					for i, id := range ids {
						if id != uint64(i+1) {
							t.Errorf("request ids at the peer: %v, want 1 to %d each once", ids, len(ids))
							break
						}
					}
					dest1 := `destination="peer"`
					testkit.WaitFor(t, fmt.Sprintf("otlpgate to count %d acknowledged requests", len(ids)), func() bool {
						return g.metric(t, "otlpgate_client_acknowledged_requests_total", dest1) >= float64(len(ids))
					})
					if n := g.metric(t, "otlpgate_client_acknowledged_requests_total", dest1); n != float64(len(ids)) {
						t.Errorf("otlpgate counted %v requests acknowledged, want %d", n, len(ids))
					}
					if n := g.metric(t, "otlpgate_client_acknowledged_items_total", dest1); n != float64(items) {
						t.Errorf("otlpgate counted %v items acknowledged, want %d", n, items)
					}
					for _, m := range []string{"otlpgate_client_unknown_acks_total", "otlpgate_client_retried_requests_total",
						"otlpgate_client_dropped_requests_total", "otlpgate_client_resent_requests_total"} {
						if n := g.metric(t, m, dest1); n != 0 {
							t.Errorf("%s: %v, want 0", m, n)
						}
					}
					t.Logf("grpcio OTEP upstream, %s on %s, tls=%v: %d requests, %d items, %d answered out of order", mode, tr, tls, len(ids), items, reordered)
					if mode == "stream" && reordered == 0 {
						t.Errorf("no stream answer came out of order: the test no longer shows otlpgate matching acks by id")
					}
				})
			}
		}
	}
}
