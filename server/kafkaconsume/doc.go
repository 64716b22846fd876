// Package kafkaconsume is otlpgate's Kafka consumer intake (-kafka.consume.*): it reads OTLP
// records from Kafka topics as a member of a consumer group and admits them like any intake,
// committing a partition's offset only once every record before it was delivered.
//
// A record's value is an OTLP Export*ServiceRequest, in the Collector's otlp_proto encoding
// (the protobuf bytes, scanned at the intakes' scan depth) or otlp_json (transcoded to the same
// bytes); its topic says its signal. It is admitted with Admitter.AdmitDelivered, which returns
// the batch that holds it; the record's offset becomes committable once that batch ended
// delivered at every destination, or at once when admission made it durable (the spool) or
// the processing steps dropped it. Per partition the committable offset is the contiguous one:
// a record is committed only with every record before it, so that a kill -9 anywhere loses
// nothing and a restart re-reads at most what was in flight (partition.go).
//
// A batch that ends undelivered (a destination gave it up: ack timeout, retry-max-elapsed)
// rewinds its partition to the record's offset, which is read and admitted again; one its
// upstream refused for good is skipped, as sending it again cannot help. A record that can
// never be admitted (undecodable, too large, a signal or tenant no destination takes) is
// counted by reason in otlpgate_kafka_consume_skipped_records_total, logged at most once per
// interval, and skipped: it never blocks its partition. So is a compressed record batch that
// would decompress past MaxBatchBytes, which the client stops at without building it
// (skipBatch; applyRewinds moves the client past it). Batches within that bound are decompressed
// only while the client holds less than MaxBufferedBytes of fetched records (fetchBudget, the
// client's decompressor): past it a batch is put off and fetched again, never skipped. A record
// the pipeline has no room for
// now waits, and the consumer stops polling meanwhile: Kafka holds the backlog, and fetching
// resumes when the destinations drain (backpressure, never a refusal). A rebalance the group
// wants meanwhile is not held: the records of the poll not yet admitted are given up and their
// partitions rewound to them (handleYielded).
//
// The group rebalances cooperatively (cooperative sticky): a partition taken away is first
// given up to RevokeWait to finish what it has in flight, then its acknowledged offset is
// committed, so that the new owner re-reads only what was not delivered.
//
// A partition whose read position stays still for StallTimeout, outside waits for room, while
// the brokers hold records past it (or its leader does not answer its end offset for as long)
// is logged and counted in otlpgate_kafka_consume_stalled_partitions, until it moves or (a
// silent leader) its leader answers again with nothing past it: kgo retries a leader that answers
// without serving a partition by itself, and says nothing of it to the poll (watch.go). The end
// offsets that watch lists keep the lag true while the fetches bring nothing. A partition
// enters the watch on its assignment (OnPartitionsAssigned), before its first fetch, at the
// offset the client starts from (learnStarts).
//
// It imports fastpath, fastpath/pipeline, fastpath/tenant, pool, internal/admission (the
// intake limiter), internal/statusmetrics (the metrics the status page reads) and franz-go's kgo; nothing of
// otlpgate imports it but internal/gateway. Goroutines: one polls and admits (run), one commits
// every CommitInterval (commitLoop), one lists the end offsets every third of StallTimeout
// (watchLoop); kgo's own goroutines call the rebalance callbacks, which
// run between polls (BlockRebalanceOnPoll). Start and Shutdown are called once each.
package kafkaconsume
