package testkit

import (
	"bytes"
	"sync"
)

// LockedBuffer is a bytes.Buffer that a writer goroutine (a child process's stderr, a logger)
// and the test may use at once.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Tail is the last n bytes written, or all of them.
func (l *LockedBuffer) Tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.b.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
