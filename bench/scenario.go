package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// UDSLoad replays OpenCensus daemon captures over conns unix-socket connections until ctx ends,
// and returns how many capture replays were written.
func UDSLoad(ctx context.Context, socket string, captures [][]byte, conns int) (int64, error) {
	var sent atomic.Int64
	err := eachUDSConn(socket, conns, func(_ int, c net.Conn) error {
		for i := 0; ctx.Err() == nil; i++ {
			if err := writeUDS(c, captures[i%len(captures)]); err != nil {
				return err
			}
			sent.Add(1)
		}
		return nil
	})
	return sent.Load(), err
}

// eachUDSConn dials conns unix-socket connections to socket and runs load on each, on a
// goroutine of its own, with the connection's index; it returns once every load has, with the
// first error.
func eachUDSConn(socket string, conns int, load func(ci int, c net.Conn) error) error {
	var wg sync.WaitGroup
	errc := make(chan error, conns)
	for ci := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", socket)
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			if err := load(ci, c); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// writeUDS writes b whole, giving up after 10 s (a daemon that stopped reading).
func writeUDS(c net.Conn, b []byte) error {
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Write(b)
	return err
}

// ReadCaptures reads the named files of dir.
func ReadCaptures(dir string, names ...string) ([][]byte, error) {
	var out [][]byte
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// KafkaLoad runs instances KIP-714 client instances spread over conns connections; each fetches
// its subscription and pushes metrics (an uncompressed MetricsData) at the interval it is given,
// until ctx ends. It returns the pushes accepted.
func KafkaLoad(ctx context.Context, addr string, metrics []byte, conns, instances int) (int64, error) {
	var pushed atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, conns)
	per := max(instances/conns, 1)
	for ci := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := kafkaConn(ctx, addr, metrics, per, fmt.Sprintf("otlpbench-%d", ci), &pushed); err != nil && ctx.Err() == nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	return pushed.Load(), <-errc
}

type kafkaInstance struct {
	id       [16]byte
	subID    int32
	interval time.Duration
	next     time.Time
}

func kafkaConn(ctx context.Context, addr string, metrics []byte, n int, clientID string, pushed *atomic.Int64) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	go func() { <-ctx.Done(); c.Close() }()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	var corr int32
	roundTrip := func(req kmsg.Request) (kmsg.Response, error) {
		corr++
		if _, err := c.Write(f.AppendRequest(nil, req, corr)); err != nil {
			return nil, err
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return nil, err
		}
		b := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, b); err != nil {
			return nil, err
		}
		b = b[4:] // correlation id
		if req.IsFlexible() {
			b = b[1:] // empty header tag buffer
		}
		resp := req.ResponseKind()
		return resp, resp.ReadFrom(b)
	}
	get := func(inst *kafkaInstance) error {
		req := kmsg.NewPtrGetTelemetrySubscriptionsRequest()
		req.ClientInstanceID = inst.id
		r, err := roundTrip(req)
		if err != nil {
			return err
		}
		resp := r.(*kmsg.GetTelemetrySubscriptionsResponse)
		inst.id, inst.subID = resp.ClientInstanceID, resp.SubscriptionID
		inst.interval = time.Duration(resp.PushIntervalMillis) * time.Millisecond
		inst.next = time.Now().Add(inst.interval)
		return nil
	}
	insts := make([]kafkaInstance, n)
	for i := range insts {
		if err := get(&insts[i]); err != nil {
			return err
		}
	}
	for ctx.Err() == nil {
		soonest := time.Now().Add(time.Second)
		for i := range insts {
			inst := &insts[i]
			if time.Now().Before(inst.next) {
				soonest = minTime(soonest, inst.next)
				continue
			}
			req := kmsg.NewPtrPushTelemetryRequest()
			req.ClientInstanceID, req.SubscriptionID, req.Metrics = inst.id, inst.subID, metrics
			r, err := roundTrip(req)
			if err != nil {
				return err
			}
			inst.next = time.Now().Add(inst.interval)
			switch r.(*kmsg.PushTelemetryResponse).ErrorCode {
			case 0:
				pushed.Add(1)
			case 117: // UNKNOWN_SUBSCRIPTION_ID: fetch again
				if err := get(inst); err != nil {
					return err
				}
			}
			soonest = minTime(soonest, inst.next)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(soonest)):
		}
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
