package hostile

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A malformed request's Authorization header never reaches the log, even at debug level, where
// fasthttp's own parse errors are logged.
func TestTokenNotLoggedOnMalformedRequest(t *testing.T) {
	g := startGate(t, "-log.level=debug")
	c, err := net.Dial("tcp", g.HTTP)
	if err != nil {
		t.Fatal(err)
	}
	// A request line fasthttp refuses, then a bearer token in the part it would quote.
	c.Write([]byte("POST /v1/traces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-token\r\nContent-Length: nope\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	n, _ := c.Read(buf)
	c.Close()
	if !strings.Contains(string(buf[:n]), "400") {
		t.Fatalf("malformed request answered %q", buf[:n])
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(g.stderr.Tail(1<<20), "http: ") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	log := g.stderr.Tail(1 << 20)
	if !strings.Contains(log, "http: ") {
		t.Fatalf("fasthttp's parse error was not logged at debug level, so the test proves nothing:\n%s", log)
	}
	if strings.Contains(log, "s3cret") {
		t.Errorf("token in the log:\n%s", log)
	}
}

// A -dest that otlpgate refuses is named in the error with its header values redacted.
func TestDestHeaderNotLoggedOnBadConfig(t *testing.T) {
	out, err := exec.Command(binary, "-grpc.listen", anyPort, "-http.listen", "", "-admin.listen", "", "-uds.listen", "",
		"-dest", "name=x,endpoint=127.0.0.1:1,protocol=v1,mode=stream,header=authorization:Bearer s3cret,tail").CombinedOutput()
	if err == nil {
		t.Fatalf("bad -dest accepted:\n%s", out)
	}
	if !strings.Contains(string(out), "-dest") || strings.Contains(string(out), "s3cret") || strings.Contains(string(out), "tail") {
		t.Errorf("error output:\n%s", out)
	}
}
