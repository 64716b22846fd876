package kafka

// Kafka error codes this listener answers with. The client's reaction to each is what decides
// which one a situation gets: see testdata/kip714/README.md.
const (
	errNone                       int16 = 0
	errUnknownServerError         int16 = -1
	errUnknownTopicOrPartition    int16 = 3
	errUnsupportedVersion         int16 = 35
	errInvalidRequest             int16 = 42 // the client stops its telemetry for good
	errUnsupportedCompressionType int16 = 76 // the client re-fetches after one interval
	errInvalidRecord              int16 = 87 // the client stops its telemetry for good
	errThrottlingQuotaExceeded    int16 = 89 // the client re-fetches after one interval
	errUnknownTopicID             int16 = 100
	errUnknownSubscriptionID      int16 = 117 // the client re-fetches at once
	errTelemetryTooLarge          int16 = 118 // the client keeps pushing
)

// API keys served, and the version ranges advertised for them.
const (
	keyMetadata                  int16 = 3
	keyApiVersions               int16 = 18
	keyGetTelemetrySubscriptions int16 = 71
	keyPushTelemetry             int16 = 72
)

type versionRange struct{ key, min, max int16 }

// supportedAPIs is the ApiVersions answer. Metadata goes up to the newest version kmsg encodes;
// ApiVersions stops at 4 (v5 adds cluster and node checks this listener does not make).
var supportedAPIs = [...]versionRange{
	{keyMetadata, 0, 13},
	{keyApiVersions, 0, 4},
	{keyGetTelemetrySubscriptions, 0, 0},
	{keyPushTelemetry, 0, 0},
}

// supported reports whether key at version is served.
func supported(key, version int16) bool {
	for _, r := range supportedAPIs {
		if r.key == key {
			return version >= r.min && version <= r.max
		}
	}
	return false
}

// flexibleRequest reports whether a served key at version uses request header v2 (tagged
// fields after the client id). Response headers follow the same rule, except ApiVersions,
// whose response header is always v0 so that a client can read it before knowing the version.
func flexibleRequest(key, version int16) bool {
	switch key {
	case keyMetadata:
		return version >= 9
	case keyApiVersions:
		return version >= 3
	case keyGetTelemetrySubscriptions, keyPushTelemetry:
		return true
	}
	return false
}
