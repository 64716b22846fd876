package kafka

import (
	"fmt"

	"github.com/otlpgate/otlpgate/internal/credfile"
)

// CheckFiles reads the files New reads (the subscriptions, the TLS certificate, key and client
// CA) and checks the subscriptions as New builds them, without building a server: otlpgate
// -check. Safe for concurrent use.
func (c Config) CheckFiles() error {
	if _, err := loadSubscriptions(&c, 0); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	if c.TLSCert != "" {
		if _, err := credfile.ServerTLS(c.TLSCert, c.TLSKey, c.TLSClientCA); err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
	}
	return nil
}
