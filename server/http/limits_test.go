package httpserver

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

func dial(t *testing.T, e *env) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

const emptyPost = "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"

func readResponse(t *testing.T, br *bufio.Reader) response {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return response{resp.StatusCode, resp.Header, b}
}

// A request whose headers do not fit -http.max-header-bytes gets 431 and the connection closes.
func TestHeaderCap(t *testing.T) {
	sc := DefaultConfig()
	sc.MaxHeaderBytes = 4 << 10
	e := start(t, testPipelineConfig(), sc, nil)
	// The server answers 431 and closes while the client may still be writing its header, so
	// the client can see a reset instead of the answer (TCP discards what it had not read):
	// try a few times, and require that every answer that does arrive is the 431.
	var r response
	var err error
	for range 20 {
		if r, err = e.try("POST", "/v1/traces", map[string]string{"Content-Type": ctProto, "X-Big": strings.Repeat("a", 8<<10)}, nil); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("no answer to an oversized header in 20 tries: %v", err)
	}
	wantStatus(t, r, 431, codes.InvalidArgument, "request header too large (-http.max-header-bytes)")
	if r := e.do(t, "POST", "/v1/traces", map[string]string{"Content-Type": ctProto, "X-Small": strings.Repeat("a", 1<<10)}, nil); r.status != 200 {
		t.Errorf("header below the cap: %d", r.status)
	}
}

// Past -http.max-connections a new connection waits in the backlog, unanswered, until one
// closes.
func TestConnectionCap(t *testing.T) {
	sc := DefaultConfig()
	sc.MaxConnections = 1
	e := start(t, testPipelineConfig(), sc, nil)
	first := dial(t, e)
	br1 := bufio.NewReader(first)
	io.WriteString(first, emptyPost)
	if r := readResponse(t, br1); r.status != 200 {
		t.Fatalf("first connection: %d", r.status)
	}
	second := dial(t, e)
	io.WriteString(second, emptyPost)
	second.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	br2 := bufio.NewReader(second)
	if _, err := br2.ReadByte(); err == nil {
		t.Fatal("the second connection was served while the first was open")
	}
	first.Close()
	second.SetReadDeadline(time.Now().Add(time.Minute))
	if r := readResponse(t, br2); r.status != 200 {
		t.Errorf("second connection after the first closed: %d", r.status)
	}
}

// A client that leaves a request unfinished is cut off after -http.read-timeout, and an idle
// keep-alive connection after -http.idle-timeout.
func TestSlowClients(t *testing.T) {
	sc := DefaultConfig()
	sc.ReadTimeout = 200 * time.Millisecond
	sc.IdleTimeout = 200 * time.Millisecond
	e := start(t, testPipelineConfig(), sc, nil)

	slow := dial(t, e)
	io.WriteString(slow, "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 100\r\n\r\nabc")
	slow.SetReadDeadline(time.Now().Add(time.Minute))
	rest, err := io.ReadAll(slow) // ends when the server closes the connection
	if err != nil {
		t.Fatalf("slow client: %v", err)
	}
	if len(rest) > 0 && !strings.HasPrefix(string(rest), "HTTP/1.1 408") {
		t.Errorf("slow client got %q", rest)
	}

	idle := dial(t, e)
	br := bufio.NewReader(idle)
	io.WriteString(idle, emptyPost)
	if r := readResponse(t, br); r.status != 200 {
		t.Fatalf("idle client's request: %d", r.status)
	}
	idle.SetReadDeadline(time.Now().Add(time.Minute))
	if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("idle connection: read %d, %v; want EOF from the server's close", n, err)
	}
	e.p.Flush()
	wantNothingReceived(t, e)
}
