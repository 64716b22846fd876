package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProcCounters are what the anchor counts of a proxy besides its CPU time, over the measured
// phase: the account of where the CPU above the relay goes (docs/benchmarks.md, "Where the CPU
// above the floor goes").
type ProcCounters struct {
	// SysCR and SysCW are the read- and write-class system calls the kernel counted
	// (/proc/PID/io): read, readv, write, writev and the like on sockets, not splice(2), so the
	// relay's are near zero.
	SysCR, SysCW int64
	// Voluntary context switches are a thread going to sleep (in futex, epoll_pwait, a
	// blocking read): each is followed by a wake-up. Involuntary ones are preemptions.
	Voluntary, Involuntary int64
	// GC is the process's garbage collections (go_gc_cycles_total_gc_cycles_total on its
	// /metrics), -1 when unknown.
	GC      int64
	Threads int // threads the process had when read
}

// sub is c minus an earlier reading b: the counts of the interval between them.
func (c ProcCounters) sub(b ProcCounters) ProcCounters {
	d := ProcCounters{SysCR: c.SysCR - b.SysCR, SysCW: c.SysCW - b.SysCW, Voluntary: c.Voluntary - b.Voluntary,
		Involuntary: c.Involuntary - b.Involuntary, GC: -1, Threads: c.Threads}
	if c.GC >= 0 && b.GC >= 0 {
		d.GC = c.GC - b.GC
	}
	return d
}

// gcCycles reads the GC count from an otlpgate admin listener's /metrics.
func gcCycles(admin string) int64 {
	v, err := ScrapeCounter("http://"+admin+"/metrics", "go_gc_cycles_total_gc_cycles_total")
	if err != nil {
		return -1
	}
	return int64(v)
}

// Tracer is strace(1) attached to every thread of a running process, writing each system call
// to a file: for counting the calls a proxy makes per batch by kind, with their sizes. Under
// it the process runs several times slower, so a cell measured with it has a CPU figure that
// is strace's, not the proxy's.
type Tracer struct {
	cmd  *exec.Cmd
	path string
	done chan struct{} // closed when strace has exited
}

// ErrNoStrace is returned when strace(1) is not on the PATH.
var ErrNoStrace = errors.New("bench: strace is not installed (apt-get install strace)")

// StartTracer attaches strace to pid and its threads, the calls going to path. It returns once
// strace has attached (it writes its first line), or after a second.
func StartTracer(pid int, path string) (*Tracer, error) {
	bin, err := exec.LookPath("strace")
	if err != nil {
		return nil, ErrNoStrace
	}
	// -s 0: no buffer contents, only sizes; -qq: no attach and exit notes.
	cmd := exec.Command(bin, "-f", "-qq", "-s", "0", "-p", strconv.Itoa(pid), "-o", path)
	errf, err := os.Create(path + ".err")
	if err != nil {
		return nil, err
	}
	defer errf.Close()
	cmd.Stdout, cmd.Stderr = errf, errf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: cannot start strace: %w", err)
	}
	t := &Tracer{cmd: cmd, path: path, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(t.done)
	}()
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return t, nil
}

// Stop detaches strace (SIGINT) and waits for it. Stopping a stopped Tracer does nothing.
func (t *Tracer) Stop() {
	select {
	case <-t.done:
		return
	default:
	}
	t.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-t.done:
	case <-time.After(10 * time.Second):
		t.cmd.Process.Kill()
		<-t.done
	}
}

// Syscalls is a count of system calls by name, with the bytes moved by the data calls (read,
// write and their vector and socket forms) per file descriptor.
type Syscalls struct {
	Calls map[string]int
	IO    map[IOKey]*IOCount
}

// IOKey is a data call on one descriptor.
type IOKey struct {
	Name string
	FD   int
}

// IOCount is what the calls of one IOKey did: Calls in all, Data of them moved bytes (the
// others found nothing to read: EAGAIN, which sends the goroutine to the poller), Bytes in all
// and the largest single call.
type IOCount struct {
	Calls, Data int
	Bytes, Max  int64
}

