package gateway

import (
	"fmt"
	"os"
	"strings"

	"github.com/otlpgate/otlpgate/client"
	"github.com/otlpgate/otlpgate/client/filedest"
)

// startDestinations reads DestFile (its content is returned) and returns the destinations a
// start builds, checked together: New and Check read them here alike.
func (c Config) startDestinations() ([]client.Config, []byte, error) {
	var body []byte
	var fileSpecs []string
	if c.DestFile != "" {
		var err error
		if body, err = os.ReadFile(c.DestFile); err != nil {
			return nil, nil, fmt.Errorf("-dest.file: %w", err)
		}
		if fileSpecs, err = parseDestFile(body); err != nil {
			return nil, nil, fmt.Errorf("-dest.file %s: %w", c.DestFile, err)
		}
	}
	configs, err := c.destinations(fileSpecs)
	if err != nil {
		return nil, nil, err
	}
	if err := readTokens(configs); err != nil {
		return nil, nil, err
	}
	if c.DestFile != "" && len(configs)+len(c.Extra) == 0 {
		return nil, nil, fmt.Errorf("-dest.file %s: no destination", c.DestFile)
	}
	if err := c.checkTenants(configs); err != nil {
		return nil, nil, err
	}
	return configs, body, nil
}

// Check does what New and Start do before they bind or dial: it validates c, reads -dest.file
// and every file the intakes and destinations read (TLS certificates, keys and CAs, token files,
// the Kafka subscriptions) and builds the tenant table and the resource router, but binds no
// port, dials no upstream and creates nothing on disk (otlpgate -check). It returns a one-line
// summary of what a start would run.
func (c Config) Check() (string, error) {
	if err := c.Validate(); err != nil {
		return "", err
	}
	configs, _, err := c.startDestinations()
	if err != nil {
		return "", err
	}
	for _, d := range configs {
		if d.Protocol == client.ProtocolFile {
			if err := filedest.CheckPath(d.Path); err != nil {
				return "", fmt.Errorf("-dest %s: %w", d.Name, err)
			}
			continue
		}
		if err := d.CheckFiles(); err != nil {
			return "", fmt.Errorf("-dest %s: %w", d.Name, err)
		}
	}
	if len(configs)+len(c.Extra) == 0 {
		if err := filedest.CheckPath(c.File.Path); err != nil {
			return "", fmt.Errorf("-file.path: %w", err)
		}
	}
	for _, check := range []func() error{c.GRPC.CheckFiles, c.HTTP.CheckFiles, c.Kafka.CheckFiles, c.UDS.CheckFiles} {
		if err := check(); err != nil {
			return "", err
		}
	}
	if err := c.buildTenants(configs); err != nil {
		return "", err
	}
	if err := c.buildRoutes(configs); err != nil {
		return "", err
	}
	var intakes []string
	for _, in := range []struct{ name, addr string }{{"grpc", c.GRPC.Listen}, {"http", c.HTTP.Listen}, {"kafka", c.Kafka.Listen}, {"uds", c.UDS.Listen}} {
		if in.addr != "" {
			intakes = append(intakes, in.name+" "+in.addr)
		}
	}
	if len(intakes) == 0 {
		intakes = append(intakes, "none")
	}
	var dests []string
	for _, d := range configs {
		dests = append(dests, d.Name)
	}
	for _, d := range c.Extra {
		dests = append(dests, d.Name())
	}
	if len(dests) == 0 {
		dests = append(dests, "file "+c.File.Path)
	}
	spool := "off"
	if c.Spool.Dir != "" {
		spool = c.Spool.Dir
	}
	return fmt.Sprintf("configuration OK: intakes %s; destinations %s; spool %s; ack %s",
		strings.Join(intakes, ", "), strings.Join(dests, ", "), spool, c.Pipeline.Ack), nil
}
