package spool

import (
	"os"
	"syscall"
)

// datasync is fdatasync: segment files are preallocated by nothing and grow by writes, but
// fdatasync still flushes the size change, which is the metadata a reader needs; it skips the
// timestamps that fsync would also write.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
