package client

import (
	"context"
	"errors"
	"testing"

	"github.com/otlpgate/otlpgate/fastpath"
	"github.com/otlpgate/otlpgate/fastpath/pipeline"
	"github.com/otlpgate/otlpgate/pool"
)

// SetQueueBytes moves the bound a running destination enforces: raised, it takes the batch it
// refused; lowered below what it holds, it refuses new batches and keeps every one it holds.
func TestSetQueueBytesInPlace(t *testing.T) {
	body := traceBody("bound", 1, 10)
	cfg := unaryConfig(t, "127.0.0.1:1", ProtocolV1, 1)
	cfg.QueueBytes = int64(2 * len(body))
	d, err := New(cfg, nil) // never started: what it takes stays queued
	if err != nil {
		t.Fatal(err)
	}
	var owners []*doneOwner
	enqueue := func() error {
		pl := pool.NewPayload(len(body))
		*pl.Buf() = append(*pl.Buf(), body...)
		o := &doneOwner{}
		b := pipeline.NewBatch(fastpath.Traces, 1, pl, o)
		err := d.Enqueue(b)
		if err != nil {
			b.Done(false)
			return err
		}
		owners = append(owners, o)
		return nil
	}
	want := func(step string, err, wantErr error, held int) {
		t.Helper()
		if !errors.Is(err, wantErr) {
			t.Errorf("%s: Enqueue = %v, want %v", step, err, wantErr)
		}
		if got := d.held.Load(); got != int64(held*len(body)) {
			t.Errorf("%s: holds %d bytes, want %d batches of %d", step, got, held, len(body))
		}
	}
	want("first", enqueue(), nil, 1)
	want("second", enqueue(), nil, 2)
	want("third, past the bound", enqueue(), pipeline.ErrFull, 2)
	d.SetQueueBytes(int64(3 * len(body)))
	want("third, the bound raised", enqueue(), nil, 3)
	d.SetQueueBytes(int64(len(body)))
	want("fourth, the bound lowered", enqueue(), pipeline.ErrFull, 3)
	if got := d.Config().QueueBytes; got != int64(len(body)) {
		t.Errorf("Config().QueueBytes = %d, want %d", got, len(body))
	}
	for i, o := range owners {
		if _, n := o.get(); n != 0 {
			t.Errorf("batch %d finished while queued", i)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d.Shutdown(ctx) // gives up what it holds: never started, it sent nothing
}
