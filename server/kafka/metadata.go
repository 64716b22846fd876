package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// brokerNodeID is the node id of the one broker Metadata lists, also the controller.
const brokerNodeID = 0

// clusterID names the cluster in Metadata v2+.
var clusterID = "otlpgate"

// metadata answers Metadata with this listener as the only broker of a cluster without topics:
// a client reconnects to the broker listed and sends its telemetry there. Topics asked for by
// name get UNKNOWN_TOPIC_OR_PARTITION, by id UNKNOWN_TOPIC_ID.
func (c *conn) metadata() ([]byte, bool) {
	requestsMetadata.Inc()
	r := &c.metaReq
	r.Version = c.hdr.version
	// Topic names alias the request buffer, which outlives the response; endResponse drops
	// them with the decoded request.
	if err := r.UnsafeReadFrom(c.hdr.body); err != nil {
		badMalformed.Inc()
		return nil, false
	}
	// Each topic is answered with its name and at most 32 bytes of fixed fields; the rest of
	// the response (header, the one broker, cluster id) fits in 128 bytes and the host.
	size := 128 + len(c.broker[0].Host)
	for _, t := range r.Topics {
		size += 32
		if t.Topic != nil {
			size += len(*t.Topic)
		}
	}
	c.reserveOut(size)
	resp := &c.metaResp
	*resp = kmsg.NewMetadataResponse()
	resp.Version = c.hdr.version
	resp.Brokers = c.broker
	resp.ClusterID = &clusterID
	resp.ControllerID = brokerNodeID
	for _, t := range r.Topics {
		rt := kmsg.NewMetadataResponseTopic()
		if t.Topic != nil {
			rt.ErrorCode = errUnknownTopicOrPartition
			rt.Topic = t.Topic
		} else {
			rt.ErrorCode = errUnknownTopicID
			rt.TopicID = t.TopicID
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return c.respond(resp, c.hdr.version >= 9), true
}
