package kafkaconsume

import (
	"context"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// watchLoop asks the brokers for the end offset of every partition the consumer holds, every
// StallTimeout/3 until Shutdown, for the lag and to find a partition that stalled.
//
// A partition stalls when the client no longer fetches it though records wait there: a leader
// that answers without serving it (a broker that came back under its old id while a connection
// to its former self stayed open), a fetch that fails for ever. kgo retries such errors by
// itself and reports none of them to the poll, and the lag, taken from the fetches, stays where
// the last fetch left it; so a stall showed nothing before this watch. It runs apart from the
// commits: a listing can wait on a broker that does not answer.
func (c *Consumer) watchLoop() {
	defer close(c.watchDone)
	every := c.cfg.StallTimeout / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			ctx, cancel := context.WithTimeout(c.pollCtx, every)
			c.watch(ctx, time.Now())
			cancel()
		case <-c.stopCommit:
			return
		}
	}
}

// watch lists the end offsets of the partitions held, updates their lag, and reports the
// partitions whose read position has not moved for StallTimeout while the brokers hold records
// past it, or while their leader did not answer their end offset at all. Time spent waiting for
// room in the pipeline (backpressure) is no stall: the clock of every partition restarts after
// the last wait.
func (c *Consumer) watch(ctx context.Context, now time.Time) {
	c.learnStarts(ctx)
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	idx := map[string]int{}
	c.mu.Lock()
	for k := range c.mu.parts {
		i, ok := idx[k.topic]
		if !ok {
			i = len(req.Topics)
			idx[k.topic] = i
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = k.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = k.id, -1 // -1: the end (high watermark)
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	c.mu.Unlock()
	if len(req.Topics) == 0 {
		return
	}
	type listed struct {
		k   partKey
		end int64
	}
	var ends []listed
	for _, sh := range c.cl.RequestSharded(ctx, req) {
		if sh.Err != nil {
			continue // those partitions' leaders did not answer: see below
		}
		for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && p.Offset >= 0 {
					ends = append(ends, listed{partKey{t.Topic, p.Partition}, p.Offset})
				}
			}
		}
	}
	waited := time.Unix(0, c.waitedAt.Load()) // the poll loop's last wait for room
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range ends {
		if p := c.mu.parts[e.k]; p != nil {
			p.hwm = max(p.hwm, e.end)
			p.listedAt = now
			p.lag.Set(float64(p.lagLocked()))
		}
	}
	for k, p := range c.mu.parts {
		if p.read != p.watchRead || waited.After(p.movedAt) {
			p.watchRead, p.movedAt = p.read, now
			if p.stalled {
				p.stalled = false
				stalled.Dec()
				c.log.Info("kafka consumer reads a stalled partition again", "topic", k.topic, "partition", k.id, "offset", p.read)
			}
			continue
		}
		// Why the partition would be stalled now: records wait past its read position, or
		// its leader has not answered its end offset for the stall timeout; neither is a
		// partition read up to its end, idle. read < 0: where the client starts is not known
		// yet.
		waiting := p.read >= 0 && p.hwm > p.read
		unanswered := !waiting && now.Sub(p.listedAt) >= c.cfg.StallTimeout
		if p.stalled {
			if !waiting && !unanswered {
				// Stalled because its leader did not answer, which it now does, and nothing
				// waits: the partition is idle, not stalled.
				p.stalled = false
				stalled.Dec()
				c.log.Info("kafka consumer partition no longer stalled: its leader answers its end offset, and it is read up to the end",
					"topic", k.topic, "partition", k.id, "offset", p.read, "end", p.hwm)
			}
			continue
		}
		if now.Sub(p.movedAt) < c.cfg.StallTimeout {
			continue
		}
		switch {
		case waiting:
			c.log.Warn("kafka consumer partition stalled: the brokers hold records past its read position, and the client has fetched none of them",
				"topic", k.topic, "partition", k.id, "offset", p.read, "end", p.hwm, "for", now.Sub(p.movedAt).Round(time.Second))
		case unanswered:
			c.log.Warn("kafka consumer partition stalled: its leader has not answered its end offset, and the client has fetched nothing of it",
				"topic", k.topic, "partition", k.id, "offset", p.read, "for", now.Sub(p.movedAt).Round(time.Second))
		default:
			continue // read up to the end: idle
		}
		p.stalled = true
		stalled.Inc()
		stalls.Inc()
	}
}

// learnStarts learns where the client starts reading each partition assigned and not fetched
// yet whose start is not known: the group's committed offset, or without one (or one before
// the log start, which the client resets from) the log start offset, as
// ConsumeResetOffset(AtStart) makes the client. That is the read position the watch compares
// with the end offset until the first record is fetched: a partition that holds records past
// it and is never served is reported as stalled, one read up to its end is idle. kgo fetches
// the committed offsets itself after OnPartitionsAssigned; the watch asks the group's
// coordinator for them again here, apart from the group's callbacks, which would hold the
// rebalance while a broker does not answer. A partition whose coordinator or leader does not
// answer stays unknown, and is tried again at the next listing.
func (c *Consumer) learnStarts(ctx context.Context) {
	var unknown map[string][]int32
	c.mu.Lock()
	for k, p := range c.mu.parts {
		if !p.fetched && p.read < 0 {
			if unknown == nil {
				unknown = map[string][]int32{}
			}
			unknown[k.topic] = append(unknown[k.topic], k.id)
		}
	}
	c.mu.Unlock()
	if unknown == nil {
		return
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = c.cfg.Group
	list := kmsg.NewPtrListOffsetsRequest()
	list.ReplicaID = -1
	for topic, ids := range unknown {
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = topic, ids
		fetch.Topics = append(fetch.Topics, ft)
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = topic
		for _, id := range ids {
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition, lp.Timestamp = id, -2 // -2: the log start
			lt.Partitions = append(lt.Partitions, lp)
		}
		list.Topics = append(list.Topics, lt)
	}
	committed := map[partKey]int64{}
	if resp, err := fetch.RequestWith(ctx, c.cl); err == nil && resp.ErrorCode == 0 {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 {
					committed[partKey{t.Topic, p.Partition}] = p.Offset // -1: none
				}
			}
		}
	}
	logStart := map[partKey]int64{}
	for _, sh := range c.cl.RequestSharded(ctx, list) {
		if sh.Err != nil {
			continue
		}
		for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && p.Offset >= 0 {
					logStart[partKey{t.Topic, p.Partition}] = p.Offset
				}
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, off := range committed {
		p := c.mu.parts[k]
		if p == nil {
			continue
		}
		ls, listed := logStart[k]
		switch {
		case off >= 0 && (!listed || off >= ls):
			p.startLocked(off)
		case listed:
			p.startLocked(ls)
		}
	}
}

// forgetStallLocked takes a partition whose state is dropped out of the stalled gauge.
func forgetStallLocked(p *partition, k partKey) {
	if p.stalled {
		p.stalled = false
		stalled.Dec()
	}
	lag.DeleteLabelValues(k.topic, strconv.Itoa(int(k.id)))
}
