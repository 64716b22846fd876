package kafka

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiKeys is the ApiKeys list of every ApiVersions response; read-only.
var apiKeys = func() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, len(supportedAPIs))
	for i, r := range supportedAPIs {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = r.key, r.min, r.max
		keys[i] = k
	}
	return keys
}()

// apiVersions answers a supported ApiVersions. From v3 on the request names the client
// software, which becomes the client_software_name and client_software_version labels; like
// Apache Kafka, a name or version outside [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? gets
// INVALID_REQUEST, and so does one longer than -kafka.max-software-bytes.
func (c *conn) apiVersions() ([]byte, bool) {
	requestsApiVersions.Inc()
	r := &c.apiReq
	r.Version = c.hdr.version
	if err := r.UnsafeReadFrom(c.hdr.body); err != nil {
		badMalformed.Inc()
		return nil, false
	}
	resp := &c.apiResp
	*resp = kmsg.NewApiVersionsResponse()
	resp.Version = c.hdr.version
	resp.ApiKeys = apiKeys
	if r.Version >= 3 {
		// The length first: validSoftware reads every byte of what may be megabytes.
		if !c.softwareFits(r.ClientSoftwareName, r.ClientSoftwareVersion) ||
			!validSoftware(r.ClientSoftwareName) || !validSoftware(r.ClientSoftwareVersion) {
			resp.ErrorCode = errInvalidRequest
		} else {
			c.noteSoftware(r.ClientSoftwareName, r.ClientSoftwareVersion)
		}
	}
	return c.respond(resp, false), true
}

// apiVersionsTooNew is the KIP-511 answer: the v0 layout, UNSUPPORTED_VERSION, and the keys.
func (c *conn) apiVersionsTooNew() []byte {
	requestsApiVersions.Inc()
	resp := &c.apiResp
	*resp = kmsg.NewApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = errUnsupportedVersion
	resp.ApiKeys = apiKeys
	return c.respond(resp, false)
}

// noteSoftware records the client software; name and version alias the request buffer.
func (c *conn) noteSoftware(name, version string) {
	if name == c.lbl.softwareName && version == c.lbl.softwareVersion {
		return
	}
	l := *c.lbl
	l.softwareName = strings.Clone(name)
	l.softwareVersion = strings.Clone(version)
	c.lbl = &l
}

// validSoftware matches [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?.
func validSoftware(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		alnum := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
		inner := i > 0 && i < len(s)-1 && (b == '-' || b == '.')
		if !alnum && !inner {
			return false
		}
	}
	return true
}
