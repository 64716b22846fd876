package statuspage

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otlpgate/otlpgate/internal/listenlog"
	"github.com/otlpgate/otlpgate/internal/otlpgen"
	"github.com/otlpgate/otlpgate/internal/testkit"
	coltracev1 "github.com/otlpgate/otlpgate/proto/opentelemetry/proto/collector/trace/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/chromedp/chromedp.(*Browser).run"))
}

// chromium finds the browser. Outside CI a missing one skips the test with the reason; in CI
// (CI=true) it fails it: .ci/run installs Debian's chromium, so CI never skips.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; .ci/run installs it (apt-get install -y chromium)")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); skipping the status page test")
	return ""
}

// A person opening the page during an outage sees which destination is down and since when,
// why (its last error, as the client saw it), what is being dropped, and that traffic flows to
// the other.
func TestStatusPageShowsOutage(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "otlpgate")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/otlpgate").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	up := testkit.StartGRPCSink(t, "") // a working OTLP/gRPC upstream

	// Nobody listens: connection refused. An address that refuses cannot be bound to :0 and
	// reported, so it is chosen here; another process taking it would change the error shown.
	dead := testkit.FreeAddr(t)
	// otlpgate binds its listeners on :0 and reports the ports in its log.
	cmd := exec.Command(bin, "-grpc.listen", "127.0.0.1:0", "-http.listen", "", "-uds.listen", "", "-admin.listen", "127.0.0.1:0",
		"-status.interval", "250ms", "-status.down-after", "2s", "-batch.max-age", "20ms",
		"-dest", "name=backend,endpoint="+up.Addr()+",protocol=v1,mode=unary",
		"-dest", "name=archive,endpoint="+dead+",protocol=v1,mode=unary,retry-max-elapsed=1s,retry-initial=50ms,retry-max=200ms",
		"-dest", "name=disk,protocol=file,path="+filepath.Join(dir, "disk", "otlp.jsonl")) // a file destination is listed like the others
	stderr := &testkit.LockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("otlpgate stderr:\n%s", stderr.String())
		}
	}()
	addrs := testkit.WaitAddrs(t, stderr.String, exited, listenlog.GRPC, listenlog.Admin)
	grpcAddr, admin := addrs[0], addrs[1]

	// Traffic: a v1 export every 50 ms until the test ends (bounded by the test's deadline).
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tc := coltracev1.NewTraceServiceClient(conn)
		g := otlpgen.New(3)
		for i := 0; i < 2000; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			tc.Export(ctx, g.Spans(otlpgen.Shape{Spans: 10, Attrs: 2}), grpc.WaitForReady(true))
			cancel()
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); <-done }()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.WindowSize(1280, 900), chromedp.UserDataDir(filepath.Join(dir, "chromium")))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(actx)
	defer cancelCtx()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	page := "http://" + admin + "/"
	waitReady(t, admin)
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("load %s: %v", page, err)
	}
	first, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first, "otlpgate") || !strings.Contains(first, "Destinations") {
		t.Fatalf("page text:\n%s", first)
	}

	// The page refreshes itself: wait, without reloading, until it shows the outage.
	var archiveRow, archiveErr, backendRow, diskRow, grpcRow string
	deadline := time.Now().Add(90 * time.Second)
	for {
		row := func(sel string) string {
			s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector('`+sel+`')||{innerText:""}).innerText`))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		archiveRow, backendRow, grpcRow = row(`tr[data-dest="archive"]`), row(`tr[data-dest="backend"]`), row(`tr[data-intake="grpc"]`)
		archiveErr = row(`tr[data-dest-error="archive"]`)
		diskRow = row(`tr[data-dest="disk"]`)
		if strings.Contains(archiveRow, "down") && strings.Contains(archiveRow, "retry_exhausted") &&
			strings.Contains(archiveErr, "connection refused") && strings.Contains(archiveErr, "ago") &&
			strings.Contains(backendRow, "ok") && !strings.Contains(backendRow, "\t0/s") &&
			strings.Contains(diskRow, "ok") && !strings.Contains(diskRow, "\t0/s") && grpcRow != "" && !strings.HasPrefix(cell(grpcRow, 2), "0/s") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed the outage:\narchive: %q\nits error: %q\nbackend: %q\ndisk: %q\ngrpc: %q", archiveRow, archiveErr, backendRow, diskRow, grpcRow)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("archive: %s\n%s\nbackend: %s\ndisk: %s\ngrpc: %s", archiveRow, archiveErr, backendRow, diskRow, grpcRow)
	// Since when: the state column is followed by how long ago it changed, and the last ack.
	if !strings.Contains(archiveRow, "never") || !strings.Contains(archiveRow, "ago") {
		t.Errorf("archive row does not say since when or that it never acknowledged: %q", archiveRow)
	}
	if n, _ := up.SpanCount(); n == 0 {
		t.Error("the working destination received nothing")
	}
	if os.Getenv("STATUS_SCREENSHOT") != "" {
		if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			os.WriteFile(os.Getenv("STATUS_SCREENSHOT"), png, 0o644)
		}
	}
}

// cell returns the i-th tab-separated cell of a table row's text.
func cell(row string, i int) string {
	f := strings.Split(row, "\t")
	if i < len(f) {
		return strings.TrimSpace(f[i])
	}
	return ""
}

func waitReady(t *testing.T, admin string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.Dial("tcp", admin)
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("admin listener %s never came up", admin)
}
