package spool

// killProcess simulates kill -9 of the process using fs, as opposed to Crash, which simulates a
// power loss: the kernel keeps every write and every directory change (the page cache survives
// the process), while the process's open handles die with it, which gives back the space of
// removed files they held. A pending crash point is disarmed. The spool that used fs must be
// stopped first (abandon).
func (fs *CrashFS) killProcess() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.mu.gen++
	fs.mu.dead = false
	fs.mu.crashAt = 0
	for _, n := range fs.mu.files {
		n.opens = 0
	}
	for n := range fs.mu.orphans {
		n.opens = 0
	}
	clear(fs.mu.orphans)
}

// crashed reports whether a crash point armed with CrashAfter has fired: the process is dead
// and every operation fails until Crash or killProcess.
func (fs *CrashFS) crashed() bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.mu.dead
}
