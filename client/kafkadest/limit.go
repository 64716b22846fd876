package kafkadest

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otlpgate/otlpgate/fastpath"
)

// The largest record batch a topic takes is its max.message.bytes, which may be below
// max-message-bytes: a topic made with a smaller one. The destination asks the brokers for
// each topic's before it produces its first record, and cuts records, and has the producer
// build record batches, below the smaller of the two (Dest.limits). The producer fixes a
// partition's batch bound when it first produces to it: a topic's max.message.bytes lowered
// while otlpgate runs is refused as too large, counted and logged, until a restart.

// learnLimits asks the brokers for the max.message.bytes of every topic and lowers the limits
// to them. It gives up quietly when they cannot answer in time: the configured limit stays.
func (d *Dest) learnLimits() {
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	for sig := range fastpath.NumSignals {
		if _, err := d.learnLimit(ctx, sig); err != nil {
			d.log.Debug("kafka destination cannot read a topic's max.message.bytes", "destination", d.cfg.Name, "topic", d.cfg.Topics[sig], "err", err)
		}
	}
}

// learnLimit reads the max.message.bytes of sig's topic and lowers sig's limit to it; it
// reports whether the limit went down.
func (d *Dest) learnLimit(ctx context.Context, sig fastpath.Signal) (bool, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType = kmsg.ConfigResourceTypeTopic
	r.ResourceName = d.cfg.Topics[sig]
	r.ConfigNames = []string{"max.message.bytes"}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, d.cl)
	if err != nil {
		return false, err
	}
	for _, res := range resp.Resources {
		if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
			return false, err
		}
		for _, c := range res.Configs {
			if c.Name != "max.message.bytes" || c.Value == nil {
				continue
			}
			n, err := strconv.Atoi(*c.Value)
			if err != nil || n < 1<<10 {
				return false, fmt.Errorf("max.message.bytes %q", *c.Value)
			}
			for {
				cur := d.limits[sig].Load()
				if int64(n) >= cur {
					return false, nil
				}
				if d.limits[sig].CompareAndSwap(cur, int64(n)) {
					d.log.Info("kafka destination cuts records below the topic's max.message.bytes", "destination", d.cfg.Name,
						"topic", d.cfg.Topics[sig], "max_message_bytes", n)
					return true, nil
				}
			}
		}
	}
	return false, nil
}
