package codec

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// testBudget is a Budget of max bytes that records what it lent.
type testBudget struct {
	mu             sync.Mutex
	max            int
	held, high     int
	acquires, fail int
}

func (b *testBudget) Acquire(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.acquires++
	if b.held+n > b.max {
		b.fail++
		return false
	}
	b.held += n
	b.high = max(b.high, b.held)
	return true
}

func (b *testBudget) Release(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
	if b.held < 0 {
		panic("BUG: released more than acquired")
	}
}

func (b *testBudget) state() (held, high, acquires, fail int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held, b.high, b.acquires, b.fail
}

// checkedReader reads from a decompressor and checks, after every read, that the budget holds
// at least what was produced beyond the free allowance.
type checkedReader struct {
	t        *testing.T
	r        io.Reader
	b        *testBudget
	produced int
}

func (c *checkedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.produced += n
	if held, _, _, _ := c.b.state(); held < c.produced-FreeInflate {
		c.t.Fatalf("%d bytes produced, %d held by the budget (free %d)", c.produced, held, FreeInflate)
	}
	return n, err
}

// Every decompressor takes its claim from its Budget, once, before it produces the first byte
// past the free allowance, and gives it back at Close; a message within the allowance never
// asks.
func TestDecompressionHoldsBudget(t *testing.T) {
	const big = 6 << 20
	plain := make([]byte, big) // zeros: a bomb of a thousand to one
	small := seq(FreeInflate - 1)
	for _, name := range []string{Gzip, Zstd, Snappy} {
		t.Run(name, func(t *testing.T) {
			b := &testBudget{max: 64 << 20}
			cfg := DefaultConfig()
			cfg.Budget, cfg.InflateClaim = b, big
			cs, err := Compressors(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var c = cs[0]
			for _, x := range cs {
				if x.Name() == name {
					c = x
				}
			}
			z := compress(t, c, plain)
			r, err := c.Decompress(bytes.NewReader(z))
			if err != nil {
				t.Fatal(err)
			}
			out, err := io.ReadAll(&checkedReader{t: t, r: r, b: b})
			if err != nil || !bytes.Equal(out, plain) {
				t.Fatalf("decompressed %d bytes, err %v", len(out), err)
			}
			r.(io.Closer).Close()
			held, high, acquires, _ := b.state()
			if held != 0 || high != big || acquires != 1 {
				t.Fatalf("after Close the budget holds %d (high water %d, %d acquires), want 0 (the claim of %d, taken once)", held, high, acquires, big)
			}

			_, _, before, _ := b.state()
			if got, err := decompress(c, compress(t, c, small)); err != nil || !bytes.Equal(got, small) {
				t.Fatalf("small message: %v", err)
			}
			if _, _, after, _ := b.state(); after != before {
				t.Fatalf("a message within the free allowance asked the budget %d times", after-before)
			}
		})
	}
}

// A budget that refuses the claim stops the decompression before anything past the free
// allowance is produced, and so does a message that inflates past its claim: the reader
// returns ErrInflateBudget, nothing stays taken after Close, and the error is recognised
// inside the INTERNAL status gRPC wraps it in.
func TestDecompressionRefusedByBudget(t *testing.T) {
	plain := make([]byte, 8<<20)
	for _, name := range []string{Gzip, Zstd, Snappy} {
		t.Run(name, func(t *testing.T) {
			b := &testBudget{max: 1 << 20}
			cfg := DefaultConfig()
			cfg.Budget, cfg.InflateClaim = b, 2<<20
			cs, err := Compressors(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var c = cs[0]
			for _, x := range cs {
				if x.Name() == name {
					c = x
				}
			}
			z := compress(t, c, plain)
			r, err := c.Decompress(bytes.NewReader(z))
			if err != nil {
				t.Fatal(err)
			}
			out, err := io.ReadAll(r)
			if err != ErrInflateBudget {
				t.Fatalf("read %d bytes, err %v; want ErrInflateBudget", len(out), err)
			}
			if len(out) > FreeInflate {
				t.Fatalf("produced %d bytes past the free allowance with the claim refused", len(out))
			}
			r.(io.Closer).Close()
			if held, _, _, fail := b.state(); held != 0 || fail != 1 {
				t.Fatalf("after Close the budget holds %d, %d refusals", held, fail)
			}
			// Room for the claim, not for what the message inflates to.
			b.max = 64 << 20
			r, err = c.Decompress(bytes.NewReader(z))
			if err != nil {
				t.Fatal(err)
			}
			out, err = io.ReadAll(r)
			if err != ErrInflateBudget || len(out) != 2<<20+FreeInflate {
				t.Fatalf("past the claim: read %d bytes, err %v; want %d and ErrInflateBudget", len(out), err, 2<<20+FreeInflate)
			}
			r.(io.Closer).Close()
			if held, _, _, _ := b.state(); held != 0 {
				t.Fatalf("after Close the budget holds %d", held)
			}
		})
	}
	wrapped := status.Errorf(codes.Internal, "grpc: failed to read decompressed data: %v", ErrInflateBudget)
	if !IsInflateBudget(wrapped) || !IsInflateBudget(fmt.Errorf("x: %w", ErrInflateBudget)) || IsInflateBudget(io.ErrUnexpectedEOF) || IsInflateBudget(nil) {
		t.Fatal("IsInflateBudget does not tell the budget's refusal from other errors")
	}
}
