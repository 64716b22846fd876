package main

import (
	"bytes"
	"context"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// peerTraces is one request of two resources: service.name fresh without k8s.pod.ip, and
// service.name claimed with k8s.pod.ip 10.9.9.9; each resource one span named after via.
func peerTraces(via string) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, svc := range []string{"fresh", "claimed"} {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", svc)
		if svc == "claimed" {
			rs.Resource().Attributes().PutStr("k8s.pod.ip", "10.9.9.9")
		}
		rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName(via)
	}
	return td
}

// fromAddr is a dialer whose connections leave from the loopback address ip.
func fromAddr(ip string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
}

// -resource.from-peer through the real binary: an OTLP/gRPC client dialing from 127.0.0.2 and
// an OTLP/HTTP client from 127.0.0.3 each send a resource without k8s.pod.ip and one that
// carries it. The upstream, decoding with the Collector's pdata, reads each client's own
// address on the first; on the second, insert (the default) keeps the value sent and upsert
// replaces it with the address. With the spool on, the address is written before the request
// is spooled.
func TestBinaryResourceFromPeer(t *testing.T) {
	bin := buildBinary(t)
	for _, c := range []struct {
		name, action string
		spool        bool
		claimed      func(peer string) string // k8s.pod.ip of the claimed resource at the upstream
	}{
		{"insert", "insert", false, func(string) string { return "10.9.9.9" }},
		{"upsert", "upsert", false, func(peer string) string { return peer }},
		{"upsert, spool", "upsert", true, func(peer string) string { return peer }},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := startUpstream(t)
			args := []string{"-batch.max-age", "10ms",
				"-dest", "name=up,endpoint=" + up.Addr() + ",protocol=v1,mode=unary,retry-initial=20ms",
				"-resource.from-peer", "k8s.pod.ip", "-resource.from-peer.action", c.action,
				"-resource.set", "k8s.node.name=node-7"}
			if c.spool {
				args = append(args, "-spool.dir", filepath.Join(t.TempDir(), "spool"))
			}
			g := startGateway(t, bin, args...)
			waitReady(t, g)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			conn, err := grpc.NewClient("passthrough:///"+g.grpcAddr,
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
					return fromAddr("127.0.0.2").DialContext(ctx, "tcp", addr)
				}))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(peerTraces("grpc"))); err != nil {
				t.Fatal(err)
			}

			body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(peerTraces("http"))
			if err != nil {
				t.Fatal(err)
			}
			hc := &http.Client{Transport: &http.Transport{DialContext: fromAddr("127.0.0.3").DialContext}}
			defer hc.CloseIdleConnections()
			resp, err := hc.Post("http://"+g.http+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("OTLP/HTTP: %d", resp.StatusCode)
			}

			peers := map[string]string{"grpc": "127.0.0.2", "http": "127.0.0.3"}
			want := map[string]map[string]any{}
			for via, peer := range peers {
				want[via+" fresh"] = map[string]any{"service.name": "fresh", "k8s.pod.ip": peer, "k8s.node.name": "node-7"}
				want[via+" claimed"] = map[string]any{"service.name": "claimed", "k8s.pod.ip": c.claimed(peer), "k8s.node.name": "node-7"}
			}
			got := map[string]map[string]any{}
			deadline := time.Now().Add(30 * time.Second)
			for len(got) < len(want) {
				if time.Now().After(deadline) {
					t.Fatalf("the upstream has %v, want %v:\n%s", got, want, g.stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
				got = map[string]map[string]any{}
				for _, td := range up.Traces() {
					for _, rs := range td.ResourceSpans().All() {
						a := rs.Resource().Attributes().AsRaw()
						key := rs.ScopeSpans().At(0).Spans().At(0).Name() + " " + a["service.name"].(string)
						if _, dup := got[key]; dup {
							t.Fatalf("%s delivered twice", key)
						}
						got[key] = a
					}
				}
			}
			for k, w := range want {
				if !maps.Equal(got[k], w) {
					t.Errorf("%s: resource %v, want %v", k, got[k], w)
				}
			}
		})
	}
}
