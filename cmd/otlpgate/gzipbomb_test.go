package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // the client compresses with gRPC's own gzip
	"google.golang.org/grpc/status"

	"github.com/otlpgate/otlpgate/codec"
	otepv1 "github.com/otlpgate/otlpgate/proto/otep/v1"
)

// bombBody is a gzip member that inflates to size zero bytes: about a thousandth of its size
// on the wire.
func bombBody(t *testing.T, size int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	for range size >> 20 {
		w.Write(zeros)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bombPost sends body as a gzip-encoded OTLP/HTTP protobuf request and returns the status.
func bombPost(hc *http.Client, url string, body []byte) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil
}

// bombGRPC sends, over conns connections, n v1 Export calls and n OTEP stream requests whose
// message is size zero bytes, gzip-encoded, all at once, and returns how they were answered
// (gRPC codes of the unary calls, result codes of the stream requests).
func bombGRPC(t *testing.T, addr string, size, conns, n int) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	zeros := make([]byte, size)
	var mu sync.Mutex
	got := map[string]int{}
	note := func(s string) {
		mu.Lock()
		got[s]++
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := range conns {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.New(nil)), grpc.UseCompressor("gzip")))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		for j := range n / conns {
			wg.Add(2)
			go func() {
				defer wg.Done()
				var r codec.Raw
				r.SetBytes(zeros)
				var resp codec.Raw
				err := cc.Invoke(ctx, "/opentelemetry.proto.collector.trace.v1.TraceService/Export", &r, &resp, grpc.WaitForReady(true))
				resp.Release()
				note(status.Code(err).String())
			}()
			go func() {
				defer wg.Done()
				st, err := otepv1.NewStreamExporterClient(cc).ExportTraces(ctx, grpc.WaitForReady(true))
				if err != nil {
					note(status.Code(err).String())
					return
				}
				// An OTEP request of zeros after its id: the id names the answer.
				req := append([]byte{0x08, byte(1 + i*n + j)}, zeros...)
				var r codec.Raw
				r.SetBytes(req)
				if err := st.SendMsg(&r); err != nil {
					note(status.Code(err).String())
					return
				}
				resp, err := st.Recv()
				if err != nil {
					note(status.Code(err).String())
					return
				}
				note(resp.ResultCode.String())
				st.CloseSend()
			}()
		}
	}
	wg.Wait()
	return got
}

// The gzip bomb of issue 20 against the binary with its default flags: waves of 16 concurrent
// OTLP/HTTP bodies of about 61 KB, each inflating to 60 MiB of zeros. Decompression holds
// intake-limiter budget for what it produces before producing it, so the process's peak
// resident set stays within -intake.max-bytes (256MiB) plus a fixed overhead, where it used to
// reach 1.75 GB; the limiter's high-water mark shows the inflated bytes (it used to read the
// compressed 61 KB); every request is answered, 429 with Retry-After when the limiter had no
// room, 400 when its (zero) bytes were decompressed and found not to be OTLP. Then the same
// against the gRPC intake, within -intake.max-bytes and -intake.inflate-bytes.
func TestGzipBombBoundedByIntakeLimiter(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip(errNoProc)
	}
	const (
		budget   = 256 << 20 // the default -intake.max-bytes
		inflated = 60 << 20
		// overhead is what the process holds besides the limiter's budget: the runtime, gRPC,
		// metrics, the pools' spare buffers, the garbage GOGC lets accumulate before a
		// collection.
		overhead = 128 << 20
		waves    = 3
		conc     = 16
	)
	bin := buildBinary(t)
	httpAddr := freePort(t)
	g := startGateway(t, bin, "-http.listen", httpAddr)
	waitReady(t, g)
	body := bombBody(t, inflated)
	t.Logf("bomb: %d bytes inflating to %d", len(body), inflated)

	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: conc}}
	defer hc.CloseIdleConnections()
	url := "http://" + httpAddr + "/v1/traces"
	var mu sync.Mutex
	statuses := map[int]int{}
	for range waves {
		var wg sync.WaitGroup
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, retry, err := bombPost(hc, url, body)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("request failed: %v", err)
				case code == http.StatusTooManyRequests && retry == "":
					t.Errorf("429 without Retry-After")
				}
				statuses[code]++
			}()
		}
		wg.Wait()
	}
	httpHWM := vmHWM(t, g.cmd.Process.Pid)
	high := scrape(t, g.admin, "otlpgate_intake_bytes_in_flight_high_water")
	refused := scrape(t, g.admin, "otlpgate_intake_refused_total", `intake="http"`)
	t.Logf("answers %v; VmHWM %.1f MiB; limiter high water %.1f MiB; refusals %v", statuses, float64(httpHWM)/(1<<20), high/(1<<20), refused)
	for code := range statuses {
		if code != http.StatusTooManyRequests && code != http.StatusBadRequest {
			t.Errorf("answer %d, want only 400 (zeros are no OTLP) and 429 (no room to inflate)", code)
		}
	}
	if statuses[http.StatusBadRequest] == 0 {
		t.Errorf("no bomb was inflated at all: %v", statuses)
	}
	if high < inflated || high > budget {
		t.Errorf("limiter high water %.1f MiB, want the inflated %d MiB or more, within the budget %d MiB", high/(1<<20), inflated>>20, budget>>20)
	}
	if httpHWM > budget+overhead {
		t.Errorf("peak RSS %.1f MiB, bound %d MiB (-intake.max-bytes %d MiB + %d MiB)", float64(httpHWM)/(1<<20), (budget+overhead)>>20, budget>>20, overhead>>20)
	}

	// The same against the gRPC intake: unary calls and OTEP streams, every one a gzip-encoded
	// message of zeros just under -grpc.max-recv-msg-size, over four connections. Each
	// inflating message claims -grpc.max-recv-msg-size of -intake.inflate-bytes (64MiB) first:
	// OTEP stream messages, which take nothing else from the limiter, are bounded too.
	inflate := int64(64 << 20)
	codes := bombGRPC(t, g.grpcAddr, 15<<20, 4, conc)
	hwm := vmHWM(t, g.cmd.Process.Pid)
	t.Logf("gRPC answers %v; VmHWM %.1f MiB", codes, float64(hwm)/(1<<20))
	for c, n := range codes {
		if c != "InvalidArgument" && c != "FailedNoneRetryable" {
			t.Errorf("%d gRPC answers %s, want only InvalidArgument (unary) and FailedNoneRetryable (stream): zeros are no OTLP", n, c)
		}
	}
	if hwm > budget+inflate+overhead {
		t.Errorf("peak RSS %.1f MiB after the gRPC bombs, bound %d MiB (-intake.max-bytes + -intake.inflate-bytes + %d MiB)", float64(hwm)/(1<<20), (budget+inflate+overhead)>>20, overhead>>20)
	}
	if n := len(g.errorLines()); n > 0 {
		t.Errorf("%d error lines:\n%s", n, fmt.Sprint(g.errorLines()))
	}
}
