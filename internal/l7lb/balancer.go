package l7lb

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/otlpgate/otlpgate/internal/freeport"
)

// Balancer is a real L7 balancer process in front of a set of gateway addresses.
type Balancer interface {
	// Addr is the host:port edges dial.
	Addr() string
	// SetBackends rewrites the configuration with these gateways and reloads it the way an
	// operator would (nginx -s reload; a new HAProxy process with -sf), keeping open streams.
	SetBackends(backends []string) error
	// Stop ends the balancer's processes at once.
	Stop()
	// Logs is what the processes wrote so far.
	Logs() string
}

// ErrNoTool is returned when the balancer's binary is not installed.
var ErrNoTool = errors.New("l7lb: not installed")

// LookTool finds a balancer binary on PATH or in /usr/sbin, /sbin (Debian installs them there).
func LookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w (apt-get install -y nginx haproxy)", name, ErrNoTool)
}

// freeAddr chooses a loopback port for nginx or haproxy to listen on. It remains because their
// configurations name a port and neither reports the one it bound for 127.0.0.1:0; between the
// return and their bind another process can take the port (the balancer then fails to start,
// with its log). Within this process it never returns a port twice: the kernel may repeat a
// port released a moment ago, and two balancers of one test must not be given one.
func freeAddr() (string, error) { return freeport.Addr() }

// waitListening waits (bounded) until addr accepts connections.
func waitListening(addr string, exited <-chan struct{}, logs func() string) error {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("l7lb: balancer exited before listening on %s; its output:\n%s", addr, logs())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("l7lb: balancer not listening on %s; its output:\n%s", addr, logs())
}

// syncBuffer collects a process's output for whoever reads it later.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is one balancer process.
type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

