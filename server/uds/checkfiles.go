package uds

// CheckFiles resolves what New looks up outside the process, the socket's group (-uds.group),
// without building a server: otlpgate -check. Safe for concurrent use.
func (c Config) CheckFiles() error {
	if c.Listen != "" && c.Group != "" {
		if _, err := lookupGroup(c.Group); err != nil {
			return err
		}
	}
	return nil
}
