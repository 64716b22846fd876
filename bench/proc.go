package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/otlpgate/otlpgate/internal/freeport"
	"github.com/otlpgate/otlpgate/internal/listenlog"
)

// Proc is a child process under measurement: otlpgate or a peer proxy.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	log  *os.File
}

// StartProc starts bin with args and extra environment, its output going to logPath.
func StartProc(name, bin string, args, env []string, logPath string) (*Proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: cannot start %s: %w", bin, err)
	}
	return &Proc{Name: name, cmd: cmd, log: f}, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM and waits up to 30s, then kills.
func (p *Proc) Stop() error {
	defer p.log.Close()
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		return <-done
	}
}

// AnyPort is the listen address otlpgate children are given: the kernel chooses a free port at
// the bind and Proc.Listening reads it from the child's log. A port chosen here, released and
// handed to the child could be taken meanwhile by another process (another run, or another
// test binary of `go test ./...`).
const AnyPort = "127.0.0.1:0"

// Listening waits until the log of an otlpgate child reports every named listener bound and
// returns their addresses in the order of names. The child must log in the text format (the
// default). It gives up when ctx ends or the child exits, with the log's path in the error.
func (p *Proc) Listening(ctx context.Context, names ...string) ([]string, error) {
	for {
		b, _ := os.ReadFile(p.log.Name())
		got := listenlog.Addrs(string(b))
		out := make([]string, 0, len(names))
		for _, n := range names {
			if a, ok := got[n]; ok {
				out = append(out, a)
			}
		}
		if len(out) == len(names) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("bench: %s did not report listening on %v: %w (log: %s)", p.Name, names, ctx.Err(), p.log.Name())
		case <-time.After(10 * time.Millisecond):
		}
		if p.exited() {
			// The last lines may have been written just before the exit: read them once more.
			if b, _ := os.ReadFile(p.log.Name()); len(listenlog.Addrs(string(b))) < len(names) {
				return nil, fmt.Errorf("bench: %s exited before listening on %v (log: %s)", p.Name, names, p.log.Name())
			}
		}
	}
}

// exited reports whether the child has exited. One that exits at start (a bad flag) stays a
// zombie until Stop waits for it, and signal 0 still reaches a zombie: /proc tells.
func (p *Proc) exited() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	return err != nil || strings.Contains(string(b), ") Z ")
}

// FreeAddrs returns n distinct loopback addresses nobody listened on when it returned. It
// remains for children that cannot bind 127.0.0.1:0 and report the port: the peer proxies (the
// Collector, configured through the environment) and otlpbench's own forward and relay, whose
// -listen a run names. Between the return and the child's bind another process can take a port
// (the child then fails to start, and WaitListening says so); otlpgate children never get one
// (AnyPort). Each chosen port stays bound until all n are chosen, and no port is returned twice
// in this process, so that two children of one run are never given one port.
func FreeAddrs(n int) ([]string, error) { return freeport.Addrs(n) }

// FreeAddr is FreeAddrs for one address.
func FreeAddr() (string, error) { return freeport.Addr() }

// WaitListening waits until addr accepts TCP connections or ctx ends.
func WaitListening(ctx context.Context, addr string) error {
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: %s never listened: %w", addr, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ScrapeCounter reads one un-labelled series from a Prometheus /metrics endpoint.
func ScrapeCounter(url, name string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	// Read to the end, so that the client keeps the connection for the next scrape: a new one
	// would be accepted, and allocated for, by the scraped process between two of them.
	defer io.Copy(io.Discard, resp.Body)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("bench: %s not found at %s", name, url)
}

// Fetch saves the body of url to path (pprof captures).
func Fetch(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench: %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
