package spool

import "errors"

// lockName is the file in the spool directory whose lock says which process has the spool.
// Neither a segment's nor a cursor's name: recovery passes over it.
const lockName = "lock"

// ErrLocked refuses to open a spool directory another process has open.
var ErrLocked = errors.New("spool dir in use")

// Locker is implemented by an FS that can take a spool directory for one process (OSFS, on
// Unix). Open takes the lock before it reads anything and Close gives it back; an FS without
// it (the tests' in-memory one) is not shared between processes.
type Locker interface {
	Lock(dir string) (unlock func() error, err error)
}