func spawn(bin string, args ...string) (*proc, error) {
	p := &proc{out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// A group of its own, so that Stop reaches nginx's workers too.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) kill() {
	if p.running() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.done
}

// Options adjust the deployed configuration for one run.
type Options struct {
	// Replace maps a line of the deployed file to the line used instead (to run with a
	// balancer's default, for instance).
	Replace map[string]string
	// GatewayCA, if set, is a CA file: the balancer speaks TLS with ALPN h2 to the gateways
	// (nginx grpc_pass grpcs://, HAProxy ssl alpn h2 on each server) and verifies their
	// certificate for the name localhost against it.
	GatewayCA string
}

// gatewayName is the name the balancer verifies the gateways' certificate for.
const gatewayName = "localhost"

func (o Options) apply(c string) string {
	for from, to := range o.Replace {
		c = strings.ReplaceAll(c, from, to)
	}
	return c
}

// ---- nginx ----

type nginx struct {
	bin, dir, conf, listen, template string
	opts                             Options
	p                                *proc
}

var (
	ngxUpstream = regexp.MustCompile(`(?s)(upstream otlpgate_gateways \{\n).*?(\n\s*keepalive )`)
	ngxListen   = regexp.MustCompile(`listen 127\.0\.0\.1:4317 http2;`)
	ngxPass     = regexp.MustCompile(`(?m)^(\s*)grpc_pass grpc://otlpgate_gateways;`)
)

// StartNginx runs nginx with deployDir/nginx/nginx.conf, its listener moved to a free loopback
// port and its upstream block listing backends. dir holds the configuration, pid file and
// temporary files; it must exist.
func StartNginx(deployDir, dir string, backends []string, opts Options) (Balancer, error) {
	bin, err := LookTool("nginx")
	if err != nil {
		return nil, err
	}
	tmpl, err := os.ReadFile(filepath.Join(deployDir, "nginx", "nginx.conf"))
	if err != nil {
		return nil, err
	}
	listen, err := freeAddr()
	if err != nil {
		return nil, err
	}
	n := &nginx{bin: bin, dir: dir, conf: filepath.Join(dir, "nginx.conf"), listen: listen, template: string(tmpl), opts: opts}
	if err := n.render(backends); err != nil {
		return nil, err
	}
	if n.p, err = spawn(bin, "-p", dir, "-c", n.conf, "-e", "stderr", "-g", "daemon off;"); err != nil {
		return nil, err
	}
	if err := waitListening(listen, n.p.done, n.Logs); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

func (n *nginx) render(backends []string) error {
	c := n.template
	if !ngxUpstream.MatchString(c) || !ngxListen.MatchString(c) {
		return errors.New("l7lb: deploy/nginx/nginx.conf no longer has the upstream block or listener to rewrite")
	}
	var lines []string
	for _, b := range backends {
		lines = append(lines, "        server "+b+";")
	}
	c = ngxUpstream.ReplaceAllString(c, "${1}"+strings.Join(lines, "\n")+"${2}")
	c = ngxListen.ReplaceAllString(c, "listen "+n.listen+" http2;")
	if ca := n.opts.GatewayCA; ca != "" {
		if !ngxPass.MatchString(c) {
			return errors.New("l7lb: deploy/nginx/nginx.conf no longer has the grpc_pass line to turn to TLS")
		}
		// grpcs offers ALPN h2; nginx verifies nothing unless told to.
		c = ngxPass.ReplaceAllString(c, "${1}grpc_pass grpcs://otlpgate_gateways;\n"+
			"${1}grpc_ssl_verify on;\n${1}grpc_ssl_trusted_certificate "+ca+";\n"+
			"${1}grpc_ssl_name "+gatewayName+";\n${1}grpc_ssl_server_name on;")
	}
	// Two workers whatever the machine: streams spread over processes too.
	c = strings.Replace(c, "worker_processes auto;", "worker_processes 2;", 1)
	c = n.opts.apply(c)
	return os.WriteFile(n.conf, []byte(c), 0o644)
}

func (n *nginx) Addr() string { return n.listen }

func (n *nginx) SetBackends(backends []string) error {
	if err := n.render(backends); err != nil {
		return err
	}
	// nginx -s reload signals the master named in the pid file under our prefix.
	if out, err := exec.Command(n.bin, "-p", n.dir, "-c", n.conf, "-e", "stderr", "-s", "reload").CombinedOutput(); err != nil {
		return fmt.Errorf("l7lb: nginx -s reload: %v\n%s", err, out)
	}
	return nil
}

func (n *nginx) Stop() { n.p.kill() }

func (n *nginx) Logs() string { return n.p.out.String() }

// ---- HAProxy ----

type haproxy struct {
	bin, dir, conf, pidFile, listen, template string
	opts                                      Options
	mu                                        sync.Mutex
	procs                                     []*proc
}

var (
	hapBackend = regexp.MustCompile(`(?ms)^backend otlpgate_gateways\n.*\z`)
	hapBind    = regexp.MustCompile(`bind 127\.0\.0\.1:4317 proto h2`)
)

// StartHAProxy runs HAProxy with deployDir/haproxy/haproxy.cfg, its bind moved to a free
// loopback port and its backend listing backends (without the deployed health checks: the
// gateways here may have no admin listener). dir holds the configuration and pid file.
func StartHAProxy(deployDir, dir string, backends []string, opts Options) (Balancer, error) {
	bin, err := LookTool("haproxy")
	if err != nil {
		return nil, err
	}
	tmpl, err := os.ReadFile(filepath.Join(deployDir, "haproxy", "haproxy.cfg"))
	if err != nil {
		return nil, err
	}
	listen, err := freeAddr()
	if err != nil {
		return nil, err
	}
	h := &haproxy{bin: bin, dir: dir, conf: filepath.Join(dir, "haproxy.cfg"), pidFile: filepath.Join(dir, "haproxy.pid"),
		listen: listen, template: string(tmpl), opts: opts}
	if err := h.render(backends); err != nil {
		return nil, err
	}
	p, err := h.spawn(nil)
	if err != nil {
		return nil, err
	}
	if err := waitListening(listen, p.done, h.Logs); err != nil {
		h.Stop()
		return nil, err
	}
	return h, nil
}

func (h *haproxy) render(backends []string) error {
	c := h.template
	if !hapBackend.MatchString(c) || !hapBind.MatchString(c) {
		return errors.New("l7lb: deploy/haproxy/haproxy.cfg no longer has the backend or bind line to rewrite")
	}
	// Keep the deployed balance algorithm.
	balance := "balance roundrobin"
	if m := regexp.MustCompile(`(?m)^backend otlpgate_gateways\n(?:.*\n)*?\s*(balance \S+)`).FindStringSubmatch(c); m != nil {
		balance = m[1]
	}
	be := "backend otlpgate_gateways\n    " + balance + "\n"
	tls := ""
	if ca := h.opts.GatewayCA; ca != "" {
		tls = " ssl verify required ca-file " + ca + " verifyhost " + gatewayName + " sni str(" + gatewayName + ") alpn h2"
	}
	for i, b := range backends {
		be += fmt.Sprintf("    server gw%d %s proto h2%s\n", i+1, b, tls)
	}
	c = hapBackend.ReplaceAllLiteralString(c, be)
	c = hapBind.ReplaceAllString(c, "bind "+h.listen+" proto h2")
	c = h.opts.apply(c)
	if err := os.WriteFile(h.conf, []byte(c), 0o644); err != nil {
		return err
	}
	if out, err := exec.Command(h.bin, "-c", "-f", h.conf).CombinedOutput(); err != nil {
		return fmt.Errorf("l7lb: haproxy -c: %v\n%s", err, out)
	}
	return nil
}

// spawn starts a HAProxy process in the foreground (-db); with old pids, -sf tells those
// processes to stop listening and finish their streams: HAProxy's soft reload.
func (h *haproxy) spawn(old []int) (*proc, error) {
	args := []string{"-db", "-f", h.conf, "-p", h.pidFile}
	if len(old) > 0 {
		args = append(args, "-sf")
		for _, p := range old {
			args = append(args, strconv.Itoa(p))
		}
	}
	p, err := spawn(h.bin, args...)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	return p, nil
}

func (h *haproxy) Addr() string { return h.listen }

func (h *haproxy) SetBackends(backends []string) error {
	if err := h.render(backends); err != nil {
		return err
	}
	var old []int
	h.mu.Lock()
	for _, p := range h.procs {
		if p.running() {
			old = append(old, p.cmd.Process.Pid)
		}
	}
	h.mu.Unlock()
	_, err := h.spawn(old)
	return err
}

func (h *haproxy) Stop() {
	h.mu.Lock()
	procs := h.procs
	h.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
}

func (h *haproxy) Logs() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var s []string
	for i, p := range h.procs {
		s = append(s, fmt.Sprintf("--- process %d:\n%s", i, p.out.String()))
	}
	return strings.Join(s, "\n")
}
