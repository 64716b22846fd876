package client

// CheckFiles reads what a destination built from c reads from disk (tls-ca, tls-cert, tls-key,
// bearer-token-file) through the functions New and a fleet's members use, without preparing a
// connection: otlpgate -check runs it so that a missing or unreadable file is reported before a
// start, not at the first backend a fleet resolves. Safe for concurrent use.
func (c Config) CheckFiles() error {
	if !c.TLS.Insecure {
		if _, err := tlsConfig(c.TLS); err != nil {
			return err
		}
	}
	if c.BearerTokenFile != "" {
		if _, err := bearerAuth(c.BearerTokenFile); err != nil {
			return err
		}
	}
	return nil
}
