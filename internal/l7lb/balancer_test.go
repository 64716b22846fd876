package l7lb

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// balancer is a real L7 balancer process in front of a set of gateway addresses.
type balancer interface {
	// addr is the host:port edges dial.
	addr() string
	// setBackends rewrites the configuration with these gateways and reloads it the way an
	// operator would, without dropping the streams already open.
	setBackends(t *testing.T, backends []string)
	// stop ends the balancer at once.
	stop()
}

// findTool returns the path of a balancer binary; it skips the test (fails it under CI) when
// the binary is missing.
func findTool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed; .ci/run installs it with apt-get install -y nginx haproxy", name)
	}
	t.Skipf("%s is not installed (apt-get install -y nginx haproxy); skipping the balancer test", name)
	return ""
}

// freeAddr reserves a loopback port for a process that is not ours to hand a listener to.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

// waitListening waits (bounded) until addr accepts connections.
func waitListening(t *testing.T, addr string, exited <-chan struct{}, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("balancer exited before listening on %s; its output:\n%s", addr, logs())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("balancer not listening on %s; its output:\n%s", addr, logs())
}

// deployFile reads one of the deploy/ examples, which the tests run with only the listener and
// the gateway list replaced: what is deployed is what is tested.
func deployFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// syncBuffer is a bytes.Buffer safe for a process's output and the test reading it.
type syncBuffer struct {
	ch chan struct{}
	b  bytes.Buffer
}

func newSyncBuffer() *syncBuffer {
	s := &syncBuffer{ch: make(chan struct{}, 1)}
	s.ch <- struct{}{}
	return s
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	<-s.ch
	defer func() { s.ch <- struct{}{} }()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	<-s.ch
	defer func() { s.ch <- struct{}{} }()
	return s.b.String()
}

// ---- nginx ----

type nginx struct {
	bin, dir, conf, listen string
	extra                  string // directives added to the server block (tests of defaults)
	cmd                    *exec.Cmd
	out                    *syncBuffer
	done                   chan struct{}
}

var (
	ngxUpstream = regexp.MustCompile(`(?s)(upstream otlpgate_gateways \{\n).*?(\n\s*keepalive )`)
	ngxListen   = regexp.MustCompile(`listen 127\.0\.0\.1:4317 http2;`)
)

func (n *nginx) render(t *testing.T, backends []string) {
	t.Helper()
	c := deployFile(t, "nginx/nginx.conf")
	var lines []string
	for _, b := range backends {
		lines = append(lines, "        server "+b+";")
	}
	if !ngxUpstream.MatchString(c) || !ngxListen.MatchString(c) {
		t.Fatal("deploy/nginx/nginx.conf no longer has the upstream block or listener the test rewrites")
	}
	c = ngxUpstream.ReplaceAllString(c, "${1}"+strings.Join(lines, "\n")+"${2}")
	c = ngxListen.ReplaceAllString(c, "listen "+n.listen+" http2;"+n.extra)
	// Two workers whatever the machine: the test must see streams spread over processes too.
	c = strings.Replace(c, "worker_processes auto;", "worker_processes 2;", 1)
	if err := os.WriteFile(n.conf, []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
}

func startNginx(t *testing.T, backends []string, extra string) *nginx {
	t.Helper()
	n := &nginx{bin: findTool(t, "nginx"), dir: t.TempDir(), listen: freeAddr(t), extra: extra, done: make(chan struct{})}
	n.conf = filepath.Join(n.dir, "nginx.conf")
	n.render(t, backends)
	n.out = newSyncBuffer()
	n.cmd = exec.Command(n.bin, "-p", n.dir, "-c", n.conf, "-e", "stderr", "-g", "daemon off;")
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.cmd.Wait(); close(n.done) }()
	t.Cleanup(n.stop)
	waitListening(t, n.listen, n.done, n.logs)
	return n
}

func (n *nginx) addr() string { return n.listen }

func (n *nginx) setBackends(t *testing.T, backends []string) {
	t.Helper()
	n.render(t, backends)
	// nginx -s reload reads the pid file the master wrote under our prefix.
	if out, err := exec.Command(n.bin, "-p", n.dir, "-c", n.conf, "-e", "stderr", "-s", "reload").CombinedOutput(); err != nil {
		t.Fatalf("nginx -s reload: %v\n%s", err, out)
	}
}

func (n *nginx) stop() {
	select {
	case <-n.done:
		return
	default:
	}
	syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.done
}

func (n *nginx) logs() string { return n.out.String() }

// ---- HAProxy ----

type haproxy struct {
	bin, dir, conf, pidFile, listen string
	procs                           []*haproxyProc
}

type haproxyProc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

var (
	hapBackend = regexp.MustCompile(`(?ms)^backend otlpgate_gateways\n.*\z`)
	hapBind    = regexp.MustCompile(`bind 127\.0\.0\.1:4317 proto h2`)
)

func (h *haproxy) render(t *testing.T, backends []string) {
	t.Helper()
	c := deployFile(t, "haproxy/haproxy.cfg")
	if !hapBackend.MatchString(c) || !hapBind.MatchString(c) {
		t.Fatal("deploy/haproxy/haproxy.cfg no longer has the backend or bind line the test rewrites")
	}
	// The test's gateways have no admin listener: keep the deployed balance and timeouts, drop
	// the health checks.
	be := "backend otlpgate_gateways\n    balance roundrobin\n"
	for i, b := range backends {
		be += fmt.Sprintf("    server gw%d %s proto h2\n", i+1, b)
	}
	c = hapBackend.ReplaceAllLiteralString(c, be)
	c = hapBind.ReplaceAllString(c, "bind "+h.listen+" proto h2")
	if err := os.WriteFile(h.conf, []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(h.bin, "-c", "-f", h.conf).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
}

func startHAProxy(t *testing.T, backends []string) *haproxy {
	t.Helper()
	h := &haproxy{bin: findTool(t, "haproxy"), dir: t.TempDir(), listen: freeAddr(t)}
	h.conf = filepath.Join(h.dir, "haproxy.cfg")
	h.pidFile = filepath.Join(h.dir, "haproxy.pid")
	h.render(t, backends)
	h.spawn(t, nil)
	t.Cleanup(h.stop)
	waitListening(t, h.listen, h.procs[0].done, h.logs)
	return h
}

// spawn starts a HAProxy process in the foreground (-db); with old set, -sf tells those
// processes to stop listening and finish their streams: HAProxy's soft reload.
func (h *haproxy) spawn(t *testing.T, old []int) {
	t.Helper()
	args := []string{"-db", "-f", h.conf, "-p", h.pidFile}
	if len(old) > 0 {
		args = append(args, "-sf")
		for _, p := range old {
			args = append(args, strconv.Itoa(p))
		}
	}
	p := &haproxyProc{out: newSyncBuffer(), done: make(chan struct{})}
	p.cmd = exec.Command(h.bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	h.procs = append(h.procs, p)
}

func (h *haproxy) addr() string { return h.listen }

func (h *haproxy) setBackends(t *testing.T, backends []string) {
	t.Helper()
	h.render(t, backends)
	var old []int
	for _, p := range h.procs {
		select {
		case <-p.done:
		default:
			old = append(old, p.cmd.Process.Pid)
		}
	}
	h.spawn(t, old)
}

func (h *haproxy) stop() {
	for _, p := range h.procs {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	}
}

func (h *haproxy) logs() string {
	var s []string
	for i, p := range h.procs {
		s = append(s, fmt.Sprintf("--- process %d:\n%s", i, p.out.String()))
	}
	return strings.Join(s, "\n")
}