var (
	straceLine    = regexp.MustCompile(`^(\d+)\s+(.*)$`)
	straceResumed = regexp.MustCompile(`^<\.\.\. (\w+) resumed>(.*)$`)
	straceCall    = regexp.MustCompile(`^(\w+)\((\d*)`)
	// strace pads the return value into a column: "read(12, ""..., 512)      = 303".
	straceReturn = regexp.MustCompile(`\)\s+=\s+(-?\d+)`)
	dataCalls    = map[string]bool{"read": true, "write": true, "readv": true, "writev": true,
		"recvmsg": true, "sendmsg": true, "recvfrom": true, "sendto": true, "splice": true}
)

// ParseStrace counts the calls in strace -f output. A call that another thread's line
// interrupted is split by strace into "<unfinished ...>" and "<... resumed>" halves; the two
// make one call, counted when it returns.
func ParseStrace(r io.Reader) (Syscalls, error) {
	s := Syscalls{Calls: map[string]int{}, IO: map[IOKey]*IOCount{}}
	pending := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := straceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		tid, rest := m[1], m[2]
		if head, ok := strings.CutSuffix(rest, "<unfinished ...>"); ok {
			pending[tid] = head
			continue
		}
		if r := straceResumed.FindStringSubmatch(rest); r != nil {
			head, ok := pending[tid]
			if !ok {
				head = r[1] + "("
			}
			delete(pending, tid)
			rest = head + r[2]
		}
		c := straceCall.FindStringSubmatch(rest)
		if c == nil {
			continue
		}
		name := c[1]
		s.Calls[name]++
		if !dataCalls[name] || c[2] == "" {
			continue
		}
		fd, _ := strconv.Atoi(c[2])
		k := IOKey{name, fd}
		n := s.IO[k]
		if n == nil {
			n = &IOCount{}
			s.IO[k] = n
		}
		n.Calls++
		ret := straceReturn.FindStringSubmatch(rest)
		if ret == nil {
			continue
		}
		if b, err := strconv.ParseInt(ret[1], 10, 64); err == nil && b > 0 {
			n.Data++
			n.Bytes += b
			n.Max = max(n.Max, b)
		}
	}
	return s, sc.Err()
}

// Summary writes the calls per batch, most frequent first, and for each data call on a
// descriptor that moved at least minBytes per batch its calls, how many moved data, the mean
// and largest size: "read 7.8 (fd 12: 5.5 calls, 4.4 with 192 KiB mean, 256 KiB max)".
func (s Syscalls) Summary(batches int, minBytes int64) string {
	if batches <= 0 {
		return ""
	}
	names := make([]string, 0, len(s.Calls))
	for n := range s.Calls {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return s.Calls[b] - s.Calls[a] })
	per := func(n int) float64 { return float64(n) / float64(batches) }
	var parts []string
	for _, name := range names {
		if per(s.Calls[name]) < 0.05 {
			continue
		}
		p := fmt.Sprintf("%s %.1f", name, per(s.Calls[name]))
		var fds []string
		for k, c := range s.IO {
			if k.Name != name || c.Bytes/int64(batches) < minBytes {
				continue
			}
			fds = append(fds, fmt.Sprintf("fd %d: %.1f calls, %.1f with data of %s mean, %s max, %s per batch", k.FD,
				per(c.Calls), per(c.Data), kib(c.Bytes/int64(max(c.Data, 1))), kib(c.Max), kib(c.Bytes/int64(batches))))
		}
		slices.Sort(fds)
		if len(fds) > 0 {
			p += " (" + strings.Join(fds, "; ") + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

func kib(b int64) string {
	if b < 4<<10 {
		return fmt.Sprintf("%d B", b)
	}
	return fmt.Sprintf("%d KiB", b>>10)
}

// profileCPU saves a CPU profile of d from an otlpgate pprof listener to path, in the
// background; the returned channel gives its error when it is done.
func profileCPU(pprof string, d time.Duration, path string) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- Fetch(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprof, max(int(d.Seconds()), 1)), path)
	}()
	return done
}
