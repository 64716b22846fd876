package interop

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
			need(t, "the grpc-js peer's modules are not installed (npm ci in internal/interop/testdata/node)")
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
// message of about 4 MiB: the Collector's decoder upstream gets exactly their spans, metrics
// and records, each once.
func TestGRPCJSClient(t *testing.T) { testPeerClients(t, grpcJS) }

// A grpc-js server is the upstream of a destination on both transports, plain and TLS,
// identity and gzip: it decodes exactly the spans, metrics and records sent to otlpgate, each
// once, the large batch of about 4 MiB included, and every request in the destination's
// grpc-encoding.
func TestGRPCJSServer(t *testing.T) { testPeerServers(t, grpcJS) }
