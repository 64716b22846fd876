package bench

import (
	"strings"
	"testing"
)

// strace -f output as it comes from a multi-threaded process: a read interrupted by another
// thread's line is split in two halves, which make one call; a read that found nothing
// (EAGAIN) is a call without data.
func TestParseStrace(t *testing.T) {
	const out = `101 read(12,  <unfinished ...>
102 futex(0xc000100148, FUTEX_WAKE_PRIVATE, 1) = 1
101 <... read resumed>""..., 262144) = 262144
101 read(12, ""..., 262144)          = 131072
101 read(12, 0xc000400000, 262144) = -1 EAGAIN (Resource temporarily unavailable)
102 write(13, ""..., 200000) = 200000
102 write(13, ""..., 100) = 100
101 epoll_pwait(4, [], 128, 0, NULL, 0) = 0
102 +++ exited with 0 +++
`
	s, err := ParseStrace(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"read": 3, "write": 2, "futex": 1, "epoll_pwait": 1} {
		if s.Calls[name] != want {
			t.Errorf("%s: %d calls, want %d (all: %v)", name, s.Calls[name], want, s.Calls)
		}
	}
	if got, want := *s.IO[IOKey{"read", 12}], (IOCount{Calls: 3, Data: 2, Bytes: 393216, Max: 262144}); got != want {
		t.Errorf("reads of fd 12: %+v, want %+v", got, want)
	}
	if got, want := *s.IO[IOKey{"write", 13}], (IOCount{Calls: 2, Data: 2, Bytes: 200100, Max: 200000}); got != want {
		t.Errorf("writes of fd 13: %+v, want %+v", got, want)
	}
	// Per batch of 1: fd 12 moved 384 KiB, fd 13 195 KiB; both over the 4 KiB floor.
	sum := s.Summary(1, 4<<10)
	for _, want := range []string{
		"read 3.0 (fd 12: 3.0 calls, 2.0 with data of 192 KiB mean, 256 KiB max, 384 KiB per batch)",
		"write 2.0 (fd 13: 2.0 calls, 2.0 with data of 97 KiB mean, 195 KiB max, 195 KiB per batch)",
		"futex 1.0", "epoll_pwait 1.0",
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}
