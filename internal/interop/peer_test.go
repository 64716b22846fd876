package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/otlpgate/otlpgate/internal/testkit"
)

// A peer speaks JSON lines on its stdout (testdata/node/peer.js, testdata/python/peer.py):
// a client one line per call it made, a server {"listening":...} once bound and then one line
// per request as it decoded it.
type peerLine struct {
	Listening string `json:"listening"`

	// A client's call.
	Call    *int   `json:"call"`
	OK      bool   `json:"ok"`
	Code    int    `json:"code"`
	Details string `json:"details"`

	// A server's request: the span ids (hex), metric names or log bodies it decoded.
	Signal   string   `json:"signal"`
	Encoding string   `json:"encoding"`
	IDs      []string `json:"ids"`
	// OTEP is "unary" or "stream" for a request of otlpgate's OTEP services, "" for v1.
	OTEP string `json:"otep"`
	// Request is an OTEP request's id, where the peer reports it (peer.py).
	Request uint64 `json:"request"`
	// Reordered: the peer answered this OTEP request before the one that came before it on
	// its stream.
	Reordered bool `json:"reordered"`

	// A server's GOAWAY (peer.js with "goaway"): the last stream id it named.
	GoAway int `json:"goaway"`
	// A stream a server reset with REFUSED_STREAM, above its GOAWAY's last stream id.
	Refused int `json:"refused"`
}

// peerServer is a peer running as an upstream of otlpgate.
type peerServer struct {
	Addr string

	cmd    *exec.Cmd
	stderr *testkit.LockedBuffer
	done   chan struct{}

	mu struct {
		sync.Mutex
		lines []peerLine
		bad   []string // stdout lines that were not JSON
	}
}

// startPeerServer runs name args... until the test ends and waits for its listening line.
func startPeerServer(t testing.TB, name string, args ...string) *peerServer {
	t.Helper()
	p := &peerServer{stderr: &testkit.LockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(name, args...)
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Its stdin closes when the test process dies, which stops the peer too.
	if _, err := p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			var l peerLine
			p.mu.Lock()
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				p.mu.bad = append(p.mu.bad, sc.Text())
			} else {
				p.mu.lines = append(p.mu.lines, l)
			}
			p.mu.Unlock()
		}
		io.Copy(io.Discard, stdout)
		p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("%s stderr (last 4 KiB):\n%s", name, p.stderr.Tail(4096))
		}
	})
	testkit.WaitFor(t, name+" to listen", func() bool {
		select {
		case <-p.done:
			t.Fatalf("%s exited before listening:\n%s", name, p.stderr.Tail(4096))
		default:
		}
		for _, l := range p.lines() {
			if l.Listening != "" {
				p.Addr = l.Listening
				return true
			}
		}
		return false
	})
	return p
}

func (p *peerServer) lines() []peerLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]peerLine(nil), p.mu.lines...)
}

// upstream is a peer running as an upstream of otlpgate, as the lines it reported.
type upstream interface{ lines() []peerLine }

// received returns what the upstream decoded of signal, in arrival order, and the
// grpc-encodings of the requests carrying it, where the upstream reports them.
func received(p upstream, signal string) (ids []string, encodings map[string]int) {
	encodings = map[string]int{}
	for _, l := range p.lines() {
		if l.Signal == signal {
			ids = append(ids, l.IDs...)
			if l.Encoding != "" {
				encodings[l.Encoding]++
			}
		}
	}
	return ids, encodings
}

// runPeerClient runs a peer client to its end (bounded) and returns its call lines; the test
// fails if it does not exit within a minute or prints anything but JSON.
func runPeerClient(t testing.TB, name string, args ...string) (calls []peerLine, exitErr error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	stderr := &testkit.LockedBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within a minute:\n%s", name, stderr.Tail(4096))
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l peerLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Call == nil {
			t.Fatalf("%s printed %q, not a call line; stderr:\n%s", name, sc.Text(), stderr.Tail(4096))
		}
		calls = append(calls, l)
	}
	if err != nil {
		t.Logf("%s stderr:\n%s", name, stderr.Tail(4096))
	}
	return calls, err
}
