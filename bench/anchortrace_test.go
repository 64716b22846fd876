package bench

import (
	"strings"
	"testing"
)

// Lines of `go tool trace -d=parsed` output as it prints them (stacks and other events in
// between are skipped): each transition is counted once under its kind, and a block under its
// reason.
func TestParseTrace(t *testing.T) {
	const out = `M=32245 P=0 G=385 StateTransition Time=23838423682112 GoID=387 NotExist->Runnable Reason=""
M=32245 P=0 G=385 StateTransition Time=23838423691328 GoID=385 Running->Waiting Reason="select"
Stack=
	runtime.selectgo @ 0x4826a3
M=32245 P=0 G=231 StateTransition Time=23838423705408 GoID=231 Running->Syscall Reason=""
M=32245 P=0 G=231 StateTransition Time=23838423778688 GoID=192 Waiting->Runnable Reason=""
M=32245 P=0 G=231 StateTransition Time=23838423778690 GoID=385 Waiting->Runnable Reason=""
M=32245 P=0 G=231 StateTransition Time=23838423792960 GoID=231 Running->Waiting Reason="network"
M=32245 P=0 G=224 StateTransition Time=23838426451968 GoID=224 Running->Runnable Reason="runtime.Gosched"
M=32245 P=0 G=-1 StateTransition Time=23838431334272 ProcID=0 Running->Idle Reason=""
M=32245 P=-1 G=-1 StateTransition Time=23838431334300 ProcID=0 Idle->Running Reason=""
M=32245 P=0 G=385 Metric Time=23838423672256 Name="/sched/gomaxprocs:threads" Value=Value{Uint64(1)}
`
	s, err := ParseTrace(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	want := Scheduling{Wakes: 2, Blocks: 2, Idles: 1, Syscalls: 1, Created: 1, Yields: 1}
	if s.Wakes != want.Wakes || s.Blocks != want.Blocks || s.Idles != want.Idles || s.Syscalls != want.Syscalls ||
		s.Created != want.Created || s.Yields != want.Yields || s.BlockedBy["select"] != 1 || s.BlockedBy["network"] != 1 {
		t.Fatalf("counted %+v, want %+v with one select and one network block", s, want)
	}
	if got, want := s.Summary(2), "goroutine wake-ups 1.0, blocks 1.0 (network 0.5, select 0.5), P idle 0.5, syscalls 0.5, goroutines created 0.5, yields 0.5"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}
