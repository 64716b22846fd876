package bench

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func readCapture(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../server/uds/testdata/trace_export.bin")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The trace id of the first span carries the stamp as the 16 bytes it stands for: the tag, the
// stamp, then the id's own last 7 bytes; the sink's scan finds exactly that stamp.
func TestStampTraceID(t *testing.T) {
	b := readCapture(t)
	off := traceIDOffset(b)
	if got := string(b[off : off+32]); got != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("trace id at %d: %q", off, got)
	}
	const now = int64(1_795_262_752_453_291_000)
	StampTraceID(b, off, now)
	id, err := hex.DecodeString(string(b[off : off+32]))
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := hex.DecodeString("eb211c80319c"); !bytes.Equal(id[10:], want) || id[0] != stampTag {
		t.Fatalf("stamped id %x", id)
	}
	st := stamps(id)
	want := uint64(now/1000)&stampMask | stampMagic
	if len(st) != 1 || st[0] != want&stampMask {
		t.Fatalf("stamps %x, want [%x]", st, want&stampMask)
	}
	if d := since(st[0], now+1_500_000); d != 1_500_000 {
		t.Fatalf("latency %d, want 1500000", d)
	}
}

// UDSRateLoad writes the capture exactly n times over its connections, each copy whole and
// unchanged but for its stamped trace id.
func TestUDSRateLoad(t *testing.T) {
	capture := readCapture(t)
	off := traceIDOffset(capture)
	socket := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var got [][]byte
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 3 {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				b, _ := io.ReadAll(c)
				mu.Lock()
				got = append(got, b)
				mu.Unlock()
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sent, err := UDSRateLoad(ctx, socket, capture, 3, 5000, 100)
	if err != nil || sent != 100 {
		t.Fatalf("sent %d, %v; want 100", sent, err)
	}
	wg.Wait()
	copies := 0
	for _, b := range got {
		for ; len(b) > 0; b = b[len(capture):] {
			if len(b) < len(capture) || !bytes.Equal(b[:off], capture[:off]) || !bytes.Equal(b[off+18:len(capture)], capture[off+18:]) {
				t.Fatalf("copy %d differs from the capture outside the stamp", copies)
			}
			id, err := hex.DecodeString(string(b[off : off+32]))
			if err != nil || len(stamps(id)) != 1 {
				t.Fatalf("copy %d: trace id %q holds no stamp (%v)", copies, b[off:off+32], err)
			}
			copies++
		}
	}
	if copies != 100 {
		t.Fatalf("%d copies received, want 100", copies)
	}
}
