package bench

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strings"
)

// Scheduling is what a Go execution trace of a proxy shows of its scheduler per batch: how
// often a goroutine was woken (Waiting->Runnable: a hand-off from whichever goroutine or the
// network poller unblocked it), why goroutines blocked, how often the process's one P went
// idle and back (the process slept and was woken by the kernel), the system calls the runtime
// saw and the goroutines created.
type Scheduling struct {
	Wakes, Blocks, Idles, Syscalls, Created, Yields int
	BlockedBy                                       map[string]int // reason: select, network, chan receive, ...
}

var traceTransition = regexp.MustCompile(`StateTransition .*(GoID|ProcID)=\d+ (\w+)->(\w+)(?: Reason="([^"]*)")?`)

// ParseTrace counts the state transitions in the output of `go tool trace -d=parsed`.
func ParseTrace(r io.Reader) (Scheduling, error) {
	s := Scheduling{BlockedBy: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := traceTransition.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		kind, from, to, reason := m[1], m[2], m[3], m[4]
		switch {
		case kind == "ProcID" && from == "Running" && to == "Idle":
			s.Idles++
		case kind != "GoID":
		case from == "Waiting" && to == "Runnable":
			s.Wakes++
		case from == "Running" && to == "Waiting":
			s.Blocks++
			s.BlockedBy[reason]++
		case from == "Running" && to == "Syscall":
			s.Syscalls++
		case from == "NotExist":
			s.Created++
		case from == "Running" && to == "Runnable":
			s.Yields++
		}
	}
	return s, sc.Err()
}

// ReadTraceFile runs `go tool trace -d=parsed` on an execution trace (the Go toolchain must be
// on the PATH) and counts it.
func ReadTraceFile(path string) (Scheduling, error) {
	cmd := exec.Command("go", "tool", "trace", "-d=parsed", path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Scheduling{}, err
	}
	if err := cmd.Start(); err != nil {
		return Scheduling{}, fmt.Errorf("bench: cannot run go tool trace: %w", err)
	}
	s, perr := ParseTrace(out)
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return s, fmt.Errorf("bench: go tool trace %s: %w", path, err)
	}
	return s, perr
}

// Summary writes the counts per batch: "goroutine wake-ups 16.0, blocks 15.9 (select 10.1,
// network 4.7, ...), P idle 3.8, syscalls 21.4, goroutines created 1.2, yields 2.9".
func (s Scheduling) Summary(batches int) string {
	if batches <= 0 {
		return ""
	}
	per := func(n int) float64 { return float64(n) / float64(batches) }
	reasons := make([]string, 0, len(s.BlockedBy))
	for r := range s.BlockedBy {
		reasons = append(reasons, r)
	}
	slices.SortFunc(reasons, func(a, b string) int {
		if d := s.BlockedBy[b] - s.BlockedBy[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var by []string
	for _, r := range reasons {
		if per(s.BlockedBy[r]) >= 0.05 {
			by = append(by, fmt.Sprintf("%s %.1f", r, per(s.BlockedBy[r])))
		}
	}
	return fmt.Sprintf("goroutine wake-ups %.1f, blocks %.1f (%s), P idle %.1f, syscalls %.1f, goroutines created %.1f, yields %.1f",
		per(s.Wakes), per(s.Blocks), strings.Join(by, ", "), per(s.Idles), per(s.Syscalls), per(s.Created), per(s.Yields))
}
